#include "hostctl.hpp"

namespace gv::bench {

__global__ void produce_kernel(std::uint8_t* p, std::uint8_t v) { *p = v; }

__global__ void consume_kernel(const std::uint8_t* p, std::uint8_t v, std::uint32_t* consumed) {
  if (*p == v) ++*consumed;
}

HostCtlTx::HostCtlTx(const Endpoint& ep, const WrPlan& plan, cudaStream_t stream, std::uint32_t* consumed)
    : tx_(ep, without_inline(plan)), stream_(stream), consumed_(consumed) {}

WrPlan HostCtlTx::without_inline(WrPlan p) {
  p.flags &= ~gv::ib::kWrInline;
  return p;
}

/// A launch's failure reads as a failed step (kAborted: the run cannot go on); the runner's
/// checks afterwards say which message is missing.
Status HostCtlTx::launched() { return cudaGetLastError() == cudaSuccess ? Status::kOk : Status::kAborted; }

Status HostCtlTx::produce(std::uint8_t* p, std::uint8_t v) {
  produce_kernel<<<1, 1, 0, stream_>>>(p, v);
  if (launched() != Status::kOk) return Status::kAborted;
  return cudaStreamSynchronize(stream_) == cudaSuccess ? Status::kOk : Status::kAborted;
}

Status HostCtlTx::consume(const std::uint8_t* p, std::uint8_t v) {
  consume_kernel<<<1, 1, 0, stream_>>>(p, v, consumed_);
  return launched();
}

}  // namespace gv::bench
