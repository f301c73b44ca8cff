// Atomics, clocks, bounded waits and the named ordering points of the device API.
//
// One spelling for both sides: on the GPU these lower to libcu++ atomics at system scope
// (the HCA, the software engine and the host all observe queue memory); on the host they are
// std::atomic_ref, so ThreadSanitizer sees every happens-before edge the protocol relies on.
#pragma once
#include <cstdint>

#include "config.hpp"
#include "status.hpp"

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif
#if !GV_DEVICE_PASS
#include <sched.h>

#include <atomic>
#include <ctime>
#endif

namespace gv::sync {

#if GV_DEVICE_PASS
template <class T>
using aref = cuda::atomic_ref<T, cuda::thread_scope_system>;
#define GV_MO(x) cuda::std::memory_order_##x
#else
template <class T>
using aref = std::atomic_ref<T>;
#define GV_MO(x) std::memory_order_##x
#endif

template <class T>
GV_HD GV_INLINE T load_acquire(const T* p) {
  return aref<T>(*const_cast<T*>(p)).load(GV_MO(acquire));
}
template <class T>
GV_HD GV_INLINE T load_relaxed(const T* p) {
  return aref<T>(*const_cast<T*>(p)).load(GV_MO(relaxed));
}
template <class T>
GV_HD GV_INLINE void store_release(T* p, T v) {
  aref<T>(*p).store(v, GV_MO(release));
}
template <class T>
GV_HD GV_INLINE void store_relaxed(T* p, T v) {
  aref<T>(*p).store(v, GV_MO(relaxed));
}
template <class T>
GV_HD GV_INLINE T fetch_add(T* p, T v) {
  return aref<T>(*p).fetch_add(v, GV_MO(acq_rel));
}
template <class T>
GV_HD GV_INLINE T fetch_max(T* p, T v) {
#if GV_DEVICE_PASS
  return aref<T>(*p).fetch_max(v, GV_MO(acq_rel));
#else
  aref<T> a(*p);  // std::atomic_ref has no fetch_max before C++26
  T cur = a.load(GV_MO(relaxed));
  while (cur < v && !a.compare_exchange_weak(cur, v, GV_MO(acq_rel), GV_MO(relaxed))) {
  }
  return cur;
#endif
}
template <class T>
GV_HD GV_INLINE bool compare_exchange(T* p, T& expected, T desired) {
  return aref<T>(*p).compare_exchange_strong(expected, desired, GV_MO(acq_rel), GV_MO(acquire));
}

/// Monotonic nanoseconds: %globaltimer on the GPU, CLOCK_MONOTONIC on the host.
GV_HD GV_INLINE std::uint64_t now_ns() {
#if GV_DEVICE_PASS
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
#endif
}

GV_HD GV_INLINE void spin_pause() {
#if GV_DEVICE_PASS
  // no back-off: the waits this guards are nanoseconds to microseconds long
#elif defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

/// Spin until pred() holds, the budget runs out, or the host raises *abort (may be null).
/// The clock and the abort flag are read every 64 spins, so a ready predicate costs one test.
/// On the host, a wait that has spun for a while yields the core at those points: with more
/// spinning threads than cores (engine + pollers on a small machine) pure spinning would
/// leave the thread that must make progress waiting for a scheduler tick.
template <class Pred>
GV_HD GV_INLINE Status bounded_wait(Pred&& pred, Budget budget, const std::uint32_t* abort) {
  if (pred()) return Status::kOk;
  const std::uint64_t start = now_ns();
  for (std::uint32_t i = 1;; ++i) {
    if (pred()) return Status::kOk;
    if ((i & 63u) == 0) {
      if (abort != nullptr && load_relaxed(abort) != 0) return Status::kAborted;
      if (now_ns() - start > budget.ns) return pred() ? Status::kOk : Status::kTimeout;
#if !GV_DEVICE_PASS
      if (i > 4096) sched_yield();
#endif
    }
    spin_pause();
  }
}

// ---- Named ordering points -------------------------------------------------------------
// Each names what it orders; transport code calls these, never a raw fence.

/// WQE stores must reach memory the HCA/engine reads before the doorbell record says the WQE
/// exists. The dbrec store itself is a release store; this fence also covers WQE bytes written
/// by other threads of the warp that handed their slot to the publishing thread.
GV_HD GV_INLINE void wqe_visible_before_dbrec() {
#if GV_DEVICE_PASS
  cuda::atomic_thread_fence(cuda::std::memory_order_release, cuda::thread_scope_system);
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

/// The doorbell record must be visible before the doorbell write that makes the HCA fetch.
GV_HD GV_INLINE void dbrec_before_doorbell() {
#if GV_DEVICE_PASS
  cuda::atomic_thread_fence(cuda::std::memory_order_seq_cst, cuda::thread_scope_system);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/// After the owner bit says a CQE is ours, its other bytes (and the data the completion
/// covers) may be read only after this acquire.
GV_HD GV_INLINE void cqe_owner_before_payload() {
#if GV_DEVICE_PASS
  cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_system);
#else
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
}

#undef GV_MO
}  // namespace gv::sync
