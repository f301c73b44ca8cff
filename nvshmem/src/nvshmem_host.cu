// The host half of gpuverbs' NVSHMEM face: nvshmem_init and friends over a World, and the
// stream-ordered barrier/quiet kernels.
#include <nvshmem.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gpuverbs/host/world.hpp>

#include "cuda_util.hpp"  // host_setup's CUDA check (private to the library and this face)

namespace gv::nvshmem::detail {
namespace {

struct Face {
  std::unique_ptr<World> world;
  HostState state;
  std::vector<SetEndpoint> copies;  ///< one per translation unit that includes nvshmem.h
  std::mutex mu;
  /// A PE that exits without nvshmem_finalize (OpenSHMEM 1.5 requires the call; an error path's
  /// exit() skips it) leaves the job at once: its World's last collective would otherwise wait
  /// out the bootstrap's limit (60 s) for peers waiting elsewhere, in a barrier for this PE.
  ~Face() {
    if (world) world->abort();
  }
};
/// Constructed on first use: translation units register during static initialisation.
Face& face() {
  static Face f;
  return f;
}

World& world(const char* call) {
  Face& f = face();
  if (!f.world) throw Error(std::string(call) + ": nvshmem_init has not been called (or nvshmem_finalize was)");
  return *f.world;
}

void publish(Face& f, SetEndpoint set) {
  gv::detail::DeviceGuard g(f.world->gpu());
  gv::detail::cuda_check(set(f.world->endpoint()), "nvshmem_init: copying the endpoint into a module's constant memory");
}

enum class Op : int { kBarrier, kQuiet };

__global__ void stream_op(const __grid_constant__ gv::rma::Endpoint ep, Op op) {
  const gv::Status s = op == Op::kBarrier ? gv::rma::barrier<gv::rma::Warp>(ep) : gv::rma::quiet<gv::rma::Warp>(ep);
  if (s != gv::Status::kOk && threadIdx.x == 0) {
    printf("gpuverbs nvshmem: %s on stream failed on PE %u: %s\n", op == Op::kBarrier ? "barrier_all" : "quiet", ep.rank,
           gv::to_string(s));
    __trap();
  }
}

void on_stream(Op op, cudaStream_t s, const char* call) {
  World& w = world(call);
  gv::detail::DeviceGuard g(w.gpu());
  stream_op<<<1, 32, 0, s>>>(w.endpoint(), op);
  gv::detail::cuda_check(cudaGetLastError(), call);
}

}  // namespace

bool register_endpoint_copy(SetEndpoint set) {
  Face& f = face();
  std::lock_guard lk(f.mu);
  f.copies.push_back(set);
  if (f.world) publish(f, set);  // a module loaded after nvshmem_init
  return true;
}

const HostState& host_state() { return face().state; }

void* host_ptr(const void* dest, int pe) { return world("nvshmem_ptr").ptr(dest, pe); }

void host_quiet() {
  // Host-initiated operations are not provided, so there is none to complete; device-initiated
  // ones complete by their kernel's quiet or at its end.
  (void)world("nvshmem_quiet");
}

void host_barrier_all() {
  on_stream(Op::kBarrier, cudaStreamLegacy, "nvshmem_barrier_all");
  gv::detail::cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "nvshmem_barrier_all");
}

void host_sync_all() { host_barrier_all(); }

}  // namespace gv::nvshmem::detail

using namespace gv::nvshmem::detail;

extern "C" {

void nvshmem_init(void) {
  Face& f = face();
  std::lock_guard lk(f.mu);
  if (f.world) return;
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kGpu;
  o.heap_bytes = std::size_t{1} << 30;  // NVSHMEM's default; NVSHMEM_SYMMETRIC_SIZE overrides
  // Over ib, the CPU engine: NVSHMEM programs call cudaDeviceSynchronize(), which would wait
  // forever for the GPU engine's resident kernel. (GV_IB_ENGINE=gpu chooses it anyway, for
  // programs that synchronise streams only.)
  o.ib_engine = gv::WorldOptions::Engine::kCpu;
  f.world = gv::World::init(o);
  f.state = HostState{f.world->rank(), f.world->size(), f.world->local_rank(), f.world->local_size()};
  gv::detail::cuda_check(cudaSetDevice(f.world->gpu()), "nvshmem_init: cudaSetDevice");
  for (const SetEndpoint set : f.copies) publish(f, set);
}

void nvshmem_finalize(void) {
  Face& f = face();
  std::lock_guard lk(f.mu);
  if (!f.world) return;
  gv::detail::cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "nvshmem_finalize");
  f.world->barrier();
  f.world.reset();
  f.state = HostState{};
}

