// The Himeno point update, written once for every executor: the CPU references instantiate it
// in double and in float, the GPU kernel (and its host emulation) in float.
#pragma once
#include <gpuverbs/config.hpp>

namespace gv::himeno {

/// The coefficient fields, in storage order. Each is a separate array of the benchmark
/// (a[4], b[3], c[3], bnd, wrk1); none is assumed constant.
enum Coef : int { kA0, kA1, kA2, kA3, kB0, kB1, kB2, kC0, kC1, kC2, kBnd, kWrk1, kCoefCount };

/// The twelve coefficients of one point.
template <class T>
struct PointCoefs {
  T a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, bnd, wrk1;
};

/// Residual ss of one point. `P` gives the old p around the point as
/// `p.template at<di, dj, dk>()` with di, dj, dk in {-1, 0, 1} (19 of the 27 are read).
/// The terms are summed in the order of the RIKEN source, so T = float on a host compiler that
/// does not contract to FMA reproduces the reference's float results. The caller adds
/// ss * ss to Gosa and writes p + omega * ss.
template <class T, class P>
GV_HD GV_INLINE T residual(const P& p, const PointCoefs<T>& c) {
  const T s0 = c.a0 * p.template at<1, 0, 0>() + c.a1 * p.template at<0, 1, 0>() +
               c.a2 * p.template at<0, 0, 1>() +
               c.b0 * (p.template at<1, 1, 0>() - p.template at<1, -1, 0>() -
                       p.template at<-1, 1, 0>() + p.template at<-1, -1, 0>()) +
               c.b1 * (p.template at<0, 1, 1>() - p.template at<0, -1, 1>() -
                       p.template at<0, 1, -1>() + p.template at<0, -1, -1>()) +
               c.b2 * (p.template at<1, 0, 1>() - p.template at<-1, 0, 1>() -
                       p.template at<1, 0, -1>() + p.template at<-1, 0, -1>()) +
               c.c0 * p.template at<-1, 0, 0>() + c.c1 * p.template at<0, -1, 0>() +
               c.c2 * p.template at<0, 0, -1>() + c.wrk1;
  return (s0 * c.a3 - p.template at<0, 0, 0>()) * c.bnd;
}

}  // namespace gv::himeno
