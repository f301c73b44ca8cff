// The rma device handle: what a World hands kernels (and host threads) for one rank.
//
// Plain structs, taken by value (`__grid_constant__ const Endpoint`). The endpoint names this
// rank's symmetric heap and a table of peers; each peer says how its heap is reached:
//   kSelf  this rank's own heap (loads and stores),
//   kP2p   the peer's heap mapped into this address space (peer access over NVLink/PCIe, CUDA IPC,
//          or shared memory for host ranks): stores, loads and atomics go straight there,
//   kIb    through verbs queue pairs (device_api/ib) on any provider: puts are RDMA WRITEs,
//          gets READs, atomics FETCH_ADD / CMP_SWP, quiet polls completions.
// Lifetime: the World must outlive every kernel or thread using its endpoint. A kernel that
// uses an endpoint runs on its rank's GPU (the GPU whose heap it is, where the peers' heaps are
// mapped).
#pragma once
#include <cstddef>
#include <cstdint>

#include "../ib/handles.hpp"
#include "../status.hpp"

namespace gv::rma {

inline constexpr std::uint32_t kEndpointVersion = 3;

/// Peers below this rank number that are reached directly (kSelf, kP2p) also have their heap
/// base in the endpoint itself (Endpoint::near): a kernel parameter, so the common path reads
/// no table from memory (after an acquire has emptied L1, that read is a round trip to L2).
inline constexpr std::uint32_t kNearPeers = 8;

enum class Transport : std::uint32_t { kNone = 0, kSelf = 1, kP2p = 2, kIb = 3 };

GV_HD inline constexpr const char* to_string(Transport t) {
  switch (t) {
    case Transport::kNone: return "none";
    case Transport::kSelf: return "self";
    case Transport::kP2p: return "p2p";
    case Transport::kIb: return "ib";
  }
  return "unknown";
}

/// How a signal word is updated: set to the value, or the value added (atomically).
enum class SignalOp : std::uint32_t { kSet = 0, kAdd = 1 };

/// Comparisons of wait_until / test: `*ivar CMP value`.
enum class Cmp : std::uint32_t { kEq = 0, kNe, kGt, kGe, kLt, kLe };

template <class T>
GV_HD GV_INLINE constexpr bool compare(T a, Cmp c, T b) {
  switch (c) {
    case Cmp::kEq: return a == b;
    case Cmp::kNe: return a != b;
    case Cmp::kGt: return a > b;
    case Cmp::kGe: return a >= b;
    case Cmp::kLt: return a < b;
    case Cmp::kLe: return a <= b;
  }
  return false;
}

/// The shared progress of one lane: who polls its CQ, how far its completions are checked,
/// and the first error. Pollers take `polling` with a try-lock (never waiting for it), so one
/// thread at a time drains the CQ and records errors before it advances `done`: a waiter that
/// sees its WQE below `done` knows whether it failed.
struct alignas(64) LaneState {
  std::uint32_t polling = 0;          ///< 1 while a thread drains the CQ
  std::uint32_t syndrome = 0;         ///< mlx5 syndrome of the first error
  std::uint64_t done = 0;             ///< SQ position (WQEBBs) up to which completions are checked
  std::uint64_t first_bad = 0;        ///< 1 + SQ position of the first failed WQE; 0 while healthy
  std::uint32_t status = 0;           ///< gv::Status of the first error (kCompletionError, kCqOverrun)
  std::uint8_t pad[36] = {};
};
static_assert(sizeof(LaneState) == 64);

/// One verbs queue pair towards a peer, with the CQ its send queue completes into. Every WQE
/// the rma layer posts is signaled; posters and pollers share the lane (ownership kShared for
/// the send queue, the CQ drained under LaneState::polling).
struct IbLane {
  ib::QpHandle qp;
  ib::CqHandle cq;
  LaneState* state = nullptr;
  /// 8-byte slots in this rank's registered heap that receive atomic and `g` results, one per
  /// send-queue position (`qp.sq_bbs` of them): a WQE's slot is free again once it completes.
  std::uint64_t* results = nullptr;
  std::uint32_t results_lkey = 0;   ///< the memory region of `results`
  std::byte pad[44] = {};
};
static_assert(sizeof(IbLane) == 256);

struct Peer {
  Transport transport = Transport::kNone;
  std::uint32_t lanes = 0;          ///< kIb: queue pairs towards this peer (a power of two)
  std::byte* base = nullptr;        ///< kSelf / kP2p: the peer's heap in this address space
  std::uint64_t remote_base = 0;    ///< kIb: the peer's heap address as its memory region names it
  std::uint32_t rkey = 0;           ///< kIb: the peer heap's rkey
  std::uint32_t pad = 0;
  const IbLane* ib = nullptr;       ///< kIb: `lanes` lanes
};
static_assert(sizeof(Peer) == 40);

/// Layout of the part of every symmetric heap the rma layer keeps for itself (at offset 0,
/// so the same offset on every rank). User allocations start at Endpoint::user_offset.
struct alignas(64) Reserved {
  std::uint64_t barrier_epoch = 0;  ///< barriers this rank has entered (only it writes it)
  /// Raised by the World (World::abort(), a dead peer): every operation of this rank returns
  /// kAborted. A word of the heap, so the check costs a local load, not a read of host memory.
  std::uint32_t aborted = 0;
  std::byte pad[52] = {};
  // followed by `arrive[size]`: arrive[q] = the last barrier epoch rank q announced here
};
static_assert(sizeof(Reserved) == 64);

/// barrier_epoch and arrive[q] after a barrier failed (timeout, abort, error): the ranks' epochs
/// are no longer known to agree, so every later barrier of every rank it reaches returns
/// kBarrierBroken instead of passing on a stale arrival.
inline constexpr std::uint64_t kBrokenEpoch = ~std::uint64_t{0};

struct Endpoint {
  std::uint32_t version = kEndpointVersion;
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
  std::uint32_t lkey = 0;               ///< kIb: this rank's heap lkey
  std::byte* heap = nullptr;            ///< this rank's symmetric heap
  std::uint64_t heap_bytes = 0;
  std::uint64_t user_offset = 0;        ///< where user allocations begin
  const Peer* peers = nullptr;          ///< `size` entries, in memory the caller reads
  const std::uint32_t* abort = nullptr; ///< raised by the World: every wait ends with kAborted
  Budget budget{};                      ///< bound of every wait an operation makes
  std::uint64_t arrive_offset = 0;      ///< symmetric offset of the barrier's arrive[size]
  /// near[q]: peer q's heap in this address space when q < kNearPeers is reached directly
  /// (kSelf, kP2p); null otherwise (then Peer q says how).
  std::byte* near[kNearPeers] = {};
  /// 1 when every direct peer (kSelf, kP2p) has its heap in this rank's GPU memory (ranks that
  /// share one GPU): a release that orders stores before a signal there needs device scope, not
  /// system scope (that GPU's memory-side L2 orders them for every reader of its memory). One
  /// flag, not a bit a peer: a scope chosen per PE took the face's block ping-pong kernel from
  /// 124 registers to 131, past the 128 a block of 512 threads may have.
  std::uint32_t direct_same_gpu = 0;
  std::uint32_t pad = 0;
};
static_assert(sizeof(Endpoint) == 144);

}  // namespace gv::rma
