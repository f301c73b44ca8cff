// Sample 02 — a kernel posts an RDMA WRITE and polls its completion, no CPU in the loop.
//
// Teaches: handing a kernel its QP and CQ handles by value, the exclusive (one owner) posting
// path, bounded polling, and the software HCA's GPU engine: a resident kernel that executes the
// WQEs (on a ConnectX NIC the HCA would; the device code is the same).
// When to use: when a kernel must drive the network itself (the dissertation's GPU-controlled
// verbs); most programs want the one-level-up rma API (samples 03 and 04).
// Cost: see bench/results (gv_gpu_verbs postpoll and pingpong) for this engine's figures.
// While the GPU engine runs, device-wide synchronisation (cudaDeviceSynchronize, cudaFree)
// would wait for it: the sample synchronises its own stream only.
//
//   build/samples/02_kernel_post_poll          (exits 77 without a GPU)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>
#include "cuda_check.hpp"

__global__ void write_and_wait(const __grid_constant__ gv::ib::QpHandle qp, const __grid_constant__ gv::ib::CqHandle cq,
                               gv::ib::Sge sge, std::uint64_t remote, std::uint32_t rkey, std::uint32_t* result) {
  gv::ib::SendWr wr;
  wr.opcode = gv::ib::WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = remote;
  wr.rkey = rkey;
  gv::Status st = gv::ib::post_send<gv::ib::Ownership::kExclusive>(qp, wr);
  gv::ib::Completion c;
  if (st == gv::Status::kOk) st = gv::ib::poll_cq<gv::ib::Ownership::kExclusive>(cq, c);
  *result = st == gv::Status::kOk && c.ok() ? 0u : 1u + static_cast<std::uint32_t>(st);
}

int main() try {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("02: skipped: no NVIDIA GPU or driver found\n");
    return 77;
  }
  cudaStream_t s;  // before the engine starts (see DeviceOptions::engine)
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  gv::DeviceOptions o;
  o.engine = gv::DeviceOptions::Engine::kGpu;
  constexpr std::uint32_t kBytes = 1 << 16;
  {
    auto dev = gv::Device::open("soft", o);
    auto pd = dev->alloc_pd();
    auto cq_a = dev->create_cq(16), cq_b = dev->create_cq(16);
    auto qp_a = pd->create_qp(*cq_a, *cq_a), qp_b = pd->create_qp(*cq_b, *cq_b);
    qp_a->connect(qp_b->info());
    qp_b->connect(qp_a->info());
    auto* buf = static_cast<std::uint8_t*>(dev->alloc(2 * kBytes + 64));  // GPU memory of the engine's device
    auto mr = pd->reg_mr(buf, 2 * kBytes + 64, gv::kLocalWrite | gv::kRemoteWrite);
    auto* result = reinterpret_cast<std::uint32_t*>(buf + 2 * kBytes);
    CUDA_CHECK(cudaMemsetAsync(buf, 0x5a, kBytes, s));        // source
    CUDA_CHECK(cudaMemsetAsync(buf + kBytes, 0, kBytes, s));  // destination, poisoned with zeros
    write_and_wait<<<1, 1, 0, s>>>(qp_a->device_handle(), cq_a->device_handle(),
                                   gv::ib::Sge{reinterpret_cast<std::uint64_t>(buf), kBytes, mr->lkey()},
                                   reinterpret_cast<std::uint64_t>(buf + kBytes), mr->rkey(), result);
    std::uint32_t r = 99;
    std::uint8_t last = 0;
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(&r, result, 4, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaMemcpyAsync(&last, buf + 2 * kBytes - 1, 1, cudaMemcpyDeviceToHost, s));
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess || r != 0 || last != 0x5a) {
      std::fprintf(stderr, "02: failed (%s, kernel result %u, last byte 0x%02x)\n", cudaGetErrorString(e), r, last);
      return 1;
    }
    std::printf("02: a kernel posted a %u-byte RDMA WRITE and polled its completion: ok\n", kBytes);
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
} catch (const gv::Error& e) {
  std::fprintf(stderr, "02: %s\n", e.what());
  return 1;
}
