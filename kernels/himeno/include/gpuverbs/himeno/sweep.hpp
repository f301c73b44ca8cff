// One Jacobi sweep as the GPU runs it: the launch geometry, the kernel's by-value handle and
// the per-thread body. Everything here is __host__ __device__, so the host emulation
// (reference.hpp) runs the very code the kernel runs, and CI tests it without a GPU.
//
// Work split. A thread owns one row j and four consecutive k (one 16-byte group, k0 = 4g) and
// marches over a run of planes i, keeping the 3 x 3 rows of p around it for planes i-1, i, i+1
// in registers: each p value is loaded once per thread (plus the k0-1 and k0+4 neighbours of
// each row, which the adjacent thread has just brought into L1), and one new plane is loaded
// per step. Per point the sweep moves, from device memory: p once (the window; the rows and
// planes neighbouring threads and blocks share come from L1/L2), the twelve coefficient
// fields once each, the new p once = 14 floats = 56 bytes. ncu on an H200 at size L counted
// 1.72 GB read + 0.12 GB written per sweep of 32.9 M points: 55.9 bytes per point.
//
// Boundary columns k = 0 and k >= nk-1 sharing a group with interior points are written with
// their old value, so the output group is one full 16-byte store; the boundary never changes,
// so this is exact as long as both p buffers start with the same boundary (DeviceDomain does).
#pragma once
#include <gpuverbs/config.hpp>
#include <gpuverbs/himeno/grid.hpp>
#include <gpuverbs/himeno/stencil.hpp>

#include <cstdint>

// Loops over registers must be unrolled so the arrays stay in registers.
#if defined(__CUDACC__)
#define GV_HIMENO_UNROLL _Pragma("unroll")
#else
#define GV_HIMENO_UNROLL
#endif

namespace gv::himeno {

inline constexpr std::uint32_t kSweepArgsVersion = 1;

/// What one sweep reads and writes; passed to the kernel by value. p_in and p_out are two
/// different buffers of `layout`; `coef` holds kCoefCount fields, layout.elems() floats apart.
/// The buffers must outlive every kernel launched with the handle.
struct SweepArgs {
  std::uint32_t version = kSweepArgsVersion;
  Layout layout;
  const float* p_in = nullptr;
  float* p_out = nullptr;
  const float* coef = nullptr;
  float omega = kOmega;
};
static_assert(sizeof(SweepArgs) == 56, "SweepArgs is a host/device ABI: change kSweepArgsVersion");

/// The type the point update computes in. Storage (and so the bytes moved) is float either
/// way. kFloat is the benchmark's own arithmetic; its residual ss = a3*s0 - p cancels about
/// four digits at size M (ss ~ 2e-5 against p ~ 1), so its Gosa is off a double-precision check
/// by up to 3.4e-4 there. kDouble widens the loaded floats (exactly) and rounds only the new p,
/// which keeps Gosa within 6e-6 of the double reference (notes/himeno.md).
enum class Arithmetic : int { kFloat, kDouble };

/// Launch geometry of one sweep over a plane range: 1-D blocks of kThreads, grid x over the
/// 16-byte groups of a row, y over rows, z over runs of planes_per_block planes. Every block
/// writes one partial Gosa, at its linear index x + grid_x * (y + grid_y * z).
struct LaunchPlan {
  static constexpr int kThreads = 256;
  int groups_x = 0;          ///< 16-byte groups of a row per block (a power of two <= 32)
  int rows = 0;              ///< rows per block: kThreads / groups_x
  int planes_per_block = 0;  ///< planes one thread marches over
  Arithmetic arithmetic = Arithmetic::kDouble;
  int grid_x = 0, grid_y = 0, grid_z = 0;

