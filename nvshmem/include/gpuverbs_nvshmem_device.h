// The device half of gpuverbs' NVSHMEM face (included by nvshmem.h under nvcc): every call maps
// to one gv::rma operation on this translation unit's endpoint copy.
// A part of nvshmem.h: included on its own, it brings the whole face (nvshmem.h includes this
// file at the point its declarations need, and its guard makes this include a no-op there).
#include "nvshmem.h"
#ifndef GPUVERBS_NVSHMEM_DEVICE_H
#define GPUVERBS_NVSHMEM_DEVICE_H

namespace gv::nvshmem::detail {
namespace rma = gv::rma;
// NVSHMEM's _warp and _block puts, gets and put_signals begin with the group's sync, so a
// program may have each thread write its part of a put's source (or read its part of a get's
// destination) and make the call at once; rma leaves that sync to its caller (rma.hpp), so the
// face makes it here (G::sync: nothing for a thread, __syncwarp, __syncthreads).
// tests/nvshmem/group_entry.cu fails without it.
template <class G>
__device__ __forceinline__ void putmem(void* d, const void* s, std::size_t n, int pe, bool nbi, const char* what) {
  G::sync();
  check(nbi ? rma::put_nbi<G>(ep(), d, s, n, pe) : rma::put<G>(ep(), d, s, n, pe), what);
}
template <class G>
__device__ __forceinline__ void getmem(void* d, const void* s, std::size_t n, int pe, bool nbi, const char* what) {
  G::sync();
  check(nbi ? rma::get_nbi<G>(ep(), d, s, n, pe) : rma::get<G>(ep(), d, s, n, pe), what);
}
template <class G>
__device__ __forceinline__ void putmem_signal(void* d, const void* s, std::size_t n, std::uint64_t* sig, std::uint64_t v,
                                              int op, int pe, bool nbi, const char* what) {
  G::sync();
  check(nbi ? rma::put_signal_nbi<G>(ep(), d, s, n, sig, v, signal_op_of(op), pe)
            : rma::put_signal<G>(ep(), d, s, n, sig, v, signal_op_of(op), pe),
        what);
}
template <class T>
__device__ __forceinline__ T wait_until(const T* ivar, int cmp, T v, const char* what) {
  T seen{};
  check(rma::wait_until(ep(), ivar, cmp_of(cmp), v, &seen), what);
  return seen;
}
template <class G>
__device__ __forceinline__ void barrier(const char* what) {
  check(rma::barrier<G>(ep()), what);
}
template <class G>
__device__ __forceinline__ void quiet(const char* what) {
  check(rma::quiet<G>(ep()), what);
}
/// The atomics' integer type of the same size and signedness as T (long and long long alike).
template <class T>
using word_t = std::conditional_t<sizeof(T) == 4, std::conditional_t<std::is_signed_v<T>, std::int32_t, std::uint32_t>,
                                  std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;
}  // namespace gv::nvshmem::detail

__device__ inline void nvshmemx_barrier_all_warp(void) { gv::nvshmem::detail::barrier<gv::rma::Warp>("nvshmemx_barrier_all_warp"); }
__device__ inline void nvshmemx_barrier_all_block(void) { gv::nvshmem::detail::barrier<gv::rma::Block>("nvshmemx_barrier_all_block"); }
__device__ inline void nvshmemx_sync_all_warp(void) { gv::nvshmem::detail::barrier<gv::rma::Warp>("nvshmemx_sync_all_warp"); }
__device__ inline void nvshmemx_sync_all_block(void) { gv::nvshmem::detail::barrier<gv::rma::Block>("nvshmemx_sync_all_block"); }

// ---- mem RMA ---------------------------------------------------------------------------------

