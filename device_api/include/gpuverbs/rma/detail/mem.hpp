// Memory another rank reads or writes: system-scope loads, stores and atomics, and the named
// ordering points of the rma layer. On the GPU, peers are other GPUs (NVLink/PCIe) or host
// threads, so every word they exchange is accessed at system scope; on the host these are
// std::atomic_ref (ThreadSanitizer follows every edge).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../../sync.hpp"
#include "../endpoint.hpp"

namespace gv::rma::detail {

/// The unsigned integer of T's size: words travel as bits.
template <class T>
using bits_t = std::conditional_t<sizeof(T) == 1, std::uint8_t,
               std::conditional_t<sizeof(T) == 2, std::uint16_t,
               std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

template <class T>
GV_HD GV_INLINE bits_t<T> to_bits(T v) {
  bits_t<T> b;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
GV_HD GV_INLINE T from_bits(bits_t<T> b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

/// Words peers read and write: system scope (sync::aref_sys: libcu++ on the GPU, std on the host).
template <class T>
using sys_ref = sync::aref_sys<T>;

/// One word stored where a peer polls it (1, 2, 4 or 8 bytes); on the GPU unordered with earlier
/// stores.
template <class T>
GV_HD GV_INLINE void store_word(T* p, T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
#if GV_DEVICE_PASS
  // st.volatile is st.relaxed.sys for every size, including the 1- and 2-byte words that
  // atomic_ref does not take.
  *reinterpret_cast<volatile bits_t<T>*>(p) = to_bits(v);
#else
  // Release on the host: free on x86, and ThreadSanitizer, which ignores standalone fences,
  // then sees the order that quiet/fence give before a flag store.
  sys_ref<bits_t<T>>(*reinterpret_cast<bits_t<T>*>(p)).store(to_bits(v), sync::mo::memory_order_release);
#endif
}

/// One word loaded as a peer last stored it (1, 2, 4 or 8 bytes), without ordering.
template <class T>
GV_HD GV_INLINE T load_word(const T* p) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
#if GV_DEVICE_PASS
  return from_bits<T>(*reinterpret_cast<const volatile bits_t<T>*>(p));
#else
  return from_bits<T>(sys_ref<bits_t<T>>(*const_cast<bits_t<T>*>(reinterpret_cast<const bits_t<T>*>(p)))
                          .load(sync::mo::memory_order_acquire));
#endif
}

/// Two words at 16-byte aligned p, stored where a peer polls them: on the GPU one 16-byte store
/// (st.volatile.v2.u64: each word single-copy atomic, the two unordered with each other, so a
/// reader checks both), on the host two store_word.
GV_HD GV_INLINE void store_pair(std::uint64_t* p, std::uint64_t a, std::uint64_t b) {
#if GV_DEVICE_PASS
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
#else
  store_word(p, a);
  store_word(p + 1, b);
#endif
}

/// store_word by the members for which `mine` holds, as one predicated store: no branch, so no
/// convergence barrier for the group to wait at after it (a leader's word in an LL round).
GV_HD GV_INLINE void store_word_if(bool mine, std::uint64_t* p, std::uint64_t v) {
#if GV_DEVICE_PASS
  asm volatile("{ .reg .pred q; setp.ne.u32 q, %2, 0; @q st.volatile.u64 [%0], %1; }" ::"l"(p), "l"(v),
               "r"(static_cast<unsigned>(mine))
               : "memory");
#else
  if (mine) store_word(p, v);
#endif
}
/// A load by the members for which `mine` holds, predicated as store_word_if (no branch for the
/// group to converge after); the others keep `v`. kStrong: a 4-byte flag another agent writes (the
/// abort word), loaded as load_word does; otherwise an 8-byte data word (a caller's source), a weak
/// load. As an asm statement it stays where it is written, before any branch that uses it:
/// LlChannel::put issues its source word while its common test is still being decided.
template <bool kStrong, class T>
GV_HD GV_INLINE T load_if(bool mine, const T* p, T v) {
  static_assert(kStrong ? std::is_same_v<T, std::uint32_t> : std::is_same_v<T, std::uint64_t>,
                "a strong 4-byte flag or a weak 8-byte data word: the two loads rma makes this way");
#if GV_DEVICE_PASS
  const auto m = static_cast<unsigned>(mine);
  if constexpr (kStrong)
    asm volatile("{ .reg .pred q; setp.ne.u32 q, %2, 0; @q ld.volatile.u32 %0, [%1]; }" : "+r"(v) : "l"(p), "r"(m)
                 : "memory");
  else
    asm volatile("{ .reg .pred q; setp.ne.u32 q, %2, 0; @q ld.u64 %0, [%1]; }" : "+l"(v) : "l"(p), "r"(m) : "memory");
  return v;
#else
  if (!mine) return v;
  if constexpr (kStrong) return load_word(p);
  else return *p;
#endif
}

/// The loads that poll store_pair's words: one 16-byte load on the GPU, two load_word on the host.
GV_HD GV_INLINE void load_pair(const std::uint64_t* p, std::uint64_t& a, std::uint64_t& b) {
#if GV_DEVICE_PASS
  asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
#else
  a = load_word(p);
  b = load_word(p + 1);
#endif
}

/// store_pair by the members for which `mine` holds, predicated (no branch around the store).
GV_HD GV_INLINE void store_pair_if(bool mine, std::uint64_t* p, std::uint64_t a, std::uint64_t b) {
#if GV_DEVICE_PASS
  asm volatile("{ .reg .pred q; setp.ne.u32 q, %3, 0; @q st.volatile.v2.u64 [%0], {%1, %2}; }" ::"l"(p), "l"(a), "l"(b),
               "r"(static_cast<unsigned>(mine))
               : "memory");
#else
  if (mine) store_pair(p, a, b);
#endif
}
/// load_pair by the members for which `mine` holds, predicated; the others keep a and b.
GV_HD GV_INLINE void load_pair_if(bool mine, const std::uint64_t* p, std::uint64_t& a, std::uint64_t& b) {
#if GV_DEVICE_PASS
  asm volatile("{ .reg .pred q; setp.ne.u32 q, %3, 0; @q ld.volatile.v2.u64 {%0, %1}, [%2]; }" : "+l"(a), "+l"(b)
               : "l"(p), "r"(static_cast<unsigned>(mine))
               : "memory");
#else
  if (mine) load_pair(p, a, b);
#endif
}

/// An acquire load at system scope: what the peer published before its store is visible to what
/// this thread reads next. wait_until polls with it; test() and the LL receive's ib fallback
/// read it once, after their relaxed check holds.
template <class T>
GV_HD GV_INLINE T signal_seen_before_data(const T* p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  return from_bits<T>(sys_ref<bits_t<T>>(*const_cast<bits_t<T>*>(reinterpret_cast<const bits_t<T>*>(p)))
                          .load(sync::mo::memory_order_acquire));
}

/// Order every store this thread made (and, through a group sync before it, its group's)
/// before the stores that follow, for every observer in the system: puts before later puts to
/// the same peer (fence). put_signal and signal release through signal_release instead.
GV_HD GV_INLINE void data_before_signal() {
#if GV_DEVICE_PASS
  cuda::atomic_thread_fence(sync::mo::memory_order_release, cuda::thread_scope_system);
#else
  std::atomic_thread_fence(sync::mo::memory_order_release);
#endif
}

/// quiet: every store and atomic this thread issued is performed for every observer in the
/// system before anything that follows (a full fence, also against later loads).
GV_HD GV_INLINE void puts_complete() {
#if GV_DEVICE_PASS
  cuda::atomic_thread_fence(sync::mo::memory_order_seq_cst, cuda::thread_scope_system);
#else
  std::atomic_thread_fence(sync::mo::memory_order_seq_cst);
#endif
}

/// The signal update `op` names (set or add) on a word of a peer's heap, released so that the
/// data stored before it is seen first. same_gpu (the word is in this GPU's memory, as every
/// direct peer's heap is: Endpoint::direct_same_gpu): device scope, whose fence waits for the
/// stores to reach this GPU's L2, where every reader of its memory reads them; otherwise system
/// scope, whose fence waits for them to reach a peer GPU's memory or host memory too (on one
/// H200, a put_signal's half round trip 1.10 -> 0.89 us at 8 B and 1.25-1.31 -> 1.01-1.10 at
/// 16-128 B from a thread with device scope; bench/results/archive/2026-11-27-h200-rma-ab-signal-scope.txt).
GV_HD GV_INLINE void signal_release(std::uint64_t* p, SignalOp op, std::uint64_t v, bool same_gpu) {
#if GV_DEVICE_PASS
  if (same_gpu) {
    if (op == SignalOp::kSet) sync::aref<std::uint64_t>(*p).store(v, sync::mo::memory_order_release);
    else sync::aref<std::uint64_t>(*p).fetch_add(v, sync::mo::memory_order_release);
    return;
  }
#else
  (void)same_gpu;
#endif
  if (op == SignalOp::kSet) sys_ref<std::uint64_t>(*p).store(v, sync::mo::memory_order_release);
  else sys_ref<std::uint64_t>(*p).fetch_add(v, sync::mo::memory_order_release);
}

/// Remote atomics on 4- and 8-byte integers, relaxed (NVSHMEM's atomics order nothing else).
/// On the GPU they name the global space (a peer's heap, mapped here, is global memory): a
/// generic-address ATOM carries a predicate that the next branch waits on, so whatever followed
/// it (the abort word's load) waited for the atomic's whole round trip first (ncu on an H200).
/// `word` is a value the caller loaded before the atomic and tests after it (the abort word,
/// remote_rmw): the asm names it as written, so NVVM cannot move that test above the atomic,
/// where the atomic would wait for the load. Tested after, it waits for the load alone and runs
/// while the atomic is in flight. ptxas may still move it (the ATOM does not write the register):
/// remote_rmw's test stays after the ATOM, but a face fetch_add that branched on the word itself
/// had it moved above, and took 0.42 us against 0.29 (notes/rma.md, 2026-11-27).
#if GV_DEVICE_PASS
template <class T>
__device__ GV_INLINE std::uint64_t global_address(const T* p) {
  return static_cast<std::uint64_t>(__cvta_generic_to_global(p));
}
#endif

template <class T>
GV_HD GV_INLINE T atomic_fetch_add(T* p, T v, std::uint32_t& word) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 8) {
    std::uint64_t r;
    asm volatile("atom.relaxed.sys.global.add.u64 %0, [%2], %3;"
                 : "=l"(r), "+r"(word) : "l"(global_address(p)), "l"(to_bits(v)) : "memory");
    return from_bits<T>(r);
  } else {
    std::uint32_t r;
    asm volatile("atom.relaxed.sys.global.add.u32 %0, [%2], %3;"
                 : "=r"(r), "+r"(word) : "l"(global_address(p)), "r"(to_bits(v)) : "memory");
    return from_bits<T>(r);
  }
#else
  (void)word;
  return sys_ref<T>(*p).fetch_add(v, sync::mo::memory_order_relaxed);
#endif
}
template <class T>
GV_HD GV_INLINE T atomic_exchange(T* p, T v, std::uint32_t& word) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 8) {
    std::uint64_t r;
    asm volatile("atom.relaxed.sys.global.exch.b64 %0, [%2], %3;"
                 : "=l"(r), "+r"(word) : "l"(global_address(p)), "l"(to_bits(v)) : "memory");
    return from_bits<T>(r);
  } else {
    std::uint32_t r;
    asm volatile("atom.relaxed.sys.global.exch.b32 %0, [%2], %3;"
                 : "=r"(r), "+r"(word) : "l"(global_address(p)), "r"(to_bits(v)) : "memory");
    return from_bits<T>(r);
  }
