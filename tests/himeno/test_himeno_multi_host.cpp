// Himeno across ranks on the host (CI, no GPU): the decomposition, the heap layout, the mode
// checks, and the whole protocol (halo puts and waits, Gosa publish and reduction order) run by
// host-thread ranks of a World against the one-grid run.
#include <gpuverbs/himeno/exchange.hpp>
#include <gpuverbs/himeno/modes.hpp>
#include <gpuverbs/host/world.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "compare.hpp"
#include "host_kernel.hpp"
#include "host_ranks.hpp"

namespace gv::himeno {
namespace {

using test::HostKernel;
using test::rel_error;

// Grids with uneven remainders, one- and two-plane slabs, padded rows.
const GridSize kGrids[] = {grid_size(SizeClass::XS), {37, 29, 75}, {5, 12, 10}, {9, 7, 33}};

TEST(HimenoDecomp, PlansCoverEveryInteriorPointOnce) {
  for (const GridSize& g : kGrids)
    for (int ranks = 1; ranks <= std::min(7, g.ni - 2); ++ranks) {
      std::vector<int> owners(std::size_t(g.ni) * g.nj * g.nk, 0);
      for (int rank = 0; rank < ranks; ++rank) {
        const RankPlan p = plan_rank(g, ranks, rank, 3);
        const Slab& s = p.slab;
        const int P = s.planes;
        ASSERT_GE(p.ranges, 1);
        int vb = 0;
        for (int r = 0; r < p.ranges; ++r) {
          const VRange& v = p.range[r];
          EXPECT_EQ(v.first_vb, vb);
          EXPECT_FALSE(v.planes.empty());
          EXPECT_EQ(v.reads_halo[kLower], v.planes.begin == 1 && rank > 0);
          EXPECT_EQ(v.reads_halo[kUpper], v.planes.end == P + 1 && rank + 1 < ranks);
          if (r < p.boundary_ranges) {
            EXPECT_EQ(v.planes.size(), 1) << "boundary ranges are single planes";
          }
          vb += v.plan.blocks();
        }
        EXPECT_EQ(vb, p.vblocks);
        int boundary = 0;
        for (int r = 0; r < p.boundary_ranges; ++r) boundary += p.range[r].plan.blocks();
        EXPECT_EQ(p.boundary_vblocks, boundary);
        EXPECT_EQ(p.boundary_ranges > 0, ranks > 1) << "boundary planes exactly where a neighbour waits";
        for (Side side : {kLower, kUpper}) {
          ASSERT_EQ(p.send_range[side] >= 0, p.has(side));
          if (!p.has(side)) continue;
          ASSERT_LT(p.send_range[side], p.boundary_ranges);
          const int plane = side == kLower ? 1 : P;
          const PlaneRange sent = p.range[p.send_range[side]].planes;
          EXPECT_TRUE(sent.begin <= plane && plane < sent.end) << "side " << side;
        }
        for (int v = 0; v < p.vblocks; ++v) {
          const VBlock b = p.vblock(v);
          const VRange& r = p.range[b.range];
          ASSERT_TRUE(v >= r.first_vb && v < r.first_vb + r.plan.blocks());
          for (int t = 0; t < LaunchPlan::kThreads; ++t) {
            const ThreadWork w = thread_work(r.plan, s.local, r.planes, b.bx, b.by, b.bz, t);
            if (!w.active) continue;
            for (int i = w.i_begin; i < w.i_end; ++i)
              for (int k = w.k0; k < w.k0 + 4; ++k)
                if (k >= 1 && k <= g.nk - 2)
                  ++owners[(std::size_t(s.global_plane(i)) * g.nj + w.j) * g.nk + k];
          }
        }
      }
      for (int i = 0; i < g.ni; ++i)
        for (int j = 0; j < g.nj; ++j)
          for (int k = 0; k < g.nk; ++k) {
            const bool interior = i >= 1 && i <= g.ni - 2 && j >= 1 && j <= g.nj - 2 && k >= 1 && k <= g.nk - 2;
            ASSERT_EQ(owners[(std::size_t(i) * g.nj + j) * g.nk + k], interior ? 1 : 0)
                << g.ni << "x" << g.nj << "x" << g.nk << ", " << ranks << " ranks, point " << i << "," << j << "," << k;
          }
    }
}

TEST(HimenoDecomp, HalosLandInTheNeighboursHaloPlanes) {
  for (const GridSize& g : kGrids)
    for (int ranks = 2; ranks <= std::min(5, g.ni - 2); ++ranks) {
      const HeapLayout h = plan_heap(g, ranks, 4);
      for (int rank = 0; rank < ranks; ++rank) {
        const RankPlan p = plan_rank(g, ranks, rank);
        const std::int64_t plane = p.slab.local.plane_elems();
        if (p.has(kLower)) {
          const Slab below = make_slab(g, ranks, rank - 1);
          EXPECT_EQ(p.send_offset[kLower], plane);
          EXPECT_EQ(p.dest_offset[kLower], (below.planes + 1) * plane);
          EXPECT_EQ(below.global_plane(below.planes + 1), p.slab.global_plane(1));
        }
        if (p.has(kUpper)) {
          const Slab above = make_slab(g, ranks, rank + 1);
          EXPECT_EQ(p.send_offset[kUpper], p.slab.planes * plane);
          EXPECT_EQ(p.dest_offset[kUpper], 0);
          EXPECT_EQ(above.global_plane(0), p.slab.global_plane(p.slab.planes));
        }
        for (Side s : {kLower, kUpper}) EXPECT_LE(p.dest_offset[s] + plane, h.elems);
      }
    }
}

TEST(HimenoDecomp, HaloChunksTileThePlaneInAlignedPieces) {
  for (const Layout& l : {make_layout(3, 3, 3), make_layout(4, 64, 128), make_layout(4, 256, 512),
                          make_layout(4, 512, 1024), make_layout(4, 300, 1001)}) {
    const HaloPlan h = plan_halo(l);
    EXPECT_EQ(h.plane_floats, l.plane_elems());
    EXPECT_EQ(h.chunk_floats % 4, 0);
    EXPECT_LE(h.chunk_floats * std::int64_t(sizeof(float)), kHaloChunkBytes);
    std::int64_t next = 0;
    for (int c = 0; c < h.chunks; ++c) {
      EXPECT_EQ(h.chunk_begin(c), next);
      EXPECT_GT(h.chunk_size(c), 0);
      next += h.chunk_size(c);
    }
    EXPECT_EQ(next, h.plane_floats);
  }
  EXPECT_EQ(plan_halo(make_layout(4, 64, 128)).chunks, 1);      // S: 32 KiB, one piece
  EXPECT_EQ(plan_halo(make_layout(4, 512, 1024)).chunks, 8);    // XL: 2 MiB
}

TEST(HimenoDecomp, HeapLayoutIsAlignedDisjointAndSizedForTheLargestSlab) {
  const GridSize g{37, 29, 75};
  const HeapLayout h = plan_heap(g, 3, 10);
  EXPECT_EQ(h.elems, make_slab(g, 3, 0).local.elems());  // 35 planes: 12, 12, 11
  const std::size_t starts[] = {h.p[0],     h.p[1],      h.p_init,     h.coef,       h.partials[0], h.partials[1], h.halo_sig,
                                h.gosa_sig, h.gosa_mine, h.gosa_parts, h.gosa_total,  h.control,     h.bytes};
  const std::size_t sizes[] = {std::size_t(h.elems) * 4, std::size_t(h.elems) * 4, std::size_t(h.elems) * 4, kCoefCount * std::size_t(h.elems) * 4,
                               std::size_t(h.max_vblocks) * 8, std::size_t(h.max_vblocks) * 8, 16, 80, 80, 240, 80,
                               sizeof(Control)};
  for (int i = 0; i + 1 < int(std::size(starts)); ++i) {
    EXPECT_EQ(starts[i] % 256, 0u);
    EXPECT_LE(starts[i] + sizes[i], starts[i + 1]) << "array " << i;
  }
  EXPECT_THROW(plan_heap(g, 3, 0), std::invalid_argument);
}

TEST(HimenoDecomp, AGridWithFewerPlanesThanRanksIsRefused) {
  try {
    (void)plan_rank(GridSize{4, 8, 8}, 3, 0);
    FAIL() << "3 ranks over 2 interior planes must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 interior planes cannot be split into 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_heap(GridSize{4, 8, 8}, 3, 5), std::invalid_argument);
  EXPECT_NO_THROW(plan_rank(GridSize{4, 8, 8}, 2, 1));
}

TEST(HimenoModes, NamesRoundTripAndUnknownOnesAreNamed) {
  for (Mode m : kAllModes) EXPECT_EQ(parse_mode(to_string(m)), m);
  EXPECT_EQ(parse_modes("stream,graph"), (std::vector<Mode>{Mode::kStream, Mode::kGraph}));
  EXPECT_EQ(parse_modes("all").size(), std::size(kAllModes));
  try {
    (void)parse_modes("stream,warp-drive");
    FAIL() << "an unknown mode must be refused";
  } catch (const std::invalid_argument& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("'warp-drive'"), std::string::npos) << why;
    EXPECT_NE(why.find("device-launch"), std::string::npos) << why;
  }
  EXPECT_THROW(parse_modes(""), std::invalid_argument);
}

TEST(HimenoModes, WhyNotNamesTheLimit) {
  DeviceLimits d;
  d.name = "GPU X";
  d.sms = 132;
  d.cooperative_launch = true;
  d.device_graph_launch = true;
  ModeNeeds n;
  n.blocks_per_sm = 2;
  n.boundary_vblocks = 16;
  for (Mode m : kAllModes) EXPECT_EQ(why_not(m, d, n), "") << to_string(m);

  EXPECT_EQ(coresident_blocks_per_rank(d, n), 264);
  n.ranks_on_gpu = 3;
  n.engines_on_gpu = 3;
  EXPECT_EQ(coresident_blocks_per_rank(d, n), 2 * 129 / 3);

  DeviceLimits no_coop = d;
  no_coop.cooperative_launch = false;
  EXPECT_NE(why_not(Mode::kPersistent, no_coop, n).find("cooperative launch"), std::string::npos);
  ModeNeeds crowded = n;
  crowded.blocks_per_sm = 1;
  crowded.ranks_on_gpu = 200;
  crowded.engines_on_gpu = 0;
  const std::string persistent = why_not(Mode::kPersistent, d, crowded);
  EXPECT_NE(persistent.find("132 SMs shared by 200 rank(s)"), std::string::npos) << persistent;
  crowded.ranks_on_gpu = 132;  // one co-resident block a rank: it would sweep or communicate, not both
  EXPECT_EQ(coresident_blocks_per_rank(d, crowded), 1);
  const std::string one_block = why_not(Mode::kPersistent, d, crowded);
  EXPECT_NE(one_block.find("leaves 1 co-resident block(s) for a rank, and it needs 2"), std::string::npos) << one_block;
  crowded.ranks_on_gpu = 66;
  EXPECT_EQ(why_not(Mode::kPersistent, d, crowded), "");

  ModeNeeds waiting = n;
  waiting.ranks_on_gpu = 2;
  waiting.engines_on_gpu = 0;
  waiting.boundary_vblocks = 1024;  // XL: two planes of 512 blocks
  const std::string in_kernel = why_not(Mode::kInKernel, d, waiting);
  EXPECT_NE(in_kernel.find("1024 boundary blocks"), std::string::npos) << in_kernel;
  EXPECT_NE(in_kernel.find("only 132 blocks"), std::string::npos) << in_kernel;
  waiting.ranks_on_gpu = 1;
  EXPECT_EQ(why_not(Mode::kInKernel, d, waiting), "") << "waiting on other GPUs holds no one's SMs";

  DeviceLimits no_cdp = d;
  no_cdp.device_graph_launch = false;
  no_cdp.device_graph_why = "the driver is CUDA 11.8";
  EXPECT_NE(why_not(Mode::kDeviceLaunch, no_cdp, n).find("CUDA 11.8"), std::string::npos);

  ModeNeeds remote = n;
  remote.peers_in_other_processes = true;
  remote.every_peer_p2p = false;
  EXPECT_NE(why_not(Mode::kHybrid, d, remote).find("p2p"), std::string::npos);
}

// ---- the protocol on host-thread ranks ------------------------------------------------------

struct RanksCase {
  GridSize grid;
  int ranks;
  rma::Transport transport;
};

std::string case_name(const ::testing::TestParamInfo<RanksCase>& i) {
  const GridSize& g = i.param.grid;
  return std::to_string(g.ni) + "x" + std::to_string(g.nj) + "x" + std::to_string(g.nk) + "_" +
         std::to_string(i.param.ranks) + "ranks_" + rma::to_string(i.param.transport);
}

class HimenoRanksOnHostThreads : public ::testing::TestWithParam<RanksCase> {
 protected:
  static constexpr int kIters = 4;
  static constexpr std::uint64_t kSeed = 2026;

