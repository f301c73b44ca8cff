// The software HCA's state, as it lies in a device arena: one shared-memory segment per soft
// Device holding every ring, doorbell, table and (for memory allocated through the device)
// user buffer. Engines in other processes map the arena to act as responder for our QPs, so
// everything here is position-independent (offsets, never pointers) and fixed-layout.
//
// Writers: tables are written by the owning process's host library; engine progress fields
// by exactly one engine each, as marked. Cross-process fields are accessed atomically.
#pragma once
#include <cstdint>

#include <gpuverbs/config.hpp>
#include <gpuverbs/types.hpp>
#include <gpuverbs/ib/mlx5_format.hpp>

namespace gv::soft {

inline constexpr std::uint64_t kArenaMagic = 0x6770757665726273ull;  // "gpuverbs"
inline constexpr std::uint32_t kArenaVersion = 6;
inline constexpr std::uint32_t kQpnBase = 0x40;     ///< qpn = kQpnBase + slot
inline constexpr std::uint32_t kMaxPathLen = 64;
inline constexpr std::uint32_t kAsyncEventSlots = 64;
inline constexpr std::uint32_t kMaxEngineWarps = 32;  ///< GPU engine: warps (engine_slot() shares the slots out)

/// GPU engine: the QP slot of table round `round` (slots [round * warps, (round + 1) * warps))
/// that warp `warp` serves (the lane of the warp that takes round `round` visits it: lane
/// round % 32). Each round gives one slot to every warp, turned by one warp per
/// round, so that a pattern in slot numbers spreads over the warps: with slot % warps, the
/// requesters of QP pairs created together (every other slot) all fell to the even warps, and
/// a one-way stream left half of the engine idle.
GV_HD constexpr std::uint32_t engine_slot(std::uint32_t warp, std::uint32_t round, std::uint32_t warps) {
  return round * warps + (warp + round) % warps;
}

using gv::QpState;

enum class AsyncEventType : std::uint32_t {
  kCqOverrun = 1,       ///< a CQE found no room: the CQ and its QPs are in error
  kQpFatal = 2,         ///< a QP entered the error state outside a completion (doorbell fault)
};

struct AsyncEvent {
  AsyncEventType type;
  std::uint32_t number;  ///< CQN or QPN
  std::uint64_t detail;  ///< kCqOverrun: producer index; kQpFatal: offending doorbell
};

/// Memory region table entry. `key` is written last on registration (release) and cleared
/// first on deregistration; 0 marks a free slot. lkey == rkey == key.
struct MrEntry {
  std::uint32_t key;
  std::uint32_t access;
  std::uint32_t pdn;
  std::uint32_t in_arena;     ///< 1: the range lies in the owner's arena at arena_off
  std::uint64_t addr;         ///< start, in the owner's address space
  std::uint64_t length;
  std::uint64_t arena_off;
};

struct CqCtx {
  std::uint32_t cqn;          ///< 0: free slot
  std::uint32_t log_cqes;
  std::uint64_t ring_off;
  std::uint64_t dbrec_off;
  std::uint64_t produced;     ///< next CQE index; claimed by fetch_add from any engine
  std::uint32_t error;        ///< 1 after an overrun (CqHandle::error points here)
  std::uint32_t pad;
};

/// What a requester keeps of its peer's QP: the fields its owner writes before the QP
/// connects, and its state.
struct PeerQp {
  std::uint32_t qpn, state, pdn, access, recv_cq, rq_wqes, rq_stride_shift, max_recv_sge,
      min_rnr_timer, peer_qpn;
  std::uint64_t rq_off, dbrec_off;
};

/// How long a requester uses what it kept of its responder (KeptResponder::at) before it loads it
/// again. The host library waits twice as long after a change a requester may have kept (an MR
/// deregistered, a QP moved to error or destroyed) before it returns, so that no requester
/// still uses the old state: a lease, where an HCA would invalidate its caches by command (an
/// engine cannot safely write into a peer's arena that may be gone).
inline constexpr std::uint64_t kKeptNs = 100'000;

/// Where a CQ's ring and doorbell record lie and a consumer index it had reached, as a producer
/// in another arena keeps them (push_cqe): the index only grows, so a CQE that fits below it
/// fits, and the record is read again only when the ring looks full.
struct CqHint {
  std::uint64_t ring_off;
  std::uint64_t dbrec_off;
  std::uint64_t ci;           ///< a consumer index the CQ had reached (0 is one)
  std::uint32_t log_cqes;
  std::uint32_t known;        ///< 0: ring_off, dbrec_off and log_cqes not loaded yet
};

/// What a requester keeps of its responder's receive side, each checked where it is used: the
/// receive it claims next (the responder's engine claims receives only to flush them) below a
/// count of posted receives it read (which only grows), and the receive CQ (Hca::claim_peer_recv).
/// Cleared whenever the responder is loaded afresh (Hca::reach), so never older than its lease.
struct RecvHints {
  std::uint64_t rq_next;
  std::uint64_t rq_posted;    ///< 0: not read
  CqHint rcq;
};

/// What a requester keeps of its responder across visits (Hca::reach): its QP's fields and
/// state, and the MR of one remote key, used for kKeptNs after `at`.
struct KeptResponder {
  std::uint64_t at;           ///< engine time (now_ns) before they were loaded; 0: nothing kept
  PeerQp conn;
  std::uint32_t mr_key;       ///< key of `mr` (0: none kept)
  std::uint32_t pad;
  MrEntry mr;
};

struct QpCtx {
  // ---- written by the owning host library ----
  std::uint32_t qpn;          ///< 0: free slot
  std::uint32_t state;        ///< QpState; engines may move it to kError
  std::uint32_t pdn;
  std::uint32_t access;       ///< gv::Access the QP grants as responder
  std::uint32_t send_cq;      ///< CQ slot in this arena
  std::uint32_t recv_cq;
  std::uint64_t sq_off, rq_off, dbrec_off, doorbell_off;
  std::uint32_t sq_bbs, rq_wqes, rq_stride_shift, max_recv_sge;
  std::uint32_t max_send_sge, max_inline;
  std::uint32_t rnr_retry;    ///< 0..7; 7 retries forever (IB semantics)
  std::uint32_t min_rnr_timer;  ///< IB encoding 0..31
  std::uint32_t peer_qpn;
  std::int32_t peer_pid;
  std::uint64_t peer_base;    ///< GPU engine: the peer arena's address in this process (0: none)
  char peer_arena[kMaxPathLen];  ///< how to map the peer's arena ("/proc/<pid>/fd/<fd>")
  // ---- requester progress: this arena's engine only ----
  std::uint64_t sq_head;      ///< next WQEBB to execute
  std::uint64_t sq_rung;      ///< WQEBBs covered by the doorbell record as last seen
  std::uint64_t last_doorbell;
  std::uint32_t rnr_left;     ///< retries left for the WQE at sq_head (valid if rnr_active)
  std::uint32_t rnr_active;
  std::uint64_t rnr_resume_ns;
  std::uint32_t last_rkey;    ///< remote key of the last WQE that named one (the next visit's first guess)
  KeptResponder resp;         ///< the responder kept across visits
  RecvHints recv;             ///< its receive side
  // ---- responder progress: claimed with CAS by the peer's engine (deliveries) and by
  //      this arena's engine (flushes after an error) ----
  std::uint64_t rq_head;      ///< next receive WQE to consume
};

struct ArenaHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::int32_t pid;
  std::uint64_t size;
  std::uint32_t abort;        ///< raised by Device::abort(); every handle's abort points here
  std::uint64_t events_head;  ///< async events produced (fetch_add); ring of kAsyncEventSlots
  AsyncEvent events[kAsyncEventSlots];
  // ---- GPU engine only (the CPU engine's loop lives in the host library) ----
  std::uint32_t qp_high;      ///< slots below this may hold QPs (host-written)
  /// QPs created (host-written): a warp that sees it change fences, so that what its SM's L1
  /// holds of a reused slot's earlier QP is read afresh (create_qp waits for that).
  std::uint32_t qps_created;
  /// Sweeps completed by each engine warp, published every few sweeps and at start: the
  /// heartbeat, and the quiescence point for destroy (an advance seen after a QP left the
  /// table means no warp still uses it).
  std::uint64_t epoch[kMaxEngineWarps];
};

inline constexpr std::uint32_t kMaxMrs = 4096;
inline constexpr std::uint32_t kMaxQps = 1024;
inline constexpr std::uint32_t kMaxCqs = 1024;

/// Where the tables lie in every arena of this version. Fixed at compile time, so
/// an engine finds any arena's tables without reading that arena's header (a round trip over
/// NVLink for a peer GPU's arena).
constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) & ~(a - 1); }
struct ArenaLayout {
  static constexpr std::uint64_t kMrs = align_up(sizeof(ArenaHeader), 64);
  static constexpr std::uint64_t kQps = align_up(kMrs + sizeof(MrEntry) * kMaxMrs, 64);
  static constexpr std::uint64_t kCqs = align_up(kQps + sizeof(QpCtx) * kMaxQps, 64);
  static constexpr std::uint64_t kHeap = align_up(kCqs + sizeof(CqCtx) * kMaxCqs, 4096);
};

}  // namespace gv::soft
