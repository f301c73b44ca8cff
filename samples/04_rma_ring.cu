// Sample 04 — a ring exchange over N ranks, one per process, launched by gvrun or mpirun.
//
// Teaches: World::init() (the rank comes from the launcher: mpirun when gpuverbs is built with
// MPI, else gvrun's GV_RANK/GV_SIZE/GV_ROOT), and that rma calls are __host__ __device__: the
// same ring step runs in a kernel on a GPU rank and on the host thread of a host rank (a
// machine without a GPU), over whatever transport reaches each neighbour.
// When to use: the skeleton of any neighbour exchange (halos, pipelines) across processes.
// Cost: one put_signal and one wait per step; see build/bench/gv_rma for the figures.
//
//   build/host_setup/gvrun -n 4 build/samples/04_rma_ring
//   mpirun -n 4 build/samples/04_rma_ring      (gpuverbs built with MPI)
#include <cstdio>

#include <gpuverbs/host/world.hpp>
#include <gpuverbs/rma.hpp>
#if defined(__CUDACC__)
#include "cuda_check.hpp"
#endif

namespace rma = gv::rma;

/// Every rank passes its token to the next one, `steps` times around the ring, adding its rank.
/// Step k lands in slot k of the next rank's `tokens`, so a neighbour one step ahead never
/// overwrites a value not yet read. Returns the status; *result gets the last value.
GV_HD gv::Status ring(const rma::Endpoint& ep, long* tokens, std::uint64_t* arrived, long* out, int steps, long* result) {
  const int me = static_cast<int>(ep.rank), n = static_cast<int>(ep.size);
  long value = me;
  for (int k = 1; k <= steps; ++k) {
    out[k] = value;  // the source stays untouched until the put has read it (put_signal returns then)
    gv::Status s = rma::put_signal(ep, tokens + k, out + k, sizeof(long), arrived, 1, rma::SignalOp::kAdd, (me + 1) % n);
    if (s == gv::Status::kOk) s = rma::wait_until(ep, arrived, rma::Cmp::kGe, static_cast<std::uint64_t>(k));
    if (s != gv::Status::kOk) return s;
    value = tokens[k] + me;  // what the previous rank sent, plus this rank
  }
  *result = value;
  return gv::Status::kOk;
}

#if defined(__CUDACC__)
__global__ void ring_kernel(__grid_constant__ const rma::Endpoint ep, long* tokens, std::uint64_t* arrived, long* out,
                            int steps, long* result, gv::Status* status) {
  *status = ring(ep, tokens, arrived, out, steps, result);
}
#endif

int main() try {
  auto world = gv::World::init();  // GPU ranks where there is a GPU, host ranks otherwise
  const int me = world->rank(), n = world->size();
  const int steps = n;
  auto* tokens = static_cast<long*>(world->alloc((steps + 1) * sizeof(long)));
  auto* arrived = static_cast<std::uint64_t*>(world->alloc(sizeof(std::uint64_t)));
  auto* out = static_cast<long*>(world->alloc((steps + 1) * sizeof(long)));  // heap: every transport can send it
  auto* result = static_cast<long*>(world->alloc(sizeof(long)));
  world->barrier();
  gv::Status st = gv::Status::kOk;
  long got = 0;
  if (world->on_gpu()) {
#if defined(__CUDACC__)
    auto* status = static_cast<gv::Status*>(world->alloc(sizeof(gv::Status)));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ring_kernel<<<1, 1, 0, s>>>(world->endpoint(), tokens, arrived, out, steps, result, status);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(&st, status, sizeof(st), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaMemcpyAsync(&got, result, sizeof(got), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamDestroy(s));
#endif
  } else {
    st = ring(world->endpoint(), tokens, arrived, out, steps, &got);
  }
  world->barrier();
  // After n steps every rank's token went once around: it holds the sum of all ranks plus me.
  const long want = static_cast<long>(n) * (n - 1) / 2 + me;
  const bool ok = st == gv::Status::kOk && got == want;
  std::printf("04: rank %d of %d (%s, %s to rank %d): token %ld after %d steps: %s\n", me, n,
              world->on_gpu() ? "GPU" : "host", rma::to_string(world->transport_to((me + 1) % n)), (me + 1) % n, got,
              steps, ok ? "ok" : st != gv::Status::kOk ? gv::to_string(st) : "WRONG");
  return ok ? 0 : 1;
} catch (const gv::Error& e) {
  std::fprintf(stderr, "04: %s\n", e.what());
  return 1;
}
