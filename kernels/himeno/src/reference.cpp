#include <gpuverbs/himeno/reference.hpp>

namespace gv::himeno {
namespace {

// p around (i, j, k) of an array in `layout` order.
template <class T>
struct ArrayView {
  const T* p;
  const Layout* l;
  int i, j, k;
  template <int DI, int DJ, int DK>
  T at() const {
    return p[l->index(i + DI, j + DJ, k + DK)];
  }
};

}  // namespace

template <class T>
Reference<T>::Reference(const HostFields& init)
    : layout_(init.layout),
      p_(init.p.begin(), init.p.end()),
      next_(p_),
      coef_(init.coef.begin(), init.coef.end()) {}

template <class T>
T Reference<T>::iterate() {
  const Layout& l = layout_;
  const std::int64_t field = l.elems();
  const T omega = T(kOmega);
  T gosa = 0;
  for (int i = 1; i < l.ni - 1; ++i)
    for (int j = 1; j < l.nj - 1; ++j)
      for (int k = 1; k < l.nk - 1; ++k) {
        const std::int64_t at = l.index(i, j, k);
        auto cf = [&](Coef f) { return coef_[std::size_t(f * field + at)]; };
        const PointCoefs<T> c{cf(kA0), cf(kA1), cf(kA2), cf(kA3), cf(kB0),  cf(kB1),
                              cf(kB2), cf(kC0), cf(kC1), cf(kC2), cf(kBnd), cf(kWrk1)};
        const T ss = residual(ArrayView<T>{p_.data(), &l, i, j, k}, c);
        gosa += ss * ss;
        next_[std::size_t(at)] = p_[std::size_t(at)] + omega * ss;
      }
  // next_ holds the same boundary as p_ (copied at construction, never written), so the
  // swap is the reference's interior copy p = wrk2.
  p_.swap(next_);
  return gosa;
}

template class Reference<float>;
template class Reference<double>;

double emulate_block(const SweepArgs& a, PlaneRange r, const LaunchPlan& plan, int bx, int by, int bz) {
  double block = 0.0;
  for (int t = 0; t < LaunchPlan::kThreads; ++t) {
    const ThreadWork w = thread_work(plan, a.layout, r, bx, by, bz, t);
    if (!w.active) continue;
    block += plan.arithmetic == Arithmetic::kDouble ? sweep_column<double>(a, w.j, w.k0, w.i_begin, w.i_end)
                                                    : sweep_column<float>(a, w.j, w.k0, w.i_begin, w.i_end);
  }
  return block;
}

void emulate_sweep(const SweepArgs& a, PlaneRange r, const LaunchPlan& plan, double* partials) {
  for (int bz = 0; bz < plan.grid_z; ++bz)
    for (int by = 0; by < plan.grid_y; ++by)
      for (int bx = 0; bx < plan.grid_x; ++bx)
        partials[bx + plan.grid_x * (by + plan.grid_y * bz)] = emulate_block(a, r, plan, bx, by, bz);
}

}  // namespace gv::himeno