  void SetUp() override {
    const RanksCase& c = GetParam();
    WorldOptions o;
    o.memory = WorldOptions::Memory::kHost;
    o.transport = c.transport;
    o.ib_lanes = 2;
    o.budget = Budget{20'000'000'000ull};
    heap_ = plan_heap(c.grid, c.ranks, kIters);
    o.heap_bytes = heap_.bytes + (std::size_t{1} << 20);
    worlds_ = World::create_local(c.ranks, o);
    for (int r = 0; r < c.ranks; ++r) {
      auto* block = static_cast<std::byte*>(worlds_[std::size_t(r)]->alloc(heap_.bytes));
      const RankPlan plan = plan_rank(c.grid, c.ranks, r, 3);
      args_.push_back(make_dist_args(worlds_[std::size_t(r)]->endpoint(), block, heap_, plan, true));
      test::fill_block(args_.back(), random_fields(plan.slab, kSeed));
    }
  }

  /// Runs every rank on its own thread; returns each rank's status.
  std::vector<Status> run(std::uint64_t n0, std::uint64_t count) {
    std::vector<Status> st(args_.size(), Status::kOk);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < args_.size(); ++r)
      ts.emplace_back([&, r] { st[r] = test::run_rank(args_[r], n0, count); });
    for (auto& t : ts) t.join();
    return st;
  }

