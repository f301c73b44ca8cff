// nvshmem.h — the NVSHMEM-compatible face of gpuverbs.
//
// Existing NVSHMEM programs compile against this header unchanged (CMake: link
// gpuverbs::nvshmem instead of NVSHMEM) and run on gpuverbs' World and rma layer, with no
// NVSHMEM installed. One PE per process, launched as NVSHMEM programs are: mpirun (when gpuverbs
// is built with MPI), or gvrun / GV_RANK, GV_SIZE, GV_ROOT; a single process is one PE.
//
// Covered (host and device as in NVSHMEM 3): init/finalize, my_pe, n_pes, team_my_pe and
// team_n_pes of NVSHMEM_TEAM_WORLD and NVSHMEMX_TEAM_NODE, malloc/calloc/align/free, ptr;
// typed and mem put/get/p/g with _nbi and nvshmemx _warp/_block variants; putmem_signal(_nbi)
// (also _warp/_block) and typed put_signal; signal_op, signal_fetch, signal_wait_until; typed
// wait_until and test; fence, quiet; barrier_all and sync_all (device, host, _on_stream);
// atomics fetch_add/add/compare_swap/swap/fetch/inc/fetch_inc/set; nvshmemx_collective_launch.
// What is not covered fails to compile, naming the function (see the end of this file).
//
// Differences a program may notice: the symmetric heap is NVSHMEM_SYMMETRIC_SIZE (default
// 1 GiB) per PE, allocated at nvshmem_init on GPU `local PE % visible GPUs` (the device NVSHMEM
// programs select with cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE))); a device call
// given bad input (PE out of range, an address outside the heap) prints the reason and traps
// instead of corrupting memory; every device wait is bounded (GV_WAIT_TIMEOUT seconds, default
// 60) and traps with a message when it runs out or a PE died.
#ifndef GPUVERBS_NVSHMEM_H
#define GPUVERBS_NVSHMEM_H

#ifndef __cplusplus
#error "gpuverbs' nvshmem.h is C++ (CUDA C++): compile this file with nvcc or a C++20 compiler"
#endif

#include <cstddef>
#include <cstdint>

#include <gpuverbs/rma.hpp>

#include <cuda_runtime.h>

#if defined(__CUDACC__)
#define GV_NVSHMEM_HD __host__ __device__
#else
#define GV_NVSHMEM_HD
#endif

// ---- Constants and types -------------------------------------------------------------------

#define NVSHMEM_MAJOR_VERSION 3
#define NVSHMEM_MINOR_VERSION 4
#define NVSHMEM_VENDOR_STRING "gpuverbs NVSHMEM face"

enum nvshmem_cmp_type { NVSHMEM_CMP_EQ = 0, NVSHMEM_CMP_NE, NVSHMEM_CMP_GT, NVSHMEM_CMP_LE, NVSHMEM_CMP_LT, NVSHMEM_CMP_GE };
enum nvshmem_signal_ops { NVSHMEM_SIGNAL_SET = 9, NVSHMEM_SIGNAL_ADD = 10 };

typedef std::int32_t nvshmem_team_t;
#define NVSHMEM_TEAM_INVALID (-1)
#define NVSHMEM_TEAM_WORLD 0
#define NVSHMEMX_TEAM_NODE 2
#define NVSHMEM_TEAM_WORLD_INDEX 0
#define NVSHMEMX_TEAM_NODE_INDEX 2

#define NVSHMEMX_SUCCESS 0

namespace gv::nvshmem::detail {

GV_HD inline constexpr gv::rma::Cmp cmp_of(int c) {
  switch (c) {
    case NVSHMEM_CMP_EQ: return gv::rma::Cmp::kEq;
    case NVSHMEM_CMP_NE: return gv::rma::Cmp::kNe;
    case NVSHMEM_CMP_GT: return gv::rma::Cmp::kGt;
    case NVSHMEM_CMP_LE: return gv::rma::Cmp::kLe;
    case NVSHMEM_CMP_LT: return gv::rma::Cmp::kLt;
    default: return gv::rma::Cmp::kGe;
  }
}
GV_HD inline gv::rma::SignalOp signal_op_of(int op) {
  return op == NVSHMEM_SIGNAL_ADD ? gv::rma::SignalOp::kAdd : gv::rma::SignalOp::kSet;
}

// Host side (libgpuverbs_nvshmem).
struct HostState {
  int pe = -1, n_pes = 0, node_pe = -1, node_n_pes = 0;
};
const HostState& host_state();
void* host_ptr(const void* dest, int pe);
/// Every translation unit that includes this header hands the library a function that
/// copies the endpoint into its own __constant__ copy (whole-program and -rdc builds alike).
using SetEndpoint = cudaError_t (*)(const gv::rma::Endpoint&);
bool register_endpoint_copy(SetEndpoint set);
void host_quiet();
void host_barrier_all();
void host_sync_all();

}  // namespace gv::nvshmem::detail

// ---- Per translation unit: the endpoint device code uses -----------------------------------

#if defined(__CUDACC__)
static __constant__ gv::rma::Endpoint gv_nvshmem_ep;

