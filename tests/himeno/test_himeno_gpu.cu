// Himeno on the GPU against the double-precision CPU reference (skipped without a GPU).
#include <gpuverbs/himeno/gpu.hpp>
#include <gpuverbs/himeno/reference.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "compare.hpp"
#include "gpu_test.hpp"

namespace gv::himeno {
namespace {

using test::field_rel_error;
using test::rel_error;

constexpr int kCheckpoints[] = {1, 3, 10, 100};

struct Snapshot {
  double gosa;
  std::vector<double> p;
};

// Reference<double> after each checkpoint, computed once per size (M takes seconds).
const std::map<int, Snapshot>& reference_snapshots(SizeClass sc) {
  static std::map<SizeClass, std::map<int, Snapshot>> cache;
  auto [it, fresh] = cache.try_emplace(sc);
  if (fresh) {
    Reference<double> ref(standard_fields(grid_size(sc)));
    int n = 0;
    for (int target : kCheckpoints) {
      double gosa = 0.0;
      for (; n < target; ++n) gosa = ref.iterate();
      it->second[target] = {gosa, ref.p()};
    }
  }
  return it->second;
}

// Device memory released on scope exit.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  ~DeviceBuffer() { (void)cudaFree(ptr); }
};

// Runs kCheckpoints[3] iterations of the standard problem, as one launch per iteration or as
// top and bottom halves, and checks Gosa and p at every checkpoint.
void check_against_reference(SizeClass sc, Arithmetic arith, bool split, double gosa_bound,
                             double p_bound) {
  const HostFields f = standard_fields(grid_size(sc));
  DeviceDomain dom(f, 0, arith);
  const PlaneRange all{1, f.layout.ni - 1};
  const Halves h = split_halves(all);
  const std::vector<PlaneRange> ranges =
      split ? std::vector<PlaneRange>{h.top, h.bottom} : std::vector<PlaneRange>{all};
  DeviceBuffer<double> gosa;
  GV_CUDA_CHECK(cudaMalloc(&gosa.ptr, kCheckpoints[3] * sizeof(double)));
  GV_CUDA_CHECK(cudaMemset(gosa.ptr, 0xff, kCheckpoints[3] * sizeof(double)));  // NaN
  const auto& want = reference_snapshots(sc);
  int n = 0;
  std::vector<float> p;
  for (int target : kCheckpoints) {
    for (; n < target; ++n) GV_CUDA_CHECK(dom.iterate(ranges, gosa.ptr + n, nullptr));
    GV_CUDA_CHECK(cudaDeviceSynchronize());
    double got = 0.0;
    GV_CUDA_CHECK(cudaMemcpy(&got, gosa.ptr + n - 1, sizeof got, cudaMemcpyDeviceToHost));
    GV_CUDA_CHECK(dom.download_p(p));
    const Snapshot& ref = want.at(target);
    EXPECT_LT(rel_error(got, ref.gosa), gosa_bound) << to_string(sc) << " n=" << n << " gpu " << got
                                                    << " ref " << ref.gosa;
    EXPECT_LT(field_rel_error(f.layout, p, ref.p), p_bound) << to_string(sc) << " n=" << n;
  }
}

class HimenoGpu : public ::testing::TestWithParam<SizeClass> {};

TEST_P(HimenoGpu, MatchesDoubleReference) {
  GV_REQUIRE_GPUS(1);
  check_against_reference(GetParam(), Arithmetic::kDouble, false, 1e-4, 1e-4);
}

TEST_P(HimenoGpu, SplitTopBottomLaunchesMatchDoubleReference) {
  GV_REQUIRE_GPUS(1);
  check_against_reference(GetParam(), Arithmetic::kDouble, true, 1e-4, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Sizes, HimenoGpu,
                         ::testing::Values(SizeClass::XS, SizeClass::S, SizeClass::M),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The benchmark's float arithmetic: p as accurate, Gosa bounded by the cancellation in ss
// (the host emulation measured 3.4e-4 at M).
TEST(HimenoGpuFloat, FloatArithmeticTracksDoubleReferenceOnM) {
  GV_REQUIRE_GPUS(1);
  check_against_reference(SizeClass::M, Arithmetic::kFloat, false, 1e-3, 1e-5);
}

// One sweep through the low-level launches on seeded random fields of an odd size: every
// interior point of the poisoned output is written and matches the reference; the boundary
// keeps its value.
TEST(HimenoGpuLaunch, RandomFieldsPoisonedOutput) {
  GV_REQUIRE_GPUS(1);
  const HostFields f = random_fields(GridSize{37, 29, 75}, 4242);
  const Layout& l = f.layout;
  std::vector<float> poisoned = f.p;
  for (int i = 1; i < l.ni - 1; ++i)
    for (int j = 1; j < l.nj - 1; ++j)
      for (int k = 1; k < l.nk - 1; ++k)
        poisoned[std::size_t(l.index(i, j, k))] = std::numeric_limits<float>::quiet_NaN();
  const std::size_t bytes = std::size_t(l.elems()) * sizeof(float);
  DeviceBuffer<float> p_in, p_out, coef;
  DeviceBuffer<double> partials, gosa;
  GV_CUDA_CHECK(cudaMalloc(&p_in.ptr, bytes));
  GV_CUDA_CHECK(cudaMalloc(&p_out.ptr, bytes));
  GV_CUDA_CHECK(cudaMalloc(&coef.ptr, kCoefCount * bytes));
  GV_CUDA_CHECK(cudaMalloc(&partials.ptr, std::size_t(max_sweep_blocks(l)) * sizeof(double)));
  GV_CUDA_CHECK(cudaMalloc(&gosa.ptr, sizeof(double)));
  GV_CUDA_CHECK(cudaMemcpy(p_in.ptr, f.p.data(), bytes, cudaMemcpyHostToDevice));
  GV_CUDA_CHECK(cudaMemcpy(coef.ptr, f.coef.data(), kCoefCount * bytes, cudaMemcpyHostToDevice));
  Reference<double> ref(f);
  const double want = ref.iterate();
  for (Arithmetic arith : {Arithmetic::kDouble, Arithmetic::kFloat}) {
    GV_CUDA_CHECK(cudaMemcpy(p_out.ptr, poisoned.data(), bytes, cudaMemcpyHostToDevice));
    SweepArgs a;
    a.layout = l;
    a.p_in = p_in.ptr;
    a.p_out = p_out.ptr;
    a.coef = coef.ptr;
    const PlaneRange r{1, l.ni - 1};
    const LaunchPlan plan = plan_sweep(l, r, 3, arith);
    GV_CUDA_CHECK(launch_sweep(a, r, plan, partials.ptr, nullptr));
    GV_CUDA_CHECK(launch_gosa_sum(partials.ptr, plan.blocks(), gosa.ptr, nullptr));
    GV_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got(f.p.size());
    double got_gosa = 0.0;
    GV_CUDA_CHECK(cudaMemcpy(got.data(), p_out.ptr, bytes, cudaMemcpyDeviceToHost));
    GV_CUDA_CHECK(cudaMemcpy(&got_gosa, gosa.ptr, sizeof got_gosa, cudaMemcpyDeviceToHost));
    EXPECT_LT(field_rel_error(l, got, ref.p()), 1e-6);
    EXPECT_LT(rel_error(got_gosa, want), 1e-5);
    for (int j = 0; j < l.nj; ++j)  // boundary plane 0 and column k = 0 untouched
      EXPECT_EQ(got[std::size_t(l.index(0, j, 5))], f.p[std::size_t(l.index(0, j, 5))]);
    EXPECT_EQ(got[std::size_t(l.index(5, 5, 0))], f.p[std::size_t(l.index(5, 5, 0))]);
  }
}

// Same inputs and ranges, same bits: the Gosa sum has no atomics.
TEST(HimenoGpuLaunch, GosaIsDeterministic) {
  GV_REQUIRE_GPUS(1);
  const HostFields f = random_fields(grid_size(SizeClass::S), 99);
  const std::vector<PlaneRange> all{{1, f.layout.ni - 1}};
  constexpr int kIters = 10;
  std::vector<double> runs[2];
  std::vector<float> p[2];
  for (int run = 0; run < 2; ++run) {
    DeviceDomain dom(f);
    DeviceBuffer<double> gosa;
    GV_CUDA_CHECK(cudaMalloc(&gosa.ptr, kIters * sizeof(double)));
    for (int n = 0; n < kIters; ++n) GV_CUDA_CHECK(dom.iterate(all, gosa.ptr + n, nullptr));
    GV_CUDA_CHECK(cudaDeviceSynchronize());
    runs[run].resize(kIters);
    GV_CUDA_CHECK(cudaMemcpy(runs[run].data(), gosa.ptr, kIters * sizeof(double), cudaMemcpyDeviceToHost));
    GV_CUDA_CHECK(dom.download_p(p[run]));
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), kIters * sizeof(double)), 0);
  EXPECT_EQ(p[0], p[1]);
  EXPECT_GT(runs[0][kIters - 1], 0.0);
}

}  // namespace
}  // namespace gv::himeno
