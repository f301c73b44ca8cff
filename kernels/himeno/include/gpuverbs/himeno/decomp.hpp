// Himeno across ranks: what each rank computes in one iteration, in which order, and where the
// pieces live in the symmetric heap. Plain C++ (the plans are built on the host; the small
// accessors are __host__ __device__ and run in kernels and in the host tests alike).
//
// Decomposition. The grid is cut into slabs along i (make_slab: sizes differ by at most one
// plane). A rank's iteration is a list of virtual blocks — the blocks of up to three sweeps,
// always in this order:
//   1. the boundary planes a neighbour needs: local plane 1 when there is a rank below, local
//      plane P (the last owned plane) when there is a rank above — one range if P == 1;
//   2. the interior: the owned planes left.
// Boundary blocks come first so their planes can be sent while the interior computes. Virtual
// block v writes its partial Gosa to partials[v]; the rank's Gosa is the sum of partials[0, V)
// and the global Gosa the sum of the ranks' Gosas in rank order, 0 first: both orders are fixed,
// so a run gives the same bits every time.
//
// Halo exchange. A boundary plane goes to the neighbour's halo plane (local plane 0 or P+1 of
// its p buffer of the same parity) in `chunks` pieces, each one rma::put_signal that adds 1 to
// the receiver's signal of that side: after n sweeps since the last reset a receiver has seen
// n * chunks on each side it has a neighbour.
#pragma once
#include <gpuverbs/config.hpp>
#include <gpuverbs/himeno/grid.hpp>
#include <gpuverbs/himeno/sweep.hpp>

#include <cstddef>
#include <cstdint>

namespace gv::himeno {

/// A side of a slab: towards global plane 0, or towards global plane ni-1.
enum Side : int { kLower = 0, kUpper = 1 };

/// A halo plane is sent in pieces of at most this many bytes, so several blocks can send one
/// plane (stream mode) and a single put never holds a block for long.
inline constexpr std::int64_t kHaloChunkBytes = std::int64_t{256} << 10;

/// The pieces of one halo plane (the same for every rank: planes are nj x pitch floats).
struct HaloPlan {
  std::int64_t plane_floats = 0;
  std::int64_t chunk_floats = 0;  ///< a multiple of 4 (16-byte aligned pieces)
  int chunks = 0;

  GV_HD std::int64_t chunk_begin(int c) const { return std::int64_t(c) * chunk_floats; }
  GV_HD std::int64_t chunk_size(int c) const {
    const std::int64_t left = plane_floats - chunk_begin(c);
    return left < chunk_floats ? left : chunk_floats;
  }
};
HaloPlan plan_halo(const Layout& l);

/// One sweep of a rank's iteration: its planes, its launch geometry, where its virtual blocks
/// start, and which halos it reads (its planes touch local plane 0 or P+1 on that side).
struct VRange {
  PlaneRange planes;
  LaunchPlan plan;
  int first_vb = 0;
  bool reads_halo[2] = {false, false};
};

/// Which range a virtual block belongs to and its block coordinates in that range's plan.
struct VBlock {
  int range = 0, bx = 0, by = 0, bz = 0;
};

/// Everything one rank needs to know about its share of an iteration.
struct RankPlan {
  static constexpr int kMaxRanges = 3;
  Slab slab;
  int rank = 0, ranks = 1;
  int neighbour[2] = {-1, -1};           ///< rank below / above; -1 at the ends of the grid
  std::int64_t send_offset[2] = {0, 0};  ///< floats into this rank's p: plane 1 / plane P
  std::int64_t dest_offset[2] = {0, 0};  ///< floats into the neighbour's p where that plane lands
  int ranges = 0;                        ///< boundary ranges first, then the interior
  int boundary_ranges = 0;
  VRange range[kMaxRanges];
  int vblocks = 0;                       ///< virtual blocks (= partial Gosas) of one iteration
  int boundary_vblocks = 0;              ///< the first boundary_vblocks are boundary blocks
  int send_range[2] = {-1, -1};          ///< the boundary range whose plane goes to side s