#else
  (void)word;
  return sys_ref<T>(*p).exchange(v, sync::mo::memory_order_relaxed);
#endif
}
template <class T>
GV_HD GV_INLINE T atomic_compare_swap(T* p, T cond, T v, std::uint32_t& word) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 8) {
    std::uint64_t r;
    asm volatile("atom.relaxed.sys.global.cas.b64 %0, [%2], %3, %4;"
                 : "=l"(r), "+r"(word) : "l"(global_address(p)), "l"(to_bits(cond)), "l"(to_bits(v)) : "memory");
    return from_bits<T>(r);  // the value found: equal to cond when the swap happened
  } else {
    std::uint32_t r;
    asm volatile("atom.relaxed.sys.global.cas.b32 %0, [%2], %3, %4;"
                 : "=r"(r), "+r"(word) : "l"(global_address(p)), "r"(to_bits(cond)), "r"(to_bits(v)) : "memory");
    return from_bits<T>(r);
  }
#else
  (void)word;
  sys_ref<T>(*p).compare_exchange_strong(cond, v, sync::mo::memory_order_relaxed, sync::mo::memory_order_relaxed);
  return cond;  // the value found: equal to the argument when the swap happened
#endif
}
template <class T>
GV_HD GV_INLINE T atomic_load(const T* p, std::uint32_t& word) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 8) {
    std::uint64_t r;
    asm volatile("ld.relaxed.sys.global.b64 %0, [%2];" : "=l"(r), "+r"(word) : "l"(global_address(p)) : "memory");
    return from_bits<T>(r);
  } else {
    std::uint32_t r;
    asm volatile("ld.relaxed.sys.global.b32 %0, [%2];" : "=r"(r), "+r"(word) : "l"(global_address(p)) : "memory");
    return from_bits<T>(r);
  }
#else
  (void)word;
  return sys_ref<T>(*const_cast<T*>(p)).load(sync::mo::memory_order_relaxed);
#endif
}

}  // namespace gv::rma::detail