  HeapLayout heap_;
  std::vector<std::unique_ptr<World>> worlds_;
  std::vector<DistArgs> args_;
};

TEST_P(HimenoRanksOnHostThreads, FieldAndGosaEqualTheOneGridRun) {
  const RanksCase& c = GetParam();
  const HostFields whole_f = random_fields(c.grid, kSeed);
  HostKernel whole(whole_f, Arithmetic::kDouble);
  Reference<double> ref(whole_f);
  std::vector<double> want(kIters), checked(kIters);
  for (int n = 0; n < kIters; ++n) {
    want[std::size_t(n)] = whole.iterate();
    checked[std::size_t(n)] = ref.iterate();
  }
  // Two runs back to back: the second continues where the first stopped.
  for (const auto& [n0, count] : {std::pair<std::uint64_t, std::uint64_t>{0, 1}, {1, kIters - 1}})
    for (const Status s : run(n0, count)) ASSERT_EQ(s, Status::kOk) << to_string(s);

  for (int n = 0; n < kIters; ++n) {
    // Every rank holds the same total: the rank Gosas summed in rank order.
    double ordered = 0.0;
    for (const DistArgs& a : args_) ordered += a.gosa_mine[n];
    for (const DistArgs& a : args_) {
      EXPECT_EQ(std::memcmp(&a.gosa_total[n], &ordered, sizeof ordered), 0)
          << "rank " << a.plan.rank << " n=" << n << ": " << a.gosa_total[n] << " vs " << ordered;
      EXPECT_EQ(a.control->error.status, 0u);
    }
    EXPECT_LT(rel_error(ordered, want[std::size_t(n)]), 1e-12) << "n=" << n;
    EXPECT_LT(rel_error(ordered, checked[std::size_t(n)]), 1e-5) << "n=" << n << " against the double reference";
  }

  // The field, halos included, is the one-grid field bit for bit (the same point updates).
  const Layout& wl = whole_f.layout;
  for (const DistArgs& a : args_) {
    const Slab& s = a.plan.slab;
    const float* p = a.p[kIters & 1];
    for (int i = 0; i < s.local.ni; ++i)
      for (int j = 0; j < s.local.nj; ++j)
        for (int k = 0; k < s.local.nk; ++k)
          ASSERT_EQ(p[s.local.index(i, j, k)], whole.p()[std::size_t(wl.index(s.global_plane(i), j, k))])
              << "rank " << a.plan.rank << " local plane " << i << " (" << j << "," << k << ")";
  }
}

TEST_P(HimenoRanksOnHostThreads, WithoutCommunicationEachRankKeepsItsOwnGosa) {
  for (DistArgs& a : args_) a.comm = 0;
  for (const Status s : run(0, 2)) ASSERT_EQ(s, Status::kOk);
  for (const DistArgs& a : args_)
    for (int n = 0; n < 2; ++n) {
      EXPECT_EQ(a.gosa_total[n], a.gosa_mine[n]);
      EXPECT_EQ(a.halo_sig[kLower] + a.halo_sig[kUpper], 0u) << "no halo was put";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Grids, HimenoRanksOnHostThreads,
    ::testing::Values(RanksCase{grid_size(SizeClass::XS), 1, rma::Transport::kNone},
                      RanksCase{grid_size(SizeClass::XS), 2, rma::Transport::kP2p},
                      RanksCase{grid_size(SizeClass::XS), 3, rma::Transport::kP2p},
                      RanksCase{GridSize{37, 29, 75}, 3, rma::Transport::kP2p},
                      RanksCase{GridSize{5, 12, 10}, 3, rma::Transport::kP2p},  // one plane per rank
                      RanksCase{GridSize{9, 7, 33}, 3, rma::Transport::kIb}),
    case_name);

}  // namespace
}  // namespace gv::himeno
