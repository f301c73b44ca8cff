// host-controlled: the dissertation's baseline, per message. Buffers live in GPU memory; a kernel
// produces the message (its tag), the host waits for it (stream synchronisation) and posts the
// WRITE_WITH_IMM through the device API on the host (the CPU engine executes it, moving the GPU
// bytes with CUDA copies); the peer host sees the receive completion and launches the kernel
// that consumes the message (it checks the tag and counts the message). What a user without
// GPU-initiated communication runs.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../common/experiments.hpp"

namespace gv::bench {

/// The producer: message k's tag into the outgoing buffer.
__global__ void produce_kernel(std::uint8_t* p, std::uint8_t v);
/// The consumer: counts the incoming message in *consumed when its tag is the expected one.
__global__ void consume_kernel(const std::uint8_t* p, std::uint8_t v, std::uint32_t* consumed);

/// A host thread's transport for one endpoint whose buffers are GPU memory: DirectTx for the
/// verbs (without inline data: the host cannot read the payload), kernels on `stream` (the
/// endpoint's GPU) for the application's side of every message.
class HostCtlTx {
 public:
  HostCtlTx(const Endpoint& ep, const WrPlan& plan, cudaStream_t stream, std::uint32_t* consumed);

  Status start() { return tx_.start(); }
  Status post(std::uint64_t k) { return tx_.post(k); }
  std::uint64_t done() const { return tx_.done(); }
  Status wait_sent(std::uint64_t min) { return tx_.wait_sent(min); }
  Status wait_recv(std::uint64_t k) { return tx_.wait_recv(k); }
  const std::uint32_t* abort() const { return tx_.abort(); }

  /// Launch the producer and wait for it (and for a consumer launched before it): the host
  /// posts only what a kernel has finished writing.
  Status produce(std::uint8_t* p, std::uint8_t v);
  /// Launch the consumer; the next produce() waits for it.
  Status consume(const std::uint8_t* p, std::uint8_t v);

 private:
  static WrPlan without_inline(WrPlan p);
  Status launched();

  DirectTx<> tx_;
  cudaStream_t stream_;
  std::uint32_t* consumed_;
};

}  // namespace gv::bench
