#include <gpuverbs/himeno/decomp.hpp>
#include <gpuverbs/himeno/stencil.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gv::himeno {

HaloPlan plan_halo(const Layout& l) {
  HaloPlan h;
  h.plane_floats = l.plane_elems();
  const std::int64_t per_chunk = kHaloChunkBytes / std::int64_t(sizeof(float));
  h.chunks = int((h.plane_floats + per_chunk - 1) / per_chunk);
  // Equal pieces, each a multiple of 4 floats: a plane (a multiple of pitch, itself a multiple
  // of 4) splits into 16-byte aligned pieces of about the same size.
  h.chunk_floats = (h.plane_floats / 4 + h.chunks - 1) / h.chunks * 4;
  return h;
}

RankPlan plan_rank(const GridSize& g, int ranks, int rank, int planes_per_block, Arithmetic arithmetic) {
  RankPlan r;
  r.slab = make_slab(g, ranks, rank);
  r.rank = rank;
  r.ranks = ranks;
  const Slab& s = r.slab;
  const int P = s.planes;
  if (rank > 0) {
    r.neighbour[kLower] = rank - 1;
    r.send_offset[kLower] = s.send_lower_offset();
    r.dest_offset[kLower] = make_slab(g, ranks, rank - 1).recv_upper_offset();
  }
  if (rank + 1 < ranks) {
    r.neighbour[kUpper] = rank + 1;
    r.send_offset[kUpper] = s.send_upper_offset();
    r.dest_offset[kUpper] = make_slab(g, ranks, rank + 1).recv_lower_offset();
  }
  const bool lower = r.has(kLower), upper = r.has(kUpper);
  auto add = [&](PlaneRange planes, int ppb) {
    VRange& v = r.range[r.ranges++];
    v.planes = planes;
    v.plan = plan_sweep(s.local, planes, ppb, arithmetic);
    v.first_vb = r.vblocks;
    v.reads_halo[kLower] = planes.begin == 1 && lower;
    v.reads_halo[kUpper] = planes.end == P + 1 && upper;
    r.vblocks += v.plan.blocks();
  };
  // Boundary planes: one plane per thread (ppb 1), as many blocks as the plane has rows of groups.
  if (P == 1 && (lower || upper)) {
    add({1, 2}, 1);
    r.send_range[kLower] = lower ? 0 : -1;
    r.send_range[kUpper] = upper ? 0 : -1;
  } else {
    if (lower) {
      r.send_range[kLower] = r.ranges;
      add({1, 2}, 1);
    }
    if (upper) {
      r.send_range[kUpper] = r.ranges;
      add({P, P + 1}, 1);
    }
  }
  r.boundary_ranges = r.ranges;
  r.boundary_vblocks = r.vblocks;
  // The owned planes no boundary range took (none when one range holds the only plane).
  const PlaneRange interior{1 + (lower ? 1 : 0), P + 1 - (upper ? 1 : 0)};
  if (r.ranges == 0) add({1, P + 1}, planes_per_block);
  else if (P > 1 && interior.begin < interior.end) add(interior, planes_per_block);
  return r;
}

const char* to_string(Where w) {
  switch (w) {
    case Where::kNone: return "nowhere";
    case Where::kHaloWaitLower: return "waiting for the halo from the rank below";
    case Where::kHaloWaitUpper: return "waiting for the halo from the rank above";
    case Where::kHaloSendLower: return "putting the boundary plane to the rank below";
    case Where::kHaloSendUpper: return "putting the boundary plane to the rank above";
    case Where::kGosaPublish: return "putting this rank's Gosa to the others";
    case Where::kGosaReduce: return "waiting for the other ranks' Gosa";
    case Where::kGridBarrier: return "at the grid barrier of the persistent kernel";
    case Where::kPlaneDone: return "waiting for a boundary plane's blocks (persistent communication block)";
    case Where::kChainEnd: return "waiting for the device-launched chain to end";
    case Where::kFinishBarrier: return "at the barrier that ends a run";
    case Where::kDeviceLaunch: return "tail-launching the next iteration's graph";
  }
  return "?";
}

HeapLayout plan_heap(const GridSize& g, int ranks, std::int64_t capacity, int planes_per_block) {
  if (capacity < 1) throw std::invalid_argument("Himeno: the iteration capacity must be >= 1");
  HeapLayout h;
  h.ranks = ranks;
  h.capacity = capacity;
  for (int r = 0; r < ranks; ++r) {
    const RankPlan p = plan_rank(g, ranks, r, planes_per_block);
    h.elems = std::max(h.elems, p.slab.local.elems());
    h.max_vblocks = std::max(h.max_vblocks, p.vblocks);
  }
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at = (at + bytes + 255) / 256 * 256;
    return here;
  };
  const std::size_t field = std::size_t(h.elems) * sizeof(float);
  const auto cap = std::size_t(capacity);
  h.p[0] = take(field);
  h.p[1] = take(field);
  h.p_init = take(field);
  h.coef = take(kCoefCount * field);
  h.partials[0] = take(std::size_t(h.max_vblocks) * sizeof(double));
  h.partials[1] = take(std::size_t(h.max_vblocks) * sizeof(double));
  h.halo_sig = take(2 * sizeof(std::uint64_t));
  h.gosa_sig = take(cap * sizeof(std::uint64_t));
  h.gosa_mine = take(cap * sizeof(double));
  h.gosa_parts = take(cap * std::size_t(ranks) * sizeof(double));
  h.gosa_total = take(cap * sizeof(double));
  h.control = take(sizeof(Control));
  h.bytes = at;
  return h;
}

}  // namespace gv::himeno
