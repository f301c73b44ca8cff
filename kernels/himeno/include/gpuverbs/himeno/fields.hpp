// The benchmark's arrays on the host: p and the twelve coefficient fields, and their initial
// values (the benchmark's own, or seeded random ones for tests).
#pragma once
#include <gpuverbs/himeno/grid.hpp>
#include <gpuverbs/himeno/stencil.hpp>

#include <cstdint>
#include <vector>

namespace gv::himeno {

/// p and the coefficients of one grid or slab. `coef` holds kCoefCount fields back to back,
/// field f at f * layout.elems(); padding columns (k >= nk) hold 0.
struct HostFields {
  Layout layout;
  std::vector<float> p;
  std::vector<float> coef;

  float* field(Coef f) { return coef.data() + f * layout.elems(); }
  const float* field(Coef f) const { return coef.data() + f * layout.elems(); }
};

/// The benchmark's initial values for slab `s`: a0..a2 = 1, a3 = 1/6, b = 0, c = 1, bnd = 1,
/// wrk1 = 0 everywhere, p[i][j][k] = i*i / (ni-1)^2 in float with i the global plane index.
HostFields standard_fields(const Slab& s);
/// The same for a whole grid (one slab).
HostFields standard_fields(const GridSize& g);

/// Seeded random values that keep the iteration contracting: p in [0, 1), a0..a2 and c0..c2 in
/// [0.5, 1.5), a3 in [0.10, 0.16), b in [-0.1, 0.1), wrk1 in [-0.01, 0.01), bnd 1 except about
/// one point in eight where it is 0 (a masked point, which the sweep must leave unchanged).
/// Values depend on the global point only, so every slab decomposition sees the same grid.
HostFields random_fields(const Slab& s, std::uint64_t seed);
HostFields random_fields(const GridSize& g, std::uint64_t seed);

}  // namespace gv::himeno