void* nvshmem_align(std::size_t alignment, std::size_t size) {
  gv::World& w = world("nvshmem_malloc");
  // Collective: every PE asks for the same size, or the heaps would stop being symmetric.
  const std::uint64_t mine[2] = {size, alignment};
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(w.size()));
  w.allgather(mine, all.data(), sizeof(mine));
  for (int pe = 0; pe < w.size(); ++pe)
    if (all[2 * static_cast<std::size_t>(pe)] != size || all[2 * static_cast<std::size_t>(pe) + 1] != alignment)
      throw gv::Error("nvshmem_malloc: PE " + std::to_string(w.rank()) + " asked for " + std::to_string(size) +
                      " bytes, PE " + std::to_string(pe) + " for " + std::to_string(all[2 * static_cast<std::size_t>(pe)]) +
                      ": symmetric allocations must be the same on every PE");
  void* p = nullptr;
  try {
    gv::detail::DeviceGuard g(w.gpu());
    p = w.alloc(size, alignment < 256 ? 256 : alignment);
  } catch (const gv::Error& e) {
    std::fprintf(stderr, "gpuverbs nvshmem: %s\n", e.what());
    p = nullptr;
  }
  w.barrier();
  return p;
}

void* nvshmem_malloc(std::size_t size) { return nvshmem_align(256, size); }

void* nvshmem_calloc(std::size_t count, std::size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    std::fprintf(stderr, "gpuverbs nvshmem: nvshmem_calloc(%zu, %zu) overflows\n", count, size);
    return nullptr;
  }
  return nvshmem_align(256, count * size);  // World blocks are cleared
}

void nvshmem_free(void* ptr) {
  gv::World& w = world("nvshmem_free");
  w.barrier();  // no PE still writes into the block
  w.free(ptr);
}

void nvshmemx_barrier_all_on_stream(cudaStream_t stream) { on_stream(Op::kBarrier, stream, "nvshmemx_barrier_all_on_stream"); }
void nvshmemx_sync_all_on_stream(cudaStream_t stream) { on_stream(Op::kBarrier, stream, "nvshmemx_sync_all_on_stream"); }
void nvshmemx_quiet_on_stream(cudaStream_t stream) { on_stream(Op::kQuiet, stream, "nvshmemx_quiet_on_stream"); }

int nvshmemx_collective_launch(const void* func, dim3 grid, dim3 block, void** args, std::size_t shmem, cudaStream_t stream) {
  gv::World& w = world("nvshmemx_collective_launch");
  gv::detail::DeviceGuard g(w.gpu());
  const cudaError_t e = cudaLaunchCooperativeKernel(func, grid, block, args, shmem, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    std::fprintf(stderr, "gpuverbs nvshmem: nvshmemx_collective_launch: %s (a grid must fit on the GPU at once)\n",
                 gv::detail::cuda_error_text(e).c_str());
    return 1;
  }
  return NVSHMEMX_SUCCESS;
}

int nvshmem_team_my_pe(nvshmem_team_t team) {
  const HostState& s = host_state();
  return team == NVSHMEM_TEAM_WORLD ? s.pe : team == NVSHMEMX_TEAM_NODE ? s.node_pe : -1;
}
int nvshmem_team_n_pes(nvshmem_team_t team) {
  const HostState& s = host_state();
  return team == NVSHMEM_TEAM_WORLD ? s.n_pes : team == NVSHMEMX_TEAM_NODE ? s.node_n_pes : -1;
}

void nvshmem_info_get_version(int* major, int* minor) {
  *major = NVSHMEM_MAJOR_VERSION;
  *minor = NVSHMEM_MINOR_VERSION;
}

}  // extern "C"