#define GV_NVSHMEM_MEM_OPS(PREFIX, SCOPE_SUFFIX, G)                                                              \
  __device__ inline void PREFIX##_putmem##SCOPE_SUFFIX(void* dest, const void* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::putmem<G>(dest, source, nelems, pe, false, #PREFIX "_putmem" #SCOPE_SUFFIX);            \
  }                                                                                                              \
  __device__ inline void PREFIX##_getmem##SCOPE_SUFFIX(void* dest, const void* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::getmem<G>(dest, source, nelems, pe, false, #PREFIX "_getmem" #SCOPE_SUFFIX);            \
  }                                                                                                              \
  __device__ inline void PREFIX##_putmem_nbi##SCOPE_SUFFIX(void* dest, const void* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::putmem<G>(dest, source, nelems, pe, true, #PREFIX "_putmem_nbi" #SCOPE_SUFFIX);         \
  }                                                                                                              \
  __device__ inline void PREFIX##_getmem_nbi##SCOPE_SUFFIX(void* dest, const void* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::getmem<G>(dest, source, nelems, pe, true, #PREFIX "_getmem_nbi" #SCOPE_SUFFIX);         \
  }                                                                                                              \
  __device__ inline void PREFIX##_putmem_signal##SCOPE_SUFFIX(void* dest, const void* source, std::size_t nelems,     \
                                                              std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe) { \
    gv::nvshmem::detail::putmem_signal<G>(dest, source, nelems, sig_addr, signal, sig_op, pe, false,             \
                                          #PREFIX "_putmem_signal" #SCOPE_SUFFIX);                               \
  }                                                                                                              \
  __device__ inline void PREFIX##_putmem_signal_nbi##SCOPE_SUFFIX(void* dest, const void* source, std::size_t nelems, \
                                                                  std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe) { \
    gv::nvshmem::detail::putmem_signal<G>(dest, source, nelems, sig_addr, signal, sig_op, pe, true,              \
                                          #PREFIX "_putmem_signal_nbi" #SCOPE_SUFFIX);                           \
  }

GV_NVSHMEM_MEM_OPS(nvshmem, , gv::rma::Thread)
GV_NVSHMEM_MEM_OPS(nvshmemx, _warp, gv::rma::Warp)
GV_NVSHMEM_MEM_OPS(nvshmemx, _block, gv::rma::Block)
#undef GV_NVSHMEM_MEM_OPS

// ---- typed RMA -------------------------------------------------------------------------------

#define GV_NVSHMEM_TYPED_SCOPED(PREFIX, NAME, TYPE, SCOPE_SUFFIX, G)                                              \
  __device__ inline void PREFIX##_##NAME##_put##SCOPE_SUFFIX(TYPE* dest, const TYPE* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::putmem<G>(dest, source, nelems * sizeof(TYPE), pe, false, #PREFIX "_" #NAME "_put" #SCOPE_SUFFIX); \
  }                                                                                                              \
  __device__ inline void PREFIX##_##NAME##_get##SCOPE_SUFFIX(TYPE* dest, const TYPE* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::getmem<G>(dest, source, nelems * sizeof(TYPE), pe, false, #PREFIX "_" #NAME "_get" #SCOPE_SUFFIX); \
  }                                                                                                              \
  __device__ inline void PREFIX##_##NAME##_put_nbi##SCOPE_SUFFIX(TYPE* dest, const TYPE* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::putmem<G>(dest, source, nelems * sizeof(TYPE), pe, true, #PREFIX "_" #NAME "_put_nbi" #SCOPE_SUFFIX); \
  }                                                                                                              \
  __device__ inline void PREFIX##_##NAME##_get_nbi##SCOPE_SUFFIX(TYPE* dest, const TYPE* source, std::size_t nelems, int pe) { \
    gv::nvshmem::detail::getmem<G>(dest, source, nelems * sizeof(TYPE), pe, true, #PREFIX "_" #NAME "_get_nbi" #SCOPE_SUFFIX); \
  }                                                                                                              \
  __device__ inline void PREFIX##_##NAME##_put_signal##SCOPE_SUFFIX(TYPE* dest, const TYPE* source, std::size_t nelems, \
                                                                    std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe) { \
    gv::nvshmem::detail::putmem_signal<G>(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe, false, \
                                          #PREFIX "_" #NAME "_put_signal" #SCOPE_SUFFIX);                        \
  }                                                                                                              \
  __device__ inline void PREFIX##_##NAME##_put_signal_nbi##SCOPE_SUFFIX(TYPE* dest, const TYPE* source, std::size_t nelems, \
                                                                        std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe) { \
    gv::nvshmem::detail::putmem_signal<G>(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe, true, \
                                          #PREFIX "_" #NAME "_put_signal_nbi" #SCOPE_SUFFIX);                    \
  }

#define GV_NVSHMEM_TYPED(NAME, TYPE)                                                                            \
  GV_NVSHMEM_TYPED_SCOPED(nvshmem, NAME, TYPE, , gv::rma::Thread)                                               \
  GV_NVSHMEM_TYPED_SCOPED(nvshmemx, NAME, TYPE, _warp, gv::rma::Warp)                                           \
  GV_NVSHMEM_TYPED_SCOPED(nvshmemx, NAME, TYPE, _block, gv::rma::Block)                                         \
  __device__ inline void nvshmem_##NAME##_p(TYPE* dest, TYPE value, int pe) {                                   \
    gv::nvshmem::detail::check(gv::rma::p(gv_nvshmem_ep, dest, value, pe), "nvshmem_" #NAME "_p");              \
  }                                                                                                              \
  __device__ inline TYPE nvshmem_##NAME##_g(const TYPE* source, int pe) {                                       \
    TYPE v{};                                                                                                    \
    gv::nvshmem::detail::check(gv::rma::g(gv_nvshmem_ep, source, pe, v), "nvshmem_" #NAME "_g");                \
    return v;                                                                                                    \
  }

GV_NVSHMEM_TYPED(float, float)
GV_NVSHMEM_TYPED(double, double)
GV_NVSHMEM_TYPED(char, char)
GV_NVSHMEM_TYPED(schar, signed char)
GV_NVSHMEM_TYPED(short, short)
GV_NVSHMEM_TYPED(int, int)
GV_NVSHMEM_TYPED(long, long)
GV_NVSHMEM_TYPED(longlong, long long)
GV_NVSHMEM_TYPED(uchar, unsigned char)
GV_NVSHMEM_TYPED(ushort, unsigned short)
GV_NVSHMEM_TYPED(uint, unsigned int)
GV_NVSHMEM_TYPED(ulong, unsigned long)
GV_NVSHMEM_TYPED(ulonglong, unsigned long long)
GV_NVSHMEM_TYPED(int8, std::int8_t)
GV_NVSHMEM_TYPED(int16, std::int16_t)
GV_NVSHMEM_TYPED(int32, std::int32_t)
GV_NVSHMEM_TYPED(int64, std::int64_t)
GV_NVSHMEM_TYPED(uint8, std::uint8_t)
GV_NVSHMEM_TYPED(uint16, std::uint16_t)
GV_NVSHMEM_TYPED(uint32, std::uint32_t)
GV_NVSHMEM_TYPED(uint64, std::uint64_t)
GV_NVSHMEM_TYPED(size, std::size_t)
GV_NVSHMEM_TYPED(ptrdiff, std::ptrdiff_t)
#undef GV_NVSHMEM_TYPED
#undef GV_NVSHMEM_TYPED_SCOPED

// ---- signals -----------------------------------------------------------------------------------

__device__ inline void nvshmemx_signal_op(std::uint64_t* sig_addr, std::uint64_t signal, int sig_op, int pe) {
  gv::nvshmem::detail::check(gv::rma::signal(gv_nvshmem_ep, sig_addr, signal, gv::nvshmem::detail::signal_op_of(sig_op), pe),
                             "nvshmemx_signal_op");
}
__device__ inline std::uint64_t nvshmem_signal_fetch(const std::uint64_t* sig_addr) { return gv::rma::signal_fetch(sig_addr); }
__device__ inline std::uint64_t nvshmem_signal_wait_until(std::uint64_t* sig_addr, int cmp, std::uint64_t cmp_value) {
  return gv::nvshmem::detail::wait_until<std::uint64_t>(sig_addr, cmp, cmp_value, "nvshmem_signal_wait_until");
}

// ---- point-to-point synchronisation ------------------------------------------------------------

#define GV_NVSHMEM_WAIT(NAME, TYPE)                                                                           \
  __device__ inline void nvshmem_##NAME##_wait_until(TYPE* ivar, int cmp, TYPE cmp_value) {                   \
    using W = gv::nvshmem::detail::word_t<TYPE>;                                                              \
    (void)gv::nvshmem::detail::wait_until<W>(reinterpret_cast<const W*>(ivar), cmp, static_cast<W>(cmp_value), \
                                             "nvshmem_" #NAME "_wait_until");                                  \
  }                                                                                                            \
  __device__ inline int nvshmem_##NAME##_test(TYPE* ivar, int cmp, TYPE cmp_value) {                          \
    using W = gv::nvshmem::detail::word_t<TYPE>;                                                              \
    return gv::rma::test(gv_nvshmem_ep, reinterpret_cast<const W*>(ivar), gv::nvshmem::detail::cmp_of(cmp),   \
                         static_cast<W>(cmp_value)) ? 1 : 0;                                                   \
  }
