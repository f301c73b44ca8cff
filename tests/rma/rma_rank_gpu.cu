// One GPU rank of the multi-process rma tests: `rma_rank_gpu [p2p|ib]`, started by gvrun or
// mpirun. Ranks of one host share its GPUs (rank % GPUs); p2p peers in other processes are
// mapped through CUDA IPC. A kernel sends round-stamped blocks around the ring with
// put_signal, checks each on arrival, counts with fetch_add at rank 0, and meets at barriers;
// the host checks the counts. Prints "rank R ok" and exits 0 when everything held; exits 77
// (skip) without a GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <gpuverbs/host/world.hpp>

#include "cuda_check_exit.hpp"
#include "rma_kernels.cuh"

namespace {

int run(gv::rma::Transport t) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("rank ? skipped: no NVIDIA GPU or driver found\n");
    return 77;  // ctest's skip code for this test
  }
  const char* lr = std::getenv("GV_RANK");
  const char* ompi = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int local = lr ? std::atoi(lr) : (ompi ? std::atoi(ompi) : 0);
  CUDA_CHECK(cudaSetDevice(local % gpus));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));  // before the World (see World)
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kGpu;
  o.transport = t;
  o.heap_bytes = std::size_t{16} << 20;
  o.budget = gv::Budget{20'000'000'000ull};
  auto w = gv::World::init(o);
  const int me = w->rank(), n = w->size();
  constexpr unsigned kBlocks = 4;
  constexpr std::size_t kBytes = 4096;
  constexpr int kRounds = 20;
  auto* buf = static_cast<std::byte*>(w->alloc(kBlocks * kBytes));
  auto* src = static_cast<std::byte*>(w->alloc(kBlocks * kBytes));
  auto* sig = static_cast<std::uint64_t*>(w->alloc(kBlocks * 8));
  auto* ack = static_cast<std::uint64_t*>(w->alloc(kBlocks * 8));
  auto* st = static_cast<std::uint32_t*>(w->alloc(64));
  auto* errors = static_cast<std::uint32_t*>(w->alloc(64));
  w->barrier();
  gvt::put_signal_rounds<gv::rma::Block><<<kBlocks, 128, 0, s>>>(w->endpoint(), buf, src, kBytes, sig, ack, kRounds, st, errors);
  gvt::finish<<<1, 128, 0, s>>>(w->endpoint(), st + 1);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::uint32_t h[2] = {}, e = 0;
  CUDA_CHECK(cudaMemcpyAsync(h, st, 8, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaMemcpyAsync(&e, errors, 4, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  w->barrier();
  if (h[0] != 0 || h[1] != 0 || e != 0) {
    std::printf("rank %d FAILED: status %s / %s, %u wrong bytes\n", me, gv::to_string(static_cast<gv::Status>(h[0])),
                gv::to_string(static_cast<gv::Status>(h[1])), e);
    return 1;
  }
  std::printf("rank %d ok (%s, %d ranks, bootstrap %s, GPU %d)\n", me, gv::rma::to_string(w->transport_to((me + 1) % n)),
              n, w->bootstrap_name().c_str(), w->gpu());
  w.reset();
  CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool ib = argc > 1 && std::strcmp(argv[1], "ib") == 0;
  try {
    return run(ib ? gv::rma::Transport::kIb : gv::rma::Transport::kP2p);
  } catch (const std::exception& e) {
    std::printf("rank ? FAILED: %s\n", e.what());
    return 1;
  }
}
