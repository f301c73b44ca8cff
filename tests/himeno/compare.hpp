// Error measures shared by the Himeno tests.
#pragma once
#include <gpuverbs/himeno/grid.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace gv::himeno::test {

/// ||got - ref||_2 / ||ref||_2 over the stored points of `l` (padding excluded); infinity if
/// any value of `got` is not finite, so a poisoned (NaN) point left unwritten always fails.
template <class A, class B>
double field_rel_error(const Layout& l, const std::vector<A>& got, const std::vector<B>& ref) {
  double num = 0.0, den = 0.0;
  for (int i = 0; i < l.ni; ++i)
    for (int j = 0; j < l.nj; ++j)
      for (int k = 0; k < l.nk; ++k) {
        const auto at = std::size_t(l.index(i, j, k));
        const double g = double(got[at]), r = double(ref[at]);
        if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
        num += (g - r) * (g - r);
        den += r * r;
      }
  return std::sqrt(num / den);
}

inline double rel_error(double got, double ref) {
  return std::isfinite(got) ? std::fabs(got - ref) / std::fabs(ref)
                            : std::numeric_limits<double>::infinity();
}

}  // namespace gv::himeno::test