GV_NVSHMEM_WAIT(int, int)
GV_NVSHMEM_WAIT(long, long)
GV_NVSHMEM_WAIT(longlong, long long)
GV_NVSHMEM_WAIT(uint, unsigned int)
GV_NVSHMEM_WAIT(ulong, unsigned long)
GV_NVSHMEM_WAIT(ulonglong, unsigned long long)
GV_NVSHMEM_WAIT(int32, std::int32_t)
GV_NVSHMEM_WAIT(int64, std::int64_t)
GV_NVSHMEM_WAIT(uint32, std::uint32_t)
GV_NVSHMEM_WAIT(uint64, std::uint64_t)
GV_NVSHMEM_WAIT(size, std::size_t)
GV_NVSHMEM_WAIT(ptrdiff, std::ptrdiff_t)
#undef GV_NVSHMEM_WAIT

// ---- atomics -----------------------------------------------------------------------------------

#define GV_NVSHMEM_AMO(NAME, TYPE)                                                                            \
  __device__ inline TYPE nvshmem_##NAME##_atomic_fetch_add(TYPE* dest, TYPE value, int pe) {                  \
    using W = gv::nvshmem::detail::word_t<TYPE>;                                                              \
    W old{};                                                                                                   \
    gv::nvshmem::detail::check(gv::rma::fetch_add(gv_nvshmem_ep, reinterpret_cast<W*>(dest), static_cast<W>(value), pe, old), \
                               "nvshmem_" #NAME "_atomic_fetch_add");                                          \
    return static_cast<TYPE>(old);                                                                             \
  }                                                                                                            \
  __device__ inline void nvshmem_##NAME##_atomic_add(TYPE* dest, TYPE value, int pe) {                        \
    using W = gv::nvshmem::detail::word_t<TYPE>;                                                              \
    gv::nvshmem::detail::check(gv::rma::add(gv_nvshmem_ep, reinterpret_cast<W*>(dest), static_cast<W>(value), pe), \
                               "nvshmem_" #NAME "_atomic_add");                                                \
  }                                                                                                            \
  __device__ inline TYPE nvshmem_##NAME##_atomic_fetch_inc(TYPE* dest, int pe) {                              \
    return nvshmem_##NAME##_atomic_fetch_add(dest, static_cast<TYPE>(1), pe);                                              \
  }                                                                                                            \
  __device__ inline void nvshmem_##NAME##_atomic_inc(TYPE* dest, int pe) { nvshmem_##NAME##_atomic_add(dest, static_cast<TYPE>(1), pe); } \
  __device__ inline TYPE nvshmem_##NAME##_atomic_compare_swap(TYPE* dest, TYPE cond, TYPE value, int pe) {    \
    using W = gv::nvshmem::detail::word_t<TYPE>;                                                              \
    W old{};                                                                                                   \
    gv::nvshmem::detail::check(gv::rma::compare_swap(gv_nvshmem_ep, reinterpret_cast<W*>(dest), static_cast<W>(cond), \
                                                     static_cast<W>(value), pe, old),                           \
                               "nvshmem_" #NAME "_atomic_compare_swap");                                       \
    return static_cast<TYPE>(old);                                                                             \
  }