namespace {
cudaError_t gv_nvshmem_set_endpoint(const gv::rma::Endpoint& ep) {
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMemcpyToSymbolAsync(gv_nvshmem_ep, &ep, sizeof(ep), 0, cudaMemcpyHostToDevice, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  return e;
}
[[maybe_unused]] const bool gv_nvshmem_registered = gv::nvshmem::detail::register_endpoint_copy(&gv_nvshmem_set_endpoint);
}  // namespace

namespace gv::nvshmem::detail {
/// A device call that cannot be done: say why, and stop the kernel (NVSHMEM's calls return
/// nothing, so the program could not learn of it otherwise). It never returns, and says so: a
/// call the compiler expects back is set up on the common path (a return address, a
/// reconvergence barrier around it); as a branch to a trap it is not. gv_shmem_perf on one H200,
/// alternating binaries, two calls of four processes each: the face's `p` 0.40-0.41 -> 0.39 us,
/// fetch_add 0.28-0.29 -> 0.26-0.27 (medians of t_typical;
/// bench/results/archive/2026-11-27-h200-face-ab-noreturn.txt).
[[noreturn]] __device__ __noinline__ inline void device_fail(const char* what, gv::Status s) {
  printf("gpuverbs nvshmem: %s failed on PE %u: %s%s\n", what, gv_nvshmem_ep.rank, gv::to_string(s),
         s == gv::Status::kInvalidArgument
             ? " (a PE out of range, a remote address outside the symmetric heap, or, over ib, a local buffer "
               "outside it: the queues reach only registered memory, as NVSHMEM's remote transports need "
               "nvshmemx_buffer_register for such buffers; allocate it with nvshmem_malloc, or use "
               "GV_TRANSPORT=p2p)"
             : "");
  __trap();
}
__device__ __forceinline__ void check(gv::Status s, const char* what) {
  if (s != gv::Status::kOk) device_fail(what, s);
}
__device__ __forceinline__ const gv::rma::Endpoint& ep() { return gv_nvshmem_ep; }
}  // namespace gv::nvshmem::detail
#endif

// ---- Setup and PE queries (host; my_pe, n_pes, ptr also on the device) ----------------------

extern "C" {
void nvshmem_init(void);
void nvshmem_finalize(void);
void* nvshmem_malloc(std::size_t size);
void* nvshmem_calloc(std::size_t count, std::size_t size);
void* nvshmem_align(std::size_t alignment, std::size_t size);
void nvshmem_free(void* ptr);
void nvshmemx_barrier_all_on_stream(cudaStream_t stream);
void nvshmemx_sync_all_on_stream(cudaStream_t stream);
void nvshmemx_quiet_on_stream(cudaStream_t stream);
int nvshmemx_collective_launch(const void* func, dim3 grid, dim3 block, void** args, std::size_t shmem, cudaStream_t stream);
int nvshmem_team_my_pe(nvshmem_team_t team);
int nvshmem_team_n_pes(nvshmem_team_t team);
void nvshmem_info_get_version(int* major, int* minor);
}

GV_NVSHMEM_HD inline int nvshmem_my_pe(void) {
#if defined(__CUDA_ARCH__)
  return static_cast<int>(gv_nvshmem_ep.rank);
#else
  return gv::nvshmem::detail::host_state().pe;
#endif
}
GV_NVSHMEM_HD inline int nvshmem_n_pes(void) {
#if defined(__CUDA_ARCH__)
  return static_cast<int>(gv_nvshmem_ep.size);
#else
  return gv::nvshmem::detail::host_state().n_pes;
#endif
}
GV_NVSHMEM_HD inline void* nvshmem_ptr(const void* dest, int pe) {
#if defined(__CUDA_ARCH__)
  return gv::rma::ptr(gv_nvshmem_ep, dest, pe);
#else
  return gv::nvshmem::detail::host_ptr(dest, pe);
#endif
}

#if defined(__CUDACC__)
#include "gpuverbs_nvshmem_device.h"
#endif

// ---- Host and device: quiet, fence, barrier_all, sync_all ----------------------------------

GV_NVSHMEM_HD inline void nvshmem_quiet(void) {
#if defined(__CUDA_ARCH__)
  gv::nvshmem::detail::quiet<gv::rma::Thread>("nvshmem_quiet");
#else
  gv::nvshmem::detail::host_quiet();
#endif
}
/// Device: orders this thread's puts to each PE. Host: completes them (a stronger order).
GV_NVSHMEM_HD inline void nvshmem_fence(void) {
#if defined(__CUDA_ARCH__)
  (void)gv::rma::fence(gv_nvshmem_ep);
#else
  gv::nvshmem::detail::host_quiet();
#endif
}
GV_NVSHMEM_HD inline void nvshmem_barrier_all(void) {
#if defined(__CUDA_ARCH__)
  gv::nvshmem::detail::barrier<gv::rma::Thread>("nvshmem_barrier_all");
#else
  gv::nvshmem::detail::host_barrier_all();
#endif
}
GV_NVSHMEM_HD inline void nvshmem_sync_all(void) {
#if defined(__CUDA_ARCH__)
  gv::nvshmem::detail::barrier<gv::rma::Thread>("nvshmem_sync_all");
#else
  gv::nvshmem::detail::host_sync_all();
#endif
}
#include "gpuverbs_nvshmem_unsupported.h"

#endif  // GPUVERBS_NVSHMEM_H
