// gpuverbs device API, one-sided level: put, get, signal, wait, atomics, fence, quiet and
// barrier between the ranks of a World, from kernels or host threads.
//
// A World (host_setup, <gpuverbs/host/world.hpp>) gives each rank a symmetric heap — an
// allocation at offset X of one rank's heap is at offset X of every rank's — and an Endpoint
// that kernels take by value. Symmetric addresses are local pointers into the heap: `dst` of a
// put names "the same offset of PE pe's heap". Local buffers (src of a put, dst of a get) may
// be any memory the caller reads and writes, except over the ib transport, where they must lie
// in the heap unless they fit inline (the lane's max_inline).
//
// Groups: every operation takes a group G (Thread, Warp or Block; group.hpp). All members call
// it together with the same arguments; all get the same Status. An operation does not sync the
// group on entry (over p2p each member copies its part at once): members' writes to a put's
// source, or reads of a get's destination, made before the call are ordered before it by the
// caller (__syncwarp, __syncthreads), as for CUDA's group copies. The NVSHMEM face syncs on
// entry, as NVSHMEM's _warp and _block calls do.
//
// Completion and order:
//   put / get / p / g / put_signal     return when the local buffer may be reused (put) or the
//                                      data has arrived (get); the put may still be in flight
//   *_nbi                              return at once; quiet() completes them
//   put_signal                         the data is visible at PE pe before the signal changes
//   fence()                            this thread's earlier puts to a PE are visible there
//                                      before its later ones
//   quiet()                            every put, signal and atomic this thread issued is complete
//                                      and visible everywhere
//   barrier()                          quiet, then wait until every rank reached the barrier
// A signal (put_signal, signal) over p2p is released at device scope where every direct peer's
// heap is in this GPU's memory (ranks sharing one GPU: Endpoint::direct_same_gpu), at system
// scope otherwise (a peer GPU, host memory).
// Every wait is bounded by Endpoint::budget and ends early with kAborted when the World is
// aborted (a rank died, World::abort()).
//
// Failures: what the caller sees and what each leaves behind.
//   failure             returns           left behind                          later operations
//   bad input           kInvalidPe,       nothing touched                      unaffected
//                       kOutOfBounds,
//                       kInvalidArgument
//   timeout (budget)    kTimeout          work already posted may still land   unaffected, except barrier: after
//                                         (a put, an atomic, a get's bytes)    a failed one every barrier of every
//                                                                              rank it reaches: kBarrierBroken
//   abort, dead rank    kAborted          as for a timeout; nothing new starts every one returns kAborted at once,
//                                                                              touching nothing (World::check says why);
//                                                                              on the GPU a p2p operation the abort
//                                                                              overtakes may still land (its abort
//                                                                              word is read beside its stores), and
//                                                                              a p2p _nbi call there reads no abort
//                                                                              word (it waits for nothing): the
//                                                                              quiet() after it returns kAborted
//   error CQE (ib)      kCompletionError  the failed WQE and those after it on that lane's later operations return
//                                         its lane did not execute (the QP    the error; World::describe names QP,
//                                         is in the error state)               WQE and syndrome
//   ring full (ib)      kQueueFull        nothing posted; if operations were   those queued behind it and every
//     for the whole                       queued behind it on the lane, the   later one on the lane: kQueueBroken
//     budget                              lane's queue is broken at its slot   (World::describe says where); the
//                                         (a timed-out or aborted wait for    World must be rebuilt
//                                         the lane's turn does the same)
//
// What is checked:
//   - PE: in range and reachable (kInvalidPe).
//   - Symmetric addresses (dst of put, src of get, signal and atomic words, waited words): inside
//     the user part of the heap, the range not overflowing (kOutOfBounds); signal, atomic and
//     waited words naturally aligned (kInvalidArgument; test() says false).
//   - Local buffers (src of put, dst of get): null is kInvalidArgument on every transport, at
//     every size; over ib, a buffer above the inline size must lie in this rank's heap
//     (kInvalidArgument).
// The caller's duty (not checked): that a non-null local buffer is `bytes` of memory it may read
// (put) or write (get) — p2p and inline puts copy it directly and fault where memcpy would; that
// it does not overlap the destination; that a put_nbi's source stays unchanged until quiet().
//
//   __global__ void ping(__grid_constant__ const gv::rma::Endpoint ep, float* buf, std::uint64_t* flag) {
//     const int peer = 1 - static_cast<int>(ep.rank);
//     gv::rma::put_signal<gv::rma::Block>(ep, buf, buf, 4096, flag, 1, gv::rma::SignalOp::kAdd, peer);
//     gv::rma::wait_until<gv::rma::Block>(ep, flag, gv::rma::Cmp::kGe, std::uint64_t{1});
//   }
#pragma once
#include <cstddef>
#include <cstdint>

