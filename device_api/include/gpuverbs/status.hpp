// Status values every device-side call returns, and the bound every device-side wait takes.
#pragma once
#include <cstdint>

#include "config.hpp"

namespace gv {

enum class [[nodiscard]] Status : std::uint32_t {
  kOk = 0,
  kEmpty,            ///< poll found nothing (not an error)
  kTimeout,          ///< a bounded wait ran out of budget
  kAborted,          ///< the host raised the abort flag
  kQueueFull,        ///< no room in the send/receive ring within the budget
  kCompletionError,  ///< an error CQE: see Completion::syndrome
  kCqOverrun,        ///< the CQ overflowed; the provider raised an asynchronous error
  kInvalidArgument,  ///< a request the QP cannot carry (too long inline, too many SGEs, ...)
  kInvalidPe,        ///< rma: a PE (rank) outside the World, or one this rank cannot reach
  kOutOfBounds,      ///< rma: an address range outside the symmetric heap (or overflowing)
  kBarrierBroken,    ///< rma: an earlier barrier failed (timeout, abort, error); barriers refuse since
  kQueueBroken,      ///< a shared work queue holds an abandoned reservation ahead of this one (ib/post.hpp)
};

GV_HD inline constexpr const char* to_string(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kEmpty: return "empty";
    case Status::kTimeout: return "timeout";
    case Status::kAborted: return "aborted";
    case Status::kQueueFull: return "queue full";
    case Status::kCompletionError: return "completion error";
    case Status::kCqOverrun: return "CQ overrun";
    case Status::kInvalidArgument: return "invalid argument";
    case Status::kInvalidPe: return "PE out of range or unreachable";
    case Status::kOutOfBounds: return "address outside the symmetric heap";
    case Status::kBarrierBroken: return "barrier broken by an earlier failed barrier";
    case Status::kQueueBroken: return "work queue broken by an earlier abandoned reservation";
  }
  return "unknown status";
}

/// How long a device-side wait may spin before it gives up with kTimeout. Measured in
/// nanoseconds of the caller's clock (%globaltimer on the GPU, CLOCK_MONOTONIC on the host);
/// the abort flag of the handle is checked on every clock read.
struct Budget {
  std::uint64_t ns = 2'000'000'000ull;  ///< default 2 s: far above any healthy latency
};

}  // namespace gv
