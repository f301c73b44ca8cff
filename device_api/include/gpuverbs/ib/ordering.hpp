// The named ordering points of the mlx5 queues (post, poll, the owner's fast paths).
#pragma once
#include <cstdint>

#include "../config.hpp"
#include "../sync.hpp"

namespace gv::ib {

// Each is the one store or load that orders what its name says, at the scope of the queue's
// executor (the HCA, the CPU engine, or a GPU engine). Transport code calls these, never a
// raw fence.

/// Store the doorbell record with release: every WQE byte written before it (by this thread,
/// or by warp lanes that synchronised with it) is visible to the executor first.
GV_HD GV_INLINE void wqe_visible_before_dbrec(std::uint32_t* dbrec, std::uint32_t be_value, sync::Scope s) {
  sync::store_release(dbrec, be_value, s);
}

/// Ring the doorbell with release: the executor that sees it sees the doorbell record too.
GV_HD GV_INLINE void dbrec_before_doorbell(std::uint64_t* doorbell, std::uint64_t value, sync::Scope s) {
  sync::store_release(doorbell, value, s);
}

/// Publish WQEs to an executor that polls the doorbell record itself (a software HCA; see
/// QpHandle::record_polled): one release orders the WQEs before both the record and the
/// doorbell, which need no order between them. On the GPU one fence and two relaxed stores
/// instead of the two releases of the NIC's order (each a fence that waits for the stores
/// before it). On the host the two releases, which cost nothing there and which
/// ThreadSanitizer follows.
GV_HD GV_INLINE void wqe_visible_before_dbrec_and_doorbell(std::uint32_t* dbrec, std::uint32_t be_value,
                                                           std::uint64_t* doorbell, std::uint64_t value,
                                                           sync::Scope s) {
#if GV_DEVICE_PASS
  sync::release_fence(s);
  sync::store_relaxed(dbrec, be_value, s);
  sync::store_relaxed(doorbell, value, s);
#else
  sync::store_release(dbrec, be_value, s);
  sync::store_release(doorbell, value, s);
#endif
}

/// Load a CQE's last word (wqe_counter, signature, op_own) with acquire: once the owner bit
/// says the CQE is ours, its payload and the data it covers may be read.
GV_HD GV_INLINE std::uint32_t cqe_owner_before_payload(const std::uint32_t* cqe_tail, sync::Scope s) {
  return sync::load_acquire(cqe_tail, s);
}

/// Hand consumed CQEs back with release: our reads of them happen before the producer may
/// overwrite the slots.
GV_HD GV_INLINE void cqe_read_before_release(std::uint32_t* cq_dbrec, std::uint32_t be_value, sync::Scope s) {
  sync::store_release(cq_dbrec, be_value, s);
}

/// Hand back a CQE of which only the last word was read, by cqe_owner_before_payload: its
/// acquire orders this store after that read (and the producer's release of its next CQE in
/// the slot orders that write after whatever it read of the consumer index), so a relaxed
/// store suffices; no fence.
GV_HD GV_INLINE void cqe_tail_read_before_release(std::uint32_t* cq_dbrec, std::uint32_t be_value, sync::Scope s) {
  sync::store_relaxed(cq_dbrec, be_value, s);
}

/// A CQ's only poller hands consumed CQEs back (the CQ's consumer index, released at the
/// executor's scope `s`) and frees the work-queue space they cover (`completed`, which posters
/// of this GPU acquire; may be null) behind one release: on the GPU one fence at the wider
/// scope and two relaxed stores, instead of two releases; on the host the two releases.
GV_HD GV_INLINE void cqe_read_before_release_and_retire(std::uint32_t* cq_dbrec, std::uint32_t be_value, sync::Scope s,
                                                        std::uint64_t* completed, std::uint64_t end) {
#if GV_DEVICE_PASS
  sync::release_fence(s);  // the system scope covers the device's
  sync::store_relaxed(cq_dbrec, be_value, s);
  if (completed != nullptr) sync::store_relaxed(completed, end);
#else
  if (completed != nullptr) sync::store_release(completed, end);
  sync::store_release(cq_dbrec, be_value, s);
#endif
}

}  // namespace gv::ib