  GV_HD constexpr int blocks() const { return grid_x * grid_y * grid_z; }
};

/// The default run of planes per thread: the fastest of 2..32 on an H200 at size L
/// (2026-11-22; 4 to 32 lie within 1.5%, 2 is 5% slower: notes/himeno.md).
inline constexpr int kDefaultPlanesPerBlock = 4;

/// Plans one sweep over `r` (check_range(l, r) must hold; an empty range gives 0 blocks).
/// planes_per_block <= 0 picks kDefaultPlanesPerBlock. Throws std::invalid_argument on a bad
/// range.
LaunchPlan plan_sweep(const Layout& l, PlaneRange r, int planes_per_block = 0,
                      Arithmetic arithmetic = Arithmetic::kDouble);

/// The largest number of blocks (= partials) any set of disjoint sweeps over `l` can need.
std::int64_t max_sweep_blocks(const Layout& l);

/// What one thread of a sweep does: row j, columns k0..k0+3, planes [i_begin, i_end).
struct ThreadWork {
  int j = 0, k0 = 0, i_begin = 0, i_end = 0;
  bool active = false;  ///< false for threads past the row, the last interior row or the range
};

GV_HD GV_INLINE ThreadWork thread_work(const LaunchPlan& pl, const Layout& l, PlaneRange r,
                                       int bx, int by, int bz, int thread) {
  ThreadWork w;
  const int g = bx * pl.groups_x + thread % pl.groups_x;
  w.k0 = 4 * g;
  w.j = 1 + by * pl.rows + thread / pl.groups_x;
  w.i_begin = r.begin + bz * pl.planes_per_block;
  w.i_end = w.i_begin + pl.planes_per_block < r.end ? w.i_begin + pl.planes_per_block : r.end;
  w.active = w.k0 < l.pitch && w.j <= l.nj - 2 && w.i_begin < w.i_end;
  return w;
}

namespace detail {

struct Vec4 {
  float v[4];
};

// p is read through the read-only path (neighbouring threads and the next plane run reuse
// it from L1/L2); each coefficient is read once per sweep, so it is marked streaming
// (evict-first) to leave L2 to p.
//
// The read-only path (ld.global.nc) is only defined for memory no one writes while the kernel
// runs. A kernel that reads p written during its lifetime — a halo plane a peer puts after the
// kernel started, or planes other blocks of a persistent kernel wrote in its previous
// iteration — loads p with kCoherent: a weak load cached in L1 (ld.global.ca), which sees every
// store ordered before it by the acquire that ended the wait (or the grid barrier).
template <bool kCoherent>
GV_HD GV_INLINE Vec4 load_p4(const float* a) {
#if GV_DEVICE_PASS
  float4 t;
  if constexpr (kCoherent) t = __ldca(reinterpret_cast<const float4*>(a));
  else t = __ldg(reinterpret_cast<const float4*>(a));
  return {{t.x, t.y, t.z, t.w}};
#else
  return {{a[0], a[1], a[2], a[3]}};
#endif
}
template <bool kCoherent>
GV_HD GV_INLINE float load_p1(const float* a) {
#if GV_DEVICE_PASS
  if constexpr (kCoherent) return __ldca(a);
  else return __ldg(a);
#else
  return *a;
#endif
}
GV_HD GV_INLINE Vec4 load_coef4(const float* a) {
#if GV_DEVICE_PASS
  const float4 t = __ldcs(reinterpret_cast<const float4*>(a));
  return {{t.x, t.y, t.z, t.w}};
#else
  return {{a[0], a[1], a[2], a[3]}};
#endif
}
GV_HD GV_INLINE void store4(float* a, const Vec4& x) {
#if GV_DEVICE_PASS
  *reinterpret_cast<float4*>(a) = make_float4(x.v[0], x.v[1], x.v[2], x.v[3]);
#else
  for (int e = 0; e < 4; ++e) a[e] = x.v[e];
#endif
}

/// Columns k0-1 | k0..k0+3 | k0+4 of one row.
struct Row {
  float left;
  Vec4 mid;
  float right;
};
/// Rows j-1, j, j+1 of one plane.
struct PlaneRows {
  Row row[3];
};

template <int X>
GV_HD GV_INLINE float elem(const Row& r) {
  if constexpr (X < 0) {
    return r.left;
  } else if constexpr (X > 3) {
    return r.right;
  } else {
    return r.mid.v[X];
  }
}

/// p around column k0+E in arithmetic T, for residual(): plane[0..2] are planes i-1, i, i+1.
template <class T, int E>
struct LaneView {
  const PlaneRows* plane;
  template <int DI, int DJ, int DK>
  GV_HD GV_INLINE T at() const {
    return T(elem<E + DK>(plane[DI + 1].row[DJ + 1]));
  }
};

template <bool kCoherent>
GV_HD GV_INLINE PlaneRows load_plane(const float* p, const Layout& l, int i, int j, int k0) {
  PlaneRows out;
  GV_HIMENO_UNROLL
  for (int r = 0; r < 3; ++r) {
    const float* base = p + l.index(i, j - 1 + r, k0);
    out.row[r].mid = load_p4<kCoherent>(base);
    // Neighbours outside the row feed only boundary columns, whose result is discarded.
    out.row[r].left = k0 > 0 ? load_p1<kCoherent>(base - 1) : 0.0f;
    out.row[r].right = k0 + 4 < l.pitch ? load_p1<kCoherent>(base + 4) : 0.0f;
  }
  return out;
}

template <class T, int E>
GV_HD GV_INLINE void update_lane(const SweepArgs& a, int k0, const PlaneRows* window,
                                 const Vec4* cf, Vec4& out, double& gosa) {
  const float centre = window[1].row[1].mid.v[E];
  const int k = k0 + E;
  if (k < 1 || k > a.layout.nk - 2) {
    out.v[E] = centre;
    return;
  }
  const PointCoefs<T> c{T(cf[kA0].v[E]), T(cf[kA1].v[E]), T(cf[kA2].v[E]), T(cf[kA3].v[E]),
                        T(cf[kB0].v[E]), T(cf[kB1].v[E]), T(cf[kB2].v[E]), T(cf[kC0].v[E]),
                        T(cf[kC1].v[E]), T(cf[kC2].v[E]), T(cf[kBnd].v[E]), T(cf[kWrk1].v[E])};
  const T ss = residual(LaneView<T, E>{window}, c);
  gosa += double(ss * ss);
  out.v[E] = float(T(centre) + T(a.omega) * ss);
}

}  // namespace detail

/// The body of one sweep thread: updates p_out at row j, columns k0..k0+3, planes
/// [i_begin, i_end) from p_in, computing in T (float or double), and returns the thread's
/// share of Gosa (sum of ss^2 over its interior points, in double, in plane order).
/// kCoherent: p_in may have been written while this kernel runs (see load_p4); the values
/// computed are the same either way.
template <class T, bool kCoherent = false>
GV_HD inline double sweep_column(const SweepArgs& a, int j, int k0, int i_begin, int i_end) {
  const Layout& l = a.layout;
  const std::int64_t field = l.elems();
  detail::PlaneRows window[3];
  window[0] = detail::load_plane<kCoherent>(a.p_in, l, i_begin - 1, j, k0);
  window[1] = detail::load_plane<kCoherent>(a.p_in, l, i_begin, j, k0);
  double gosa = 0.0;
  for (int i = i_begin; i < i_end; ++i) {
    window[2] = detail::load_plane<kCoherent>(a.p_in, l, i + 1, j, k0);
    const std::int64_t at = l.index(i, j, k0);
    detail::Vec4 cf[kCoefCount];
    GV_HIMENO_UNROLL
    for (int f = 0; f < kCoefCount; ++f) cf[f] = detail::load_coef4(a.coef + f * field + at);
    detail::Vec4 out;
    detail::update_lane<T, 0>(a, k0, window, cf, out, gosa);
    detail::update_lane<T, 1>(a, k0, window, cf, out, gosa);
    detail::update_lane<T, 2>(a, k0, window, cf, out, gosa);
    detail::update_lane<T, 3>(a, k0, window, cf, out, gosa);
    detail::store4(a.p_out + at, out);
    window[0] = window[1];
    window[1] = window[2];
  }
  return gosa;
}

}  // namespace gv::himeno