#define GV_NVSHMEM_AMO_EXT(NAME, TYPE)                                                                        \
  __device__ inline TYPE nvshmem_##NAME##_atomic_swap(TYPE* dest, TYPE value, int pe) {                       \
    TYPE old{};                                                                                                \
    gv::nvshmem::detail::check(gv::rma::swap(gv_nvshmem_ep, dest, value, pe, old), "nvshmem_" #NAME "_atomic_swap"); \
    return old;                                                                                                \
  }                                                                                                            \
  __device__ inline TYPE nvshmem_##NAME##_atomic_fetch(const TYPE* source, int pe) {                          \
    TYPE v{};                                                                                                  \
    gv::nvshmem::detail::check(gv::rma::fetch(gv_nvshmem_ep, source, pe, v), "nvshmem_" #NAME "_atomic_fetch"); \
    return v;                                                                                                  \
  }                                                                                                            \
  __device__ inline void nvshmem_##NAME##_atomic_set(TYPE* dest, TYPE value, int pe) {                        \
    (void)nvshmem_##NAME##_atomic_swap(dest, value, pe);                                                       \
  }
#define GV_NVSHMEM_AMO_ALL(NAME, TYPE) GV_NVSHMEM_AMO(NAME, TYPE) GV_NVSHMEM_AMO_EXT(NAME, TYPE)
GV_NVSHMEM_AMO_ALL(int, int)
GV_NVSHMEM_AMO_ALL(long, long)
GV_NVSHMEM_AMO_ALL(longlong, long long)
GV_NVSHMEM_AMO_ALL(uint, unsigned int)
GV_NVSHMEM_AMO_ALL(ulong, unsigned long)
GV_NVSHMEM_AMO_ALL(ulonglong, unsigned long long)
GV_NVSHMEM_AMO_ALL(int32, std::int32_t)
GV_NVSHMEM_AMO_ALL(int64, std::int64_t)
GV_NVSHMEM_AMO_ALL(uint32, std::uint32_t)
GV_NVSHMEM_AMO_ALL(uint64, std::uint64_t)
GV_NVSHMEM_AMO_ALL(size, std::size_t)
GV_NVSHMEM_AMO_ALL(ptrdiff, std::ptrdiff_t)
GV_NVSHMEM_AMO_EXT(float, float)
GV_NVSHMEM_AMO_EXT(double, double)
#undef GV_NVSHMEM_AMO_ALL
#undef GV_NVSHMEM_AMO_EXT
#undef GV_NVSHMEM_AMO

#endif  // GPUVERBS_NVSHMEM_DEVICE_H
