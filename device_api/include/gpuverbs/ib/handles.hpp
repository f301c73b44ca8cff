// Device handles: what host_setup hands kernels (and host threads) for one QP or CQ.
//
// Plain structs, taken by value (`__grid_constant__ const QpHandle`). Immutable fields travel
// in the handle; the counters that posters and pollers advance live in QpCounters / CqCounters,
// in memory every user of the handle shares: GPU global memory for kernels, host memory for
// host threads (one kind of user per queue; the counters' atomics are device-scope there).
// Lifetime: the QueuePair / CompletionQueue must outlive every kernel using its handle.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../sync.hpp"
#include "mlx5_format.hpp"

namespace gv::ib {

inline constexpr std::uint32_t kHandleVersion = 2;

/// Producer/consumer counters of one work queue, 64-bit and monotonic, in queue units
/// (WQEBBs for the SQ, WQEs for the RQ). Three cache lines: posters take tickets on the first,
/// wait for their turn on the second, pollers free space on the third.
struct alignas(64) WqCounters {
  /// Handed out to posters. kShared: a ticket counter (fetch_add) that runs ahead of the ring by
  /// the slots of posters still waiting for space, so it is no bound for widening a CQE's index
  /// (pollers widen from `completed`); published - completed <= ring size holds instead.
  std::uint64_t reserved = 0;
  /// The kExclusive owner's private copies: its next slot and the bound up to which it knows
  /// the ring is free. Plain fields in the owner's cache line, so an exclusive post reads no
  /// shared counter until the ring looks full. A queue keeps one ownership mode for life.
  std::uint64_t owner_next = 0;
  std::uint64_t owner_free_to = 0;
  std::uint8_t pad0[40];
  std::uint64_t published = 0;   ///< covered by the doorbell record; published in order
  /// kShared: 0 while every ticket will be published; ~X once the ticket starting at slot X was
  /// abandoned unpublished (the earliest such X: fetch_max of ~X). published then stays at or
  /// below X, and every poster whose ticket starts at or after X fails (kQueueBroken). Beside
  /// `published`, whose line the posters waiting for their turn already read. wq_reopen clears it.
  std::uint64_t broken = 0;
  std::uint8_t pad1[48];
  std::uint64_t completed = 0;   ///< retired by polled completions: free for reuse
  std::uint8_t pad2[56];
};

struct QpCounters {
  WqCounters sq;
  WqCounters rq;
};

struct alignas(64) CqCounters {
  std::uint64_t claimed = 0;     ///< next CQE a poller takes
  std::uint8_t pad0[56];
  std::uint64_t released = 0;    ///< CQEs handed back to the producer (dbrec consumer index)
  std::uint8_t pad1[56];
};

static_assert(sizeof(WqCounters) == 192 && sizeof(QpCounters) == 384 && sizeof(CqCounters) == 128);

struct QpHandle {
  std::uint32_t version = kHandleVersion;
  std::uint32_t qpn = 0;
  std::byte* sq = nullptr;             ///< sq_bbs * 64 bytes
  std::byte* rq = nullptr;             ///< rq_wqes << rq_stride_shift bytes
  mlx5::QpDbrec* dbrec = nullptr;
  std::uint64_t* doorbell = nullptr;   ///< UAR BlueFlame register or the soft engine's word
  QpCounters* state = nullptr;
  const std::uint32_t* abort = nullptr;  ///< host raises it to end every wait on this QP
  std::uint32_t sq_bbs = 0;            ///< power of two
  std::uint32_t rq_wqes = 0;           ///< power of two
  std::uint32_t rq_stride_shift = 0;   ///< log2(bytes per receive WQE)
  std::uint32_t max_recv_sge = 0;
  std::uint32_t max_send_sge = 0;
  std::uint32_t max_inline = 0;
  /// Who executes the WQEs: kSystem for a NIC or a CPU engine, kGpu for an engine on this
  /// GPU. Send doorbell-record and doorbell stores are released at this scope.
  sync::Scope executor = sync::Scope::kSystem;
  /// Who takes the posted receive WQEs (the peer's executor with a software HCA, whose
  /// requester delivers into our RQ): the receive doorbell record is released at this scope.
  sync::Scope rq_executor = sync::Scope::kSystem;
  /// Nonzero when the executor polls the send doorbell record itself and takes the doorbell
  /// as a check (a software HCA): one release then publishes WQEs before record and doorbell
  /// together. Zero for a NIC: the record is released before the doorbell.
  std::uint32_t record_polled = 0;
};
static_assert(sizeof(QpHandle) == 96);

/// The CQ also knows the (at most one) send queue and receive queue it retires, so that
/// polling a completion frees ring space without a second lookup.
struct CqHandle {
  std::uint32_t version = kHandleVersion;
  std::uint32_t cqn = 0;
  mlx5::Cqe* ring = nullptr;           ///< 2^log_cqes entries
  mlx5::CqDbrec* dbrec = nullptr;
  CqCounters* state = nullptr;
  const std::uint32_t* abort = nullptr;
  const std::uint32_t* error = nullptr;  ///< nonzero once the provider declared an overrun
  QpCounters* send_qp = nullptr;       ///< QP whose SQ completes here (or null)
  const std::byte* send_sq = nullptr;  ///< its SQ ring, to read the size of completed WQEs
  QpCounters* recv_qp = nullptr;       ///< QP whose RQ completes here (or null)
  std::uint32_t log_cqes = 0;
  std::uint32_t send_sq_bbs = 0;
  std::uint32_t send_qpn = 0;
  std::uint32_t recv_qpn = 0;
  /// Who writes the CQEs (see QpHandle::executor).
  sync::Scope executor = sync::Scope::kSystem;
};
static_assert(sizeof(CqHandle) == 96);

/// A handle of this version of the layout (its leading field): every call that takes a handle
/// checks it, so a kernel built against another gpuverbs gets kInvalidArgument instead of
/// misreading the fields.
GV_HD GV_INLINE constexpr bool handle_ok(const QpHandle& h) { return h.version == kHandleVersion; }
GV_HD GV_INLINE constexpr bool handle_ok(const CqHandle& h) { return h.version == kHandleVersion; }

}  // namespace gv::ib
