// Himeno across the ranks of a World on GPUs (skipped without a GPU): every mode at 1, 2 and 3
// ranks (ranks share GPUs when there are fewer), at XS, S and an odd size with seeded random
// fields, over p2p and ib, against the one-GPU run of the same arithmetic — the field bit for
// bit, the Gosa of every iteration to 1e-10 — and against the double-precision CPU reference.
// Outputs start poisoned (NaN), so a point no sweep or halo put wrote shows.
#include <gpuverbs/himeno/gpu.hpp>
#include <gpuverbs/himeno/multi.hpp>
#include <gpuverbs/himeno/reference.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "compare.hpp"
#include "gpu_test.hpp"

namespace gv::himeno {
namespace {

using test::rel_error;

constexpr int kIters = 12;
constexpr std::uint64_t kSeed = 1123;

struct Grid {
  const char* name;
  GridSize size;
  bool random;  ///< seeded random fields (masked points, b terms) instead of the benchmark's
};
const Grid kXS{"XS", grid_size(SizeClass::XS), false};
const Grid kS{"S", grid_size(SizeClass::S), false};
const Grid kOdd{"odd37x29x75", {37, 29, 75}, true};

HostFields fields_of(const Grid& g, const Slab& s) { return g.random ? random_fields(s, kSeed) : standard_fields(s); }

/// The one-GPU run and the double reference, kIters iterations.
struct Expected {
  std::vector<double> gosa, reference_gosa;
  std::vector<float> p;  ///< the whole grid after kIters iterations
  Layout layout;
};

// Computed before any World of a test exists: DeviceDomain frees with cudaFree, which waits for
// every kernel of the device — a resident ib engine included.
const Expected& expected(const Grid& g) {
  static std::map<std::string, Expected> cache;
  auto [it, fresh] = cache.try_emplace(g.name);
  if (!fresh) return it->second;
  Expected& e = it->second;
  const HostFields f = fields_of(g, make_slab(g.size, 1, 0));
  e.layout = f.layout;
  {
    DeviceDomain dom(f);
    double* gosa = nullptr;
    EXPECT_EQ(cudaMalloc(&gosa, kIters * sizeof(double)), cudaSuccess);
    const std::vector<PlaneRange> all{{1, f.layout.ni - 1}};
    for (int n = 0; n < kIters; ++n) EXPECT_EQ(dom.iterate(all, gosa + n, nullptr), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    e.gosa.resize(kIters);
    EXPECT_EQ(cudaMemcpy(e.gosa.data(), gosa, kIters * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(dom.download_p(e.p), cudaSuccess);
    EXPECT_EQ(cudaFree(gosa), cudaSuccess);
  }
  Reference<double> ref(f);
  for (int n = 0; n < kIters; ++n) e.reference_gosa.push_back(ref.iterate());
  return e;
}

struct Case {
  Mode mode;
  int ranks;
  Grid grid;
  rma::Transport transport;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  std::string m = to_string(i.param.mode);
  for (char& c : m)
    if (c == '-') c = '_';
  return m + "_" + std::to_string(i.param.ranks) + "ranks_" + i.param.grid.name + "_" + rma::to_string(i.param.transport);
}

std::vector<std::unique_ptr<World>> make_worlds(int ranks, rma::Transport t, const GridSize& g, const MultiOptions& mo,
                                                Budget budget = Budget{10'000'000'000ull}) {
  WorldOptions o;
  o.memory = WorldOptions::Memory::kGpu;
  o.transport = t;
  o.budget = budget;
  o.heap_bytes = MultiDomain::heap_bytes(g, ranks, mo);
  return World::create_local(ranks, o);
}

class HimenoMultiGpu : public ::testing::TestWithParam<Case> {};

TEST_P(HimenoMultiGpu, MatchesTheOneGpuRunAndTheReference) {
  GV_REQUIRE_GPUS(1);
  const Case& c = GetParam();
  const Expected& want = expected(c.grid);
  MultiOptions mo;
  mo.capacity = kIters;
  auto worlds = make_worlds(c.ranks, c.transport, c.grid.size, mo);
  MultiDomain dom(raw(worlds), c.grid.size, [&](const Slab& s) { return fields_of(c.grid, s); }, mo);
  ASSERT_EQ(dom.why_not(c.mode), "");
  dom.reset(true);
  // Runs that continue one another: one iteration, two, then the rest.
  for (const int count : {1, 2, kIters - 3}) {
    try {
      (void)dom.run(c.mode, count);
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
  }
  ASSERT_EQ(dom.iterations(), kIters);

  const std::vector<double> gosa = dom.gosa(0);
  for (int i = 1; i < dom.driven(); ++i)
    EXPECT_EQ(std::memcmp(dom.gosa(i).data(), gosa.data(), gosa.size() * sizeof(double)), 0)
        << "rank " << i << " holds another global Gosa than rank 0";
  for (int n = 0; n < kIters; ++n)
    EXPECT_LT(rel_error(gosa[std::size_t(n)], want.gosa[std::size_t(n)]), 1e-10)
        << "n=" << n << ": " << gosa[std::size_t(n)] << " vs one GPU " << want.gosa[std::size_t(n)];
  const double bound = c.grid.random ? 1e-5 : 1e-4;  // as the one-GPU tests
  EXPECT_LT(rel_error(gosa.back(), want.reference_gosa.back()), bound) << "against the double reference";

  // The field, halo planes included, bit for bit: every point is updated by the same arithmetic.
  for (int i = 0; i < dom.driven(); ++i) {
    const Slab& s = dom.plan(i).slab;
    const std::vector<float> p = dom.download_p(i);
    long wrong = 0;
    std::string first;
    for (int li = 0; li < s.local.ni; ++li)
      for (int j = 0; j < s.local.nj; ++j)
        for (int k = 0; k < s.local.nk; ++k) {
          const float got = p[std::size_t(s.local.index(li, j, k))];
          const float ref = want.p[std::size_t(want.layout.index(s.global_plane(li), j, k))];
          if (!(got == ref) && wrong++ == 0)
            first = "local plane " + std::to_string(li) + " (" + std::to_string(j) + "," + std::to_string(k) +
                    "): " + std::to_string(got) + " vs " + std::to_string(ref);
        }
    EXPECT_EQ(wrong, 0) << "rank " << i << ": " << wrong << " points differ from the one-GPU run, first at " << first;
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (Mode m : kAllModes) {
    for (int ranks : {1, 2, 3})
      for (const Grid& g : {kXS, kS, kOdd}) out.push_back({m, ranks, g, rma::Transport::kP2p});
    out.push_back({m, 2, kOdd, rma::Transport::kIb});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Modes, HimenoMultiGpu, ::testing::ValuesIn(all_cases()), case_name);

// --no-comm: the same kernels with the puts and waits skipped. Every mode completes; before any
// halo is stale (iteration 0) the ranks' own Gosas add up to the one-GPU Gosa.
TEST(HimenoMultiGpuNoComm, EveryModeRunsAndTheFirstIterationAddsUp) {
  GV_REQUIRE_GPUS(1);
  const Expected& want = expected(kOdd);
  MultiOptions mo;
  mo.capacity = 4;
  auto worlds = make_worlds(3, rma::Transport::kP2p, kOdd.size, mo);
  MultiDomain dom(raw(worlds), kOdd.size, [](const Slab& s) { return fields_of(kOdd, s); }, mo);
  for (Mode m : kAllModes) {
    dom.reset();
    try {
      (void)dom.run(m, 4, false);
    } catch (const std::exception& e) {
      FAIL() << to_string(m) << ": " << e.what();
    }
    double sum = 0.0;
    for (int i = 0; i < dom.driven(); ++i) sum += dom.gosa(i)[0];
    EXPECT_LT(rel_error(sum, want.gosa[0]), 1e-10) << to_string(m);
  }
}

/// One MultiDomain per rank, each built on its own thread, as one process per rank would
/// (the constructor's collectives need every rank at once).
std::vector<std::unique_ptr<MultiDomain>> domain_per_rank(const std::vector<std::unique_ptr<World>>& worlds,
                                                          const Grid& g, const MultiOptions& mo) {
  std::vector<std::unique_ptr<MultiDomain>> doms(worlds.size());
  std::vector<std::string> errors(worlds.size());
  std::vector<std::thread> ts;
  for (std::size_t r = 0; r < worlds.size(); ++r)
    ts.emplace_back([&, r] {
      try {
        doms[r] = std::make_unique<MultiDomain>(std::vector<World*>{worlds[r].get()}, g.size,
                                                [&](const Slab& s) { return fields_of(g, s); }, mo);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return doms;
}

// A process per rank (here a thread per rank, each with its own MultiDomain of one rank): the
// path of World::init, with its collectives (GPU sharing, reset barrier, the hybrid's Gosa
// allgather) and the peer heaps found through the endpoint's table.
TEST(HimenoMultiGpuPerRank, EveryModeMatchesTheOneGpuRun) {
  GV_REQUIRE_GPUS(1);
  const Expected& want = expected(kOdd);
  MultiOptions mo;
  mo.capacity = kIters;
  auto worlds = make_worlds(2, rma::Transport::kP2p, kOdd.size, mo);
  auto doms = domain_per_rank(worlds, kOdd, mo);
  ASSERT_TRUE(doms[0] && doms[1]);
  for (Mode m : kAllModes) {
    std::string errors[2];
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        try {
          doms[std::size_t(r)]->reset();
          (void)doms[std::size_t(r)]->run(m, kIters);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : ts) t.join();
    ASSERT_EQ(errors[0] + errors[1], "") << to_string(m);
    for (int r = 0; r < 2; ++r) {
      const std::vector<double> gosa = doms[std::size_t(r)]->gosa();
      for (int n = 0; n < kIters; ++n)
        EXPECT_LT(rel_error(gosa[std::size_t(n)], want.gosa[std::size_t(n)]), 1e-10)
            << to_string(m) << " rank " << r << " n=" << n;
    }
  }
}

// A rank that never runs makes its neighbour's waits end within the wait budget: run() reports
// the failure instead of hanging, in every mode that waits on the device.
TEST(HimenoMultiGpuFailure, ARankThatNeverRunsIsReportedNotWaitedFor) {
  GV_REQUIRE_GPUS(1);
  for (Mode m : {Mode::kStream, Mode::kInKernel, Mode::kDeviceLaunch, Mode::kPersistent, Mode::kGraph}) {
    MultiOptions mo;
    mo.capacity = 8;
    auto worlds = make_worlds(2, rma::Transport::kP2p, kXS.size, mo, Budget{300'000'000ull});
    auto doms = domain_per_rank(worlds, kXS, mo);
    ASSERT_TRUE(doms[0] && doms[1]);
    try {
      (void)doms[0]->run(m, 8);  // rank 1 never sends its halo of iteration 0
      ADD_FAILURE() << to_string(m) << ": a run without its neighbour succeeded";
    } catch (const std::runtime_error& e) {
      const std::string why = e.what();
      EXPECT_NE(why.find("rank 0 (GPU"), std::string::npos) << why;
      EXPECT_NE(why.find("failed in mode " + std::string(to_string(m))), std::string::npos) << why;
      EXPECT_NE(why.find("timeout"), std::string::npos) << why;
    }
    EXPECT_THROW((void)doms[0]->run(m, 1), std::runtime_error) << "a failed domain must be reset first";
  }
}

TEST(HimenoMultiGpuInput, GridAndCapacityLimitsAreNamed) {
  GV_REQUIRE_GPUS(1);
  MultiOptions mo;
  mo.capacity = 3;
  const GridSize tiny{4, 8, 8};  // two interior planes
  {
    WorldOptions o;
    o.memory = WorldOptions::Memory::kGpu;
    auto worlds = World::create_local(3, o);
    try {
      MultiDomain dom(raw(worlds), tiny, [](const Slab& s) { return standard_fields(s); }, mo);
      FAIL() << "three ranks over two planes must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("2 interior planes cannot be split into 3"), std::string::npos) << e.what();
    }
  }
  auto worlds = make_worlds(2, rma::Transport::kP2p, tiny, mo);
  MultiDomain dom(raw(worlds), tiny, [](const Slab& s) { return standard_fields(s); }, mo);
  EXPECT_NO_THROW((void)dom.run(Mode::kStream, 3));
  try {
    (void)dom.run(Mode::kStream, 1);
    FAIL() << "a fourth iteration exceeds the capacity of 3";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("capacity of 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dom.gosa().size(), 3u);
}

}  // namespace
}  // namespace gv::himeno
