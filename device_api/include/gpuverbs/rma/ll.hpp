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
// data words, twice the data's bytes; wait_ll polls the words and stores the credit back to the
// sender. Over ib the data travels as a put_signal (one WRITE, then the header word) with the
// same semantics.
//
// LL128 (120 data bytes and one flag per 128-byte line) is not offered: it relies on a warp's
// 128-byte store reaching the peer as one, which no test here has shown on this hardware.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../status.hpp"
#include "endpoint.hpp"
#include "group.hpp"

namespace gv::rma {

/// Bytes before the data words: the credit and sent words of this rank's outgoing rounds, and
/// the header word (sender and seq) of the incoming one.
inline constexpr std::size_t kLlHeaderBytes = 24;
/// Largest LL message (the buffer holds twice the data).
inline constexpr std::size_t kLlMaxBytes = std::size_t{1} << 30;

/// Size of an LL buffer that carries messages of up to n bytes.
GV_HD inline constexpr std::size_t ll_bytes(std::size_t n) { return kLlHeaderBytes + 8 * ((n + 3) / 4); }

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

}  // namespace gv::rma

#include "detail/ll.hpp"
