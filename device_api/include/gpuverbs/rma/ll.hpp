// Flag-in-data messages (the LL protocol of NCCL's collectives): every 8-byte store carries 4
// data bytes and a 4-byte flag, the round's sequence number, so the receiver knows each word has
// arrived when its flag does. No fence orders data before a signal (put_signal's system-scope
// fence waits for every data store's acknowledgement).
//
// An LL buffer is a symmetric allocation of ll_bytes(N) bytes (16-byte aligned; zeroed, as
// World::alloc returns it) that carries messages of up to N bytes into each rank's copy:
//
//   auto* box = world.alloc(gv::rma::ll_bytes(256));               // every rank, same offset
//   // rank 0, round k = 1, 2, ...:   put_ll<Warp>(ep, box, msg, 256, k, 1)
//   // rank 1:                        wait_ll<Warp>(ep, box, 256, k, out)
//
// Rounds: each put_ll to a buffer takes a `seq` the buffer has not carried before (a round
// counter from 1; put_ll refuses 0 and the previous round's seq, the cases it can see: a word
// left from an older round with the same seq would pass for new), and the receiver waits for
// that seq, so the buffer is never cleared. One sender and one receiver per buffer copy: a rank's copy receives from one peer,
// and the same copy keeps the state of what this rank sent into the peer's copy, so a ring or a
// ping-pong uses one buffer. put_ll waits (bounded) until the receiver has taken the previous
// round: a sender running ahead waits, it never overwrites a round not yet read.
//
// Cost: put_ll loads this rank's credit and sent words (one round trip to memory) and stores the
// data words, twice the data's bytes, two words (8 data bytes) per 16-byte store as in NCCL's
// LL lines; wait_ll polls the words 16 bytes a load and stores the credit back to the sender.
// Over ib the data travels as a put_signal (one WRITE, then the header word) with the same
// semantics.
//
// LL128 (120 data bytes and one flag per 128-byte line) is not offered. It relies on a warp's
// 128-byte store reaching the peer as one: a hammer test (64 pairs of warps, a million rounds each
// way, every word checked; bench/results/archive/2026-11-27-h200-ll128-probe.txt) saw no line
// whose flag came before its data on one H200 or across two, but a warp's LL128 round was no
// faster than these lines up to 1 KiB there, and it would need its own buffer area (its data
// words carry no flag, so an LL round after it could take them for flagged words).
#pragma once
#include <cstddef>
#include <cstdint>

#include "../status.hpp"
#include "endpoint.hpp"
#include "group.hpp"

