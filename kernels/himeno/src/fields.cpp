#include <gpuverbs/himeno/fields.hpp>
#include <gpuverbs/splitmix.hpp>

namespace gv::himeno {
namespace {

HostFields allocate(const Layout& l) {
  HostFields f;
  f.layout = l;
  f.p.assign(std::size_t(l.elems()), 0.0f);
  f.coef.assign(std::size_t(kCoefCount * l.elems()), 0.0f);
  return f;
}

// Calls fn(local_i, j, k, global_i) for every stored point (padding excluded).
template <class Fn>
void for_each_point(const Slab& s, Fn&& fn) {
  const Layout& l = s.local;
  for (int i = 0; i < l.ni; ++i)
    for (int j = 0; j < l.nj; ++j)
      for (int k = 0; k < l.nk; ++k) fn(i, j, k, s.global_plane(i));
}

// splitmix64, a stateless hash: a point's random value depends on (seed, field, point) alone
// and not on the slab it is stored in.
using gv::splitmix64;

float uniform(std::uint64_t seed, int field, const GridSize& g, int gi, int j, int k,
              float lo, float hi) {
  const std::uint64_t point = (std::uint64_t(gi) * g.nj + j) * g.nk + k;
  const std::uint64_t h = splitmix64(seed ^ splitmix64(std::uint64_t(field) << 56 ^ point));
  const float u = float(h >> 40) * (1.0f / float(1u << 24));  // [0, 1), 24 bits
  return lo + (hi - lo) * u;
}

}  // namespace

HostFields standard_fields(const Slab& s) {
  HostFields f = allocate(s.local);
  const Layout& l = s.local;
  const float denom = float((s.global.ni - 1) * (s.global.ni - 1));
  static constexpr float kValue[kCoefCount] = {1.0f, 1.0f, 1.0f, 1.0f / 6.0f, 0.0f, 0.0f,
                                               0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f};
  for_each_point(s, [&](int i, int j, int k, int gi) {
    const std::int64_t at = l.index(i, j, k);
    f.p[std::size_t(at)] = float(gi * gi) / denom;
    for (int c = 0; c < kCoefCount; ++c) f.field(Coef(c))[at] = kValue[c];
  });
  return f;
}

HostFields standard_fields(const GridSize& g) { return standard_fields(make_slab(g, 1, 0)); }

HostFields random_fields(const Slab& s, std::uint64_t seed) {
  HostFields f = allocate(s.local);
  const Layout& l = s.local;
  const GridSize& g = s.global;
  for_each_point(s, [&](int i, int j, int k, int gi) {
    const std::int64_t at = l.index(i, j, k);
    auto u = [&](int field, float lo, float hi) { return uniform(seed, field, g, gi, j, k, lo, hi); };
    f.p[std::size_t(at)] = u(kCoefCount, 0.0f, 1.0f);
    for (Coef c : {kA0, kA1, kA2, kC0, kC1, kC2}) f.field(c)[at] = u(c, 0.5f, 1.5f);
    f.field(kA3)[at] = u(kA3, 0.10f, 0.16f);
    for (Coef c : {kB0, kB1, kB2}) f.field(c)[at] = u(c, -0.1f, 0.1f);
    f.field(kWrk1)[at] = u(kWrk1, -0.01f, 0.01f);
    f.field(kBnd)[at] = u(kBnd, 0.0f, 1.0f) < 0.125f ? 0.0f : 1.0f;
  });
  return f;
}

HostFields random_fields(const GridSize& g, std::uint64_t seed) {
  return random_fields(make_slab(g, 1, 0), seed);
}

}  // namespace gv::himeno
