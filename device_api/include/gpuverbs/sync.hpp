// Atomics, clocks and bounded waits of the device API (the mlx5 queues' named ordering points
// are in ib/ordering.hpp).
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

/// Who must observe an ordering: threads of this GPU (or of this host), or everyone in the
/// system (the host CPU, a NIC, peer GPUs). System scope costs a full fence on the GPU
/// (microseconds when PCIe writes are in flight), so queues record their executor's scope
/// and only the stores that executor reads pay for it.
enum class Scope : std::uint32_t { kGpu = 0, kSystem = 1 };

#if GV_DEVICE_PASS
/// Counters shared by the posters and pollers of one GPU: device scope.
template <class T>
using aref = cuda::atomic_ref<T, cuda::thread_scope_device>;
template <class T>
using aref_sys = cuda::atomic_ref<T, cuda::thread_scope_system>;
/// Where the memory orders of aref / aref_sys live (sync::mo::memory_order_acquire): the one
/// spelling for device and host code.
namespace mo = ::cuda::std;
#else
template <class T>
using aref = std::atomic_ref<T>;
template <class T>
using aref_sys = std::atomic_ref<T>;
namespace mo = ::std;
#endif

#if GV_DEVICE_PASS
namespace detail {
/// One byte stored at scope s, relaxed or with release, by one instruction. libcu++ stores a
/// 1-byte atomic_ref with a compare-and-swap loop on the word that holds it: a load round, a
/// fence and an atomic round trip, about a microsecond (the GPU engine's released last byte of
/// every message longer than 8 bytes; notes/verbs-gpu.md, "2026-11-25: fast_write measured,
/// …, two compiler traps"). PTX stores single bytes at every scope and order.
__device__ __forceinline__ void store_byte(void* p, std::uint8_t v, bool release, Scope s) {
  const unsigned w = v;
  if (release) {
    if (s == Scope::kSystem) asm volatile("st.release.sys.b8 [%0], %1;" ::"l"(p), "r"(w) : "memory");
    else asm volatile("st.release.gpu.b8 [%0], %1;" ::"l"(p), "r"(w) : "memory");
  } else {
    if (s == Scope::kSystem) asm volatile("st.relaxed.sys.b8 [%0], %1;" ::"l"(p), "r"(w) : "memory");
    else asm volatile("st.relaxed.gpu.b8 [%0], %1;" ::"l"(p), "r"(w) : "memory");
  }
}
}  // namespace detail
#endif

// ---- Counters (device scope on the GPU) ------------------------------------------------------

template <class T>
GV_HD GV_INLINE T load_acquire(const T* p) {
  return aref<T>(*const_cast<T*>(p)).load(mo::memory_order_acquire);
}
template <class T>
GV_HD GV_INLINE T load_relaxed(const T* p) {
  return aref<T>(*const_cast<T*>(p)).load(mo::memory_order_relaxed);
}
template <class T>
GV_HD GV_INLINE void store_release(T* p, T v) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 1) return detail::store_byte(p, static_cast<std::uint8_t>(v), true, Scope::kGpu);
#endif
  aref<T>(*p).store(v, mo::memory_order_release);
}
template <class T>
GV_HD GV_INLINE void store_relaxed(T* p, T v) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 1) return detail::store_byte(p, static_cast<std::uint8_t>(v), false, Scope::kGpu);
#endif
  aref<T>(*p).store(v, mo::memory_order_relaxed);
}
template <class T>
GV_HD GV_INLINE T fetch_add(T* p, T v) {
  return aref<T>(*p).fetch_add(v, mo::memory_order_acq_rel);
}
template <class T>
GV_HD GV_INLINE T fetch_max(T* p, T v) {
#if GV_DEVICE_PASS
  return aref<T>(*p).fetch_max(v, mo::memory_order_acq_rel);
#else
  aref<T> a(*p);  // std::atomic_ref has no fetch_max before C++26
  T cur = a.load(mo::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, mo::memory_order_acq_rel, mo::memory_order_relaxed)) {
  }
  return cur;
#endif
}
template <class T>
GV_HD GV_INLINE T fetch_add_relaxed(T* p, T v) {
  return aref<T>(*p).fetch_add(v, mo::memory_order_relaxed);
}
/// A word polled for changes (device scope). On the GPU a relaxed load, and the caller issues
/// acquire_fence() once a change calls for reading what was published with it: an idle poll
/// then costs no fence. On the host an acquire load (free on x86, and ThreadSanitizer follows
/// it), with acquire_fence() a no-op.
template <class T>
GV_HD GV_INLINE T load_polled(const T* p) {
#if GV_DEVICE_PASS
  return aref<T>(*const_cast<T*>(p)).load(mo::memory_order_relaxed);
#else
  return aref<T>(*const_cast<T*>(p)).load(mo::memory_order_acquire);
#endif
}
GV_HD GV_INLINE void acquire_fence() {
#if GV_DEVICE_PASS
  cuda::atomic_thread_fence(mo::memory_order_acquire, cuda::thread_scope_device);
#endif
}
template <class T>
GV_HD GV_INLINE bool compare_exchange(T* p, T& expected, T desired) {
  return aref<T>(*p).compare_exchange_strong(expected, desired, mo::memory_order_acq_rel, mo::memory_order_acquire);
}

