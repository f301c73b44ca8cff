// The GPU iteration run on the host: emulate_sweep over ping-pong buffers, with every point a
// sweep must write poisoned (NaN) beforehand.
#pragma once
#include <gpuverbs/himeno/reference.hpp>

#include <limits>
#include <numeric>
#include <vector>

namespace gv::himeno::test {

class HostKernel {
 public:
  HostKernel(const HostFields& f, Arithmetic arithmetic, int planes_per_block = 0)
      : f_(f), arithmetic_(arithmetic), planes_per_block_(planes_per_block), p_{f.p, f.p} {}

  /// One iteration over `ranges`; returns Gosa (partials summed in order).
  double iterate(const std::vector<PlaneRange>& ranges) {
    const Layout& l = f_.layout;
    std::vector<float>& out = p_[cur_ ^ 1];
    for (const PlaneRange& r : ranges)
      for (int i = r.begin; i < r.end; ++i)
        for (int j = 1; j < l.nj - 1; ++j)
          for (int k = 1; k < l.nk - 1; ++k)
            out[std::size_t(l.index(i, j, k))] = std::numeric_limits<float>::quiet_NaN();
    SweepArgs a;
    a.layout = l;
    a.p_in = p_[cur_].data();
    a.p_out = out.data();
    a.coef = f_.coef.data();
    double gosa = 0.0;
    for (const PlaneRange& r : ranges) {
      const LaunchPlan plan = plan_sweep(l, r, planes_per_block_, arithmetic_);
      std::vector<double> partials(std::size_t(plan.blocks()));
      emulate_sweep(a, r, plan, partials.data());
      gosa = std::accumulate(partials.begin(), partials.end(), gosa);
    }
    cur_ ^= 1;
    return gosa;
  }
  double iterate() { return iterate({{1, f_.layout.ni - 1}}); }

  std::vector<float>& p() { return p_[cur_]; }

 private:
  const HostFields& f_;
  Arithmetic arithmetic_;
  int planes_per_block_;
  std::vector<float> p_[2];
  int cur_ = 0;
};

}  // namespace gv::himeno::test
