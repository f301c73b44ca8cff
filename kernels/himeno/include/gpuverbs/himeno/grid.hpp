// Himeno geometry: benchmark sizes, the array layout, plane ranges and the slab decomposition
// along the slowest dimension. Plain C++ (usable from host code and from kernels).
//
// Conventions (RIKEN himenoBMTxpa, the dynamic-allocation version): a grid of ni x nj x nk
// points, i slowest and k contiguous; every point holds values, the Jacobi sweep updates the
// interior 1 <= i <= ni-2, 1 <= j <= nj-2, 1 <= k <= nk-2 and the boundary never changes.
// (The static version, himenoBMTxp, declares MIMAX = ni + 1 and sweeps 1 <= i < MIMAX-2: the
// same interior.)
#pragma once
#include <gpuverbs/config.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace gv::himeno {

/// Floating-point operations per interior point per iteration, as the benchmark counts them.
inline constexpr int kFlopsPerPoint = 34;
/// The relaxation factor of the benchmark.
inline constexpr float kOmega = 0.8f;

/// Points per dimension, boundary included.
struct GridSize {
  int ni = 0, nj = 0, nk = 0;
  friend constexpr bool operator==(const GridSize&, const GridSize&) = default;
};

enum class SizeClass { XS, S, M, L, XL };

/// The benchmark's named sizes: XS 32x32x64, S 64x64x128, M 128x128x256, L 256x256x512,
/// XL 512x512x1024.
GridSize grid_size(SizeClass s);
/// "XS", "S", "M", "L", "XL" (case-insensitive); nullopt for anything else.
std::optional<SizeClass> parse_size_class(std::string_view name);
const char* to_string(SizeClass s);

/// Interior points of a whole grid: the points one iteration updates.
constexpr std::int64_t interior_points(const GridSize& g) {
  return std::int64_t(g.ni - 2) * (g.nj - 2) * (g.nk - 2);
}

/// Storage of one field: rows of `pitch` floats (pitch >= nk, a multiple of 4 so every row
/// starts 16-byte aligned for vector loads), nj rows per plane, ni planes. A plane is
/// contiguous, so a halo plane is one contiguous block of plane_elems() floats.
struct Layout {
  int ni = 0, nj = 0, nk = 0;
  int pitch = 0;

  GV_HD constexpr std::int64_t plane_elems() const { return std::int64_t(nj) * pitch; }
  GV_HD constexpr std::int64_t elems() const { return std::int64_t(ni) * plane_elems(); }
  GV_HD constexpr std::int64_t index(int i, int j, int k) const {
    return std::int64_t(i) * plane_elems() + std::int64_t(j) * pitch + k;
  }
  /// Offset (floats) of plane i from the start of a field: the address of a halo plane.
  GV_HD constexpr std::int64_t plane_offset(int i) const { return std::int64_t(i) * plane_elems(); }
  friend constexpr bool operator==(const Layout&, const Layout&) = default;
};

/// Throws std::invalid_argument unless every dimension is >= 3 (one interior point at least).
Layout make_layout(int ni, int nj, int nk);

/// Planes [begin, end) of a field that one launch updates. Valid when 1 <= begin <= end <= ni-1.
struct PlaneRange {
  int begin = 0, end = 0;
  GV_HD constexpr int size() const { return end - begin; }
  GV_HD constexpr bool empty() const { return end <= begin; }
  friend constexpr bool operator==(const PlaneRange&, const PlaneRange&) = default;
};

/// Throws std::invalid_argument unless `r` lies inside the interior planes of `l`.
void check_range(const Layout& l, PlaneRange r);

/// The two launches of the overlap scheme: `top` holds the lower half of the planes
/// (rounded down), `bottom` the rest. Both are empty only if `r` is.
struct Halves {
  PlaneRange top, bottom;
};
Halves split_halves(PlaneRange r);

/// One part of the grid split along i: `planes` interior planes starting at global plane
/// `first_plane`, stored with one halo plane on each side. Local plane 0 is the lower halo
/// (the global boundary plane 0 for part 0), local plane planes+1 the upper halo.
struct Slab {
  GridSize global;
  int part = 0, parts = 1;
  int first_plane = 1;  ///< global index of local plane 1
  int planes = 0;       ///< interior planes this part updates
  Layout local;         ///< planes + 2 planes of global.nj x global.nk

  /// The planes the part updates, in local indices.
  PlaneRange owned() const { return {1, planes + 1}; }
  /// Global plane index of local plane `l`.
  int global_plane(int l) const { return first_plane - 1 + l; }
  // Halo exchange, in floats from the start of the p field (each one plane long): the part
  // sends its first and last owned planes and receives its neighbours' into its halos.
  std::int64_t send_lower_offset() const { return local.plane_offset(1); }
  std::int64_t send_upper_offset() const { return local.plane_offset(planes); }
  std::int64_t recv_lower_offset() const { return local.plane_offset(0); }
  std::int64_t recv_upper_offset() const { return local.plane_offset(planes + 1); }
};

/// Splits the ni-2 interior planes of `g` into `parts` slabs whose sizes differ by at most one
/// (the first ones larger). Throws std::invalid_argument if a part would get no plane.
Slab make_slab(const GridSize& g, int parts, int part);

}  // namespace gv::himeno