// ---- Memory another agent writes or reads (explicit scope) --------------------------------------

template <class T>
GV_HD GV_INLINE T load_acquire(const T* p, Scope s) {
#if GV_DEVICE_PASS
  if (s == Scope::kSystem) return aref_sys<T>(*const_cast<T*>(p)).load(mo::memory_order_acquire);
#endif
  (void)s;
  return aref<T>(*const_cast<T*>(p)).load(mo::memory_order_acquire);
}
template <class T>
GV_HD GV_INLINE void store_release(T* p, T v, Scope s) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 1) return detail::store_byte(p, static_cast<std::uint8_t>(v), true, s);
  if (s == Scope::kSystem) return aref_sys<T>(*p).store(v, mo::memory_order_release);
#endif
  (void)s;
  aref<T>(*p).store(v, mo::memory_order_release);
}
/// A release fence at scope s. The transports fence on the GPU only: host code orders with
/// release stores, which ThreadSanitizer follows.
GV_HD GV_INLINE void release_fence(Scope s) {
#if GV_DEVICE_PASS
  if (s == Scope::kSystem) cuda::atomic_thread_fence(mo::memory_order_release, cuda::thread_scope_system);
  else cuda::atomic_thread_fence(mo::memory_order_release, cuda::thread_scope_device);
#else
  (void)s;
  std::atomic_thread_fence(mo::memory_order_release);
#endif
}
/// A relaxed store at scope s, e.g. after a release_fence().
template <class T>
GV_HD GV_INLINE void store_relaxed(T* p, T v, Scope s) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 1) return detail::store_byte(p, static_cast<std::uint8_t>(v), false, s);
  if (s == Scope::kSystem) return aref_sys<T>(*p).store(v, mo::memory_order_relaxed);
#endif
  (void)s;
  aref<T>(*p).store(v, mo::memory_order_relaxed);
}

/// Flags the host raises (abort, provider errors): a relaxed load that sees host stores.
template <class T>
GV_HD GV_INLINE T load_host_flag(const T* p) {
  return aref_sys<T>(*const_cast<T*>(p)).load(mo::memory_order_relaxed);
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

/// How often a GPU wait reads the host's abort flag, once it has waited that long. The flag is
/// in mapped host memory, so each read crosses PCIe, and many waiters reading it together queue
/// there: the 264 blocks of a grid barrier that read it every 64 spins took 1.6 ms to notice
/// a barrier that had completed (ncu, notes/himeno.md). A healthy wait ends before its first read.
inline constexpr std::uint64_t kDeviceAbortPollNs = 100'000;

/// Spin until pred() holds, the budget runs out, or the host raises *abort (may be null).
/// The clock is read every 64 spins, so a ready predicate costs one test. The abort flag is read
/// there too on the host, and on the GPU every kDeviceAbortPollNs once the wait has lasted that
/// long (so a GPU wait whose budget is shorter than that ends by the budget, not the flag).
/// On the host, a wait that has spun `host_spins` times yields the core at those points: with
/// more spinning threads than cores (engine + pollers on a small machine) pure spinning would
/// leave the thread that must make progress waiting for a scheduler tick. kHostSpinsOnPeers suits
/// a wait for other threads of the same kind taking turns (a shared queue's posters), where
/// the one whose turn it is may be the thread this core should run.
inline constexpr std::uint32_t kHostSpins = 4096;
inline constexpr std::uint32_t kHostSpinsOnPeers = 64;

/// How the threads that wait together agree (bounded_wait's last argument). Alone: each thread
/// decides for itself. A group whose members poll different words and must leave the wait
/// together passes its own policy: `all(v)` is true when v holds for every member, `first(v)`
/// gives every member one member's v (a clock, a flag), so that every member makes every
/// decision (done, aborted, out of budget) alike.
struct Alone {
  GV_HD GV_INLINE bool all(bool v) const { return v; }
  template <class T>
  GV_HD GV_INLINE T first(T v) const {
    return v;
  }
};

template <class Pred, class Agree = Alone>
GV_HD GV_INLINE Status bounded_wait(Pred&& pred, Budget budget, const std::uint32_t* abort,
                                    std::uint32_t host_spins = kHostSpins, Agree agree = {}) {
  if (agree.all(pred())) return Status::kOk;
  const std::uint64_t start = agree.first(now_ns());
#if GV_DEVICE_PASS
  std::uint64_t next_abort = start + kDeviceAbortPollNs;
#endif
  for (std::uint32_t i = 1;; ++i) {
    if (agree.all(pred())) return Status::kOk;
    if ((i & 63u) == 0) {
      const std::uint64_t now = agree.first(now_ns());
#if GV_DEVICE_PASS
      if (abort != nullptr && now >= next_abort) {
        if (agree.first(load_host_flag(abort)) != 0) return Status::kAborted;
        next_abort = now + kDeviceAbortPollNs;
      }
#else
      if (abort != nullptr && agree.first(load_host_flag(abort)) != 0) return Status::kAborted;
#endif
      if (now - start > budget.ns) return agree.all(pred()) ? Status::kOk : Status::kTimeout;
#if !GV_DEVICE_PASS
      if (i >= host_spins) sched_yield();
#else
      (void)host_spins;
#endif
    }
    spin_pause();
  }
}

}  // namespace gv::sync