#include "rma/endpoint.hpp"
#include "rma/group.hpp"
#include "status.hpp"

namespace gv::rma {

// ---- Data movement ------------------------------------------------------------------------

template <class G = Thread>
GV_HD Status put(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe);
template <class G = Thread>
GV_HD Status put_nbi(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe);
template <class G = Thread>
GV_HD Status get(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe);
template <class G = Thread>
GV_HD Status get_nbi(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, int pe);
/// One value (1, 2, 4 or 8 bytes) stored at PE pe / loaded from it.
template <class G = Thread, class T>
GV_HD Status p(const Endpoint& ep, T* dst, T value, int pe);
template <class G = Thread, class T>
GV_HD Status g(const Endpoint& ep, const T* src, int pe, T& value);

// ---- Signals ------------------------------------------------------------------------------

/// put, then `*sig op= value` at PE pe, the signal ordered after the data.
template <class G = Thread>
GV_HD Status put_signal(const Endpoint& ep, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                        std::uint64_t value, SignalOp op, int pe);
template <class G = Thread>
GV_HD Status put_signal_nbi(const Endpoint& ep, void* dst, const void* src, std::size_t bytes,
                            std::uint64_t* sig, std::uint64_t value, SignalOp op, int pe);
/// `*sig op= value` at PE pe, after this thread's earlier stores to it (release).
template <class G = Thread>
GV_HD Status signal(const Endpoint& ep, std::uint64_t* sig, std::uint64_t value, SignalOp op, int pe);

// ---- Waiting on this rank's words ---------------------------------------------------------

/// Wait (bounded) until `*ivar cmp value` holds for a word of this rank's heap (4 or 8 bytes);
/// what peers wrote before updating it is then visible. `seen` (optional) gets the value.
template <class G = Thread, class T>
GV_HD Status wait_until(const Endpoint& ep, const T* ivar, Cmp cmp, T value, T* seen = nullptr);
/// Whether `*ivar cmp value` holds now (with the same visibility as wait_until when it does).
template <class G = Thread, class T>
GV_HD bool test(const Endpoint& ep, const T* ivar, Cmp cmp, T value);
/// The current value of a local signal word.
GV_HD std::uint64_t signal_fetch(const std::uint64_t* sig);

// ---- Remote atomics (4- and 8-byte integers; swap and fetch also other 4/8-byte types) -----

template <class G = Thread, class T>
GV_HD Status fetch_add(const Endpoint& ep, T* target, T value, int pe, T& old);
template <class G = Thread, class T>
GV_HD Status add(const Endpoint& ep, T* target, T value, int pe);
template <class G = Thread, class T>
GV_HD Status compare_swap(const Endpoint& ep, T* target, T cond, T value, int pe, T& old);
template <class G = Thread, class T>
GV_HD Status swap(const Endpoint& ep, T* target, T value, int pe, T& old);
template <class G = Thread, class T>
GV_HD Status fetch(const Endpoint& ep, const T* target, int pe, T& value);

// ---- Order, completion, synchronisation ---------------------------------------------------

template <class G = Thread>
GV_HD Status fence(const Endpoint& ep);
template <class G = Thread>
GV_HD Status quiet(const Endpoint& ep);
/// Every rank's group calls it; returns once all have (after a quiet). One barrier at a time
/// per rank. After one fails (timeout, abort, error) the ranks' barrier epochs are unknown, so
/// it and every later barrier of this rank, and of each peer it could tell, return
/// kBarrierBroken (a rank that arrived just as the failed one expired may have passed it).
template <class G = Thread>
GV_HD Status barrier(const Endpoint& ep);

// ---- Addresses ----------------------------------------------------------------------------

/// PE pe's copy of symmetric `sym` in this address space (kSelf and kP2p peers), else null.
GV_HD void* ptr(const Endpoint& ep, const void* sym, int pe);
/// The transport that reaches PE pe (kNone when out of range).
GV_HD Transport transport(const Endpoint& ep, int pe);

}  // namespace gv::rma

#include "rma/detail/ops.hpp"
// Flag-in-data messages: ll_bytes, put_ll, wait_ll.
#include "rma/ll.hpp"