namespace gv::rma {

/// Bytes before the data words: the credit and sent words of this rank's outgoing rounds, the
/// header word (sender and seq) of the incoming one, and a word kept zero, so that the data words
/// start 16-byte aligned (they travel in pairs, one 16-byte store each).
inline constexpr std::size_t kLlHeaderBytes = 32;
/// Largest LL message (the buffer holds twice the data).
inline constexpr std::size_t kLlMaxBytes = std::size_t{1} << 30;

/// Size of an LL buffer that carries messages of up to n bytes: 16 bytes (two flagged words) for
/// every 8 data bytes, and for an empty message.
GV_HD inline constexpr std::size_t ll_bytes(std::size_t n) { return kLlHeaderBytes + 16 * (n > 8 ? (n + 7) / 8 : 1); }

/// Send n bytes of `src` (any alignment) into PE pe's copy of LL buffer `dst` as round `seq`.
/// Returns when `src` may be reused. Waits (bounded) for the receiver to take the previous round.
/// kInvalidArgument: seq 0 or the seq of the previous round, dst not 16-byte aligned, n over
/// kLlMaxBytes; kOutOfBounds / kInvalidPe as for put. Nothing is sent when it fails.
template <class G = Thread>
GV_HD Status put_ll(const Endpoint& ep, void* dst, const void* src, std::size_t n, std::uint32_t seq, int pe);

/// Wait (bounded, abortable) until round `seq` of n bytes has arrived in this rank's copy of
/// LL buffer `buf`, copy it to `out` (any alignment), and tell the sender it may send the next.
template <class G = Thread>
GV_HD Status wait_ll(const Endpoint& ep, const void* buf, std::size_t n, std::uint32_t seq, void* out);

/// put_ll and wait_ll bound once to one LL buffer, its two peers (the PE this rank sends to, the
/// PE that sends to this rank: the same one in a ping-pong, neighbours in a ring) and a largest
/// message, for a kernel that exchanges many rounds:
///
///   gv::rma::LlChannel<Warp> ch;
///   if (ch.open(ep, box, 256, peer, peer) != Status::kOk) ...   // once per kernel
///   for (k = 1; ...) { ch.put(msg, 256, k); ch.wait(out, 256, k); }
///
/// A rank that answers each round (the other end of a ping-pong, a stage of a pipeline) can wait
/// and put in one call, wait_put, which reads the reply's source before the round arrives and
/// stores it as soon as it has:
///
///   ch.put(msg, 256, 1);                                     // rank 0 opens the exchange
///   for (k = 1; ...) ch.wait_put(out, 256, k, msg, 256, k + 1);
///
/// open() makes the checks put_ll and wait_ll make on every call (PE, heap range, alignment) and
/// finds the peers' copies once. Over p2p each wait() also reads the credit word `to` writes back,
/// in the same loads that poll the incoming words, so the put() after it knows without a round
/// trip to memory that `to` took the previous round (a ping-pong or a ring never waits there).
/// The words in memory are put_ll's and wait_ll's: a channel's rounds may follow theirs on one
/// buffer, but while a channel is open no put_ll or wait_ll may use the buffer (the channel keeps
/// the sent and credit words in registers).
/// Every member of G calls every member function with the same arguments; the object lives in
/// registers (a kernel's local variable), one per group, and keeps a pointer to `ep`, which must
/// outlive it (a kernel's __grid_constant__ parameter does). Over ib (to or from a PE reached
/// through verbs) put() and wait() are put_ll and wait_ll.
/// A block's wait() hands the leader's credit to the other threads through a shared-memory slot
/// of its call site, not of the object, and each channel alternates its own two slots: a block
/// that keeps two LlChannel<Block> syncs (__syncthreads) between a wait() of one and a wait() of
/// the other, so that no thread can still be reading the slot the second one writes.
/// A block's round grows with its threads (gv_rma --block-threads, 8 B-1 KiB over placements:
/// 0.43-0.52 us from 128 threads against 0.51-0.57 from 512 on one H100 or H200, 0.84-1.04
/// against 0.92-1.09 across two; bench/results/archive/2026-11-28-2xh200-2xh100-rma-ab-ll-block-size-header.txt).
template <class G = Thread>
class LlChannel {
 public:
  /// Bind to LL buffer `buf` for messages of up to n bytes sent to PE `to` and received from PE
  /// `from`. kInvalidArgument: n over kLlMaxBytes, buf not 16-byte aligned; kOutOfBounds
  /// (ll_bytes(n) past the heap) and kInvalidPe (either PE) as for put_ll; kAborted after
  /// World::abort(). The channel stays closed when it fails (put and wait then return
  /// kInvalidArgument).
  GV_HD Status open(const Endpoint& ep, void* buf, std::size_t n, int to, int from);
  /// put_ll(ep, buf, src, n, seq, to). kInvalidArgument also for n over open()'s n.
  GV_HD Status put(const void* src, std::size_t n, std::uint32_t seq);
  /// wait_ll(ep, buf, n, seq, out) for a round from `from`. kInvalidArgument also for n over
  /// open()'s n. Over ib kInvalidPe for a round another PE sent (its sender gets no credit). Over
  /// p2p the sender is not checked (a wait does not read the header at all, only its data
  /// words: a block's half round trip 0.85 -> 0.70 us on one H100), so a round
  /// another PE sent into this copy, against the contract of one sender per copy, is taken as
  /// from's.
  GV_HD Status wait(void* out, std::size_t n, std::uint32_t seq);
  /// wait(out, n, seq), then, if it returned kOk, put(src, m, next): the same statuses, and the
  /// same effects in the same order (the reply leaves after round seq has arrived whole). A
  /// thread's or a warp's p2p call whose messages are both put()'s and wait()'s common case,
  /// with src and out apart, loads src before it polls and stores the reply's lines right after
  /// the poll, ahead of the copy into `out`; otherwise (a block, over ib, a relay whose src is
  /// `out`) it makes the two calls. gv_rma's ll_wait_put rows (across two H200s: a warp's
  /// 8 B-1 KiB 0.70-0.89 us against wait() and put() in the same loop's 0.81-1.03, a thread's
  /// 8-64 B 0.69-0.99 against 0.78-1.18; bench/results/archive/2026-11-28-2xh200-rma-ab-ll-wait-put.txt).
  GV_HD Status wait_put(void* out, std::size_t n, std::uint32_t seq, const void* src, std::size_t m,
                        std::uint32_t next);

 private:
  /// A put's end once its lines are stored (put()'s and wait_put()'s): the abort word, one
  /// group-wide sync, round seq recorded as sent.
  GV_HD Status put_done(std::uint32_t seq);

  const Endpoint* ep_ = nullptr;
  std::uint64_t* mine_ = nullptr;    ///< this rank's copy
  std::uint64_t* theirs_ = nullptr;  ///< to's copy in this address space (p2p); null over ib
  std::uint64_t* back_ = nullptr;    ///< from's copy in this address space (p2p); null over ib
  const std::uint32_t* aborted_ = nullptr;  ///< this rank's abort word (in its heap)
  const std::uint32_t* abort_ = nullptr;    ///< the endpoint's host abort flag (waits)
  Budget budget_{};                         ///< the endpoint's wait bound
  std::uint32_t max_ = 0;   ///< open()'s n (at most kLlMaxBytes)
  /// The largest message put() and wait() take by their common case (whole lines, at most a poll
  /// batch a member): min(max_, a batch a member), computed once by open(). 32-bit, as max_, so
  /// that the channel keeps its registers (gv_rma's block kernel: 119 of its 128, 118 before).
  std::uint32_t fast_ = 0;
  int to_ = -1, from_ = -1;
  std::uint32_t rank_ = 0;  ///< this rank (the header word's sender)
  std::uint32_t turns_ = 0;  ///< which shared slot the next put (bit 0) and wait (bit 1) use
  std::uint32_t sent_ = 0;    ///< the last round sent (the sent word)
  std::uint32_t credit_ = 0;  ///< the credit word as last read: the peer took round credit_
};

}  // namespace gv::rma

#include "detail/ll.hpp"