  GV_HD bool has(Side s) const { return neighbour[s] >= 0; }
  /// The range and block coordinates of virtual block vb (0 <= vb < vblocks).
  GV_HD VBlock vblock(int vb) const {
    VBlock b;
    while (b.range + 1 < ranges && vb >= range[b.range + 1].first_vb) ++b.range;
    const LaunchPlan& p = range[b.range].plan;
    const int local = vb - range[b.range].first_vb;
    b.bx = local % p.grid_x;
    b.by = (local / p.grid_x) % p.grid_y;
    b.bz = local / (p.grid_x * p.grid_y);
    return b;
  }
};

/// The plan of `rank` among `ranks`. Throws std::invalid_argument when the grid has fewer
/// interior planes than ranks (a slab needs one plane at least) or a dimension below 3.
RankPlan plan_rank(const GridSize& g, int ranks, int rank, int planes_per_block = 0,
                   Arithmetic arithmetic = Arithmetic::kDouble);

/// The first error a rank's kernels hit: a gv::Status, where it happened and in which iteration.
struct ErrorRecord {
  std::uint32_t status = 0;  ///< gv::Status (kDeviceLaunch: the cudaError_t); 0 while healthy
  std::uint32_t where = 0;   ///< Where
  std::uint64_t iteration = 0;
};

enum class Where : std::uint32_t {
  kNone = 0,
  kHaloWaitLower,
  kHaloWaitUpper,
  kHaloSendLower,
  kHaloSendUpper,
  kGosaPublish,
  kGosaReduce,
  kGridBarrier,
  kPlaneDone,
  kChainEnd,
  kFinishBarrier,
  kDeviceLaunch,
};
const char* to_string(Where w);

/// Device-side words of one rank that no other rank touches. The kernels of a run find their
/// iteration here (multi_kernels.hpp says which kernel reads and advances which word).
struct alignas(64) Control {
  std::uint32_t plane_done[2] = {0, 0};  ///< blocks of boundary range 0 / 1 done this iteration
                                         ///< (persistent: reset by the communication block)
  std::uint32_t all_done = 0;            ///< virtual blocks done this iteration
  std::uint32_t pad = 0;
  std::uint64_t iter = 0;       ///< the compute side's iteration: sweeps, Gosa, device chains
  std::uint64_t wait_iter = 0;  ///< the communication stream's iteration: halo wait and send
  std::uint64_t start = 0;      ///< the run's first iteration
  std::uint64_t end = 0;        ///< the run's end
  std::uint64_t barrier = 0;    ///< persistent: arrivals at the grid barrier since the launch
  ErrorRecord error;
};

/// Where one rank's arrays lie inside its block of the symmetric heap (byte offsets, each
/// 256-aligned). Every rank allocates one block of `bytes` and the same offsets, so a buffer's
/// address on this rank names the same buffer on every rank. p buffers hold the largest slab
/// (`elems` floats), so a neighbour's halo planes are in range whatever its slab size.
struct HeapLayout {
  std::int64_t elems = 0;       ///< floats of one field (the largest slab)
  int max_vblocks = 0;          ///< partials per parity
  int ranks = 1;
  std::int64_t capacity = 0;    ///< iterations between two resets
  std::size_t p[2] = {0, 0};
  std::size_t p_init = 0;       ///< the initial p, which a reset copies into both buffers
  std::size_t coef = 0;         ///< kCoefCount fields, elems floats apart
  std::size_t partials[2] = {0, 0};
  std::size_t halo_sig = 0;     ///< 2 x uint64: chunks received from below / from above
  std::size_t gosa_sig = 0;     ///< capacity x uint64: Gosa parts received per iteration
  std::size_t gosa_mine = 0;    ///< capacity x double: this rank's Gosa (the put's source)
  std::size_t gosa_parts = 0;   ///< capacity x ranks doubles: every rank's Gosa, rank order
  std::size_t gosa_total = 0;   ///< capacity doubles: the global Gosa
  std::size_t control = 0;      ///< Control
  std::size_t bytes = 0;
};
HeapLayout plan_heap(const GridSize& g, int ranks, std::int64_t capacity, int planes_per_block = 0);

}  // namespace gv::himeno
