// The software HCA's GPU engine: soft::Hca<GpuEnv> run by a persistent kernel.
//
// One block of `warps` warps. In each warp, lane 0 walks its share of the QP table and runs
// the WQE semantics (parsing, checks, atomics, CQEs); lanes 1..31 wait in a helper loop and
// join lane 0 for every data movement, so payloads move 32 lanes wide. Lane 0 hands a move to
// its helpers through a job in shared memory and two __syncwarp()s, which Volta and later
// allow at different program points.
#include "gpu_engine.hpp"

namespace gv::detail {
namespace {

using soft::Arena;
using soft::ArenaHeader;
using soft::QpCtx;

/// Bytes lane 0 moves alone: below this, waking the helpers costs more than it saves.
constexpr std::uint64_t kSoloBytes = 128;

/// One warp's data-mover job: written by lane 0, executed by all 32 lanes.
struct MoveJob {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t n;
  std::uint32_t stop;
};

/// Lane `lane`'s share of a move in words of type V (n a multiple of sizeof(V), both
/// pointers aligned to it), four words in flight per lane.
template <class V>
__device__ void move_words(std::byte* dst, const std::byte* src, std::uint64_t n, unsigned lane) {
  auto* d = reinterpret_cast<V*>(dst);
  const auto* s = reinterpret_cast<const V*>(src);
  const std::uint64_t words = n / sizeof(V);
  std::uint64_t i = lane;
  for (; i + 96 < words; i += 128) {
    const V a = s[i], b = s[i + 32], c = s[i + 64], e = s[i + 96];
    d[i] = a;
    d[i + 32] = b;
    d[i + 64] = c;
    d[i + 96] = e;
  }
  for (; i < words; i += 32) d[i] = s[i];
}

__device__ void move_part(const MoveJob& j, unsigned lane) {
  const auto align = reinterpret_cast<std::uintptr_t>(j.dst) | reinterpret_cast<std::uintptr_t>(j.src);
  std::uint64_t done = 0;
  if ((align & 15) == 0) {
    done = j.n & ~std::uint64_t{15};
    move_words<uint4>(j.dst, j.src, done, lane);
  } else if ((align & 7) == 0) {
    done = j.n & ~std::uint64_t{7};
    move_words<std::uint64_t>(j.dst, j.src, done, lane);
  } else if ((align & 3) == 0) {
    done = j.n & ~std::uint64_t{3};
    move_words<std::uint32_t>(j.dst, j.src, done, lane);
  }
  for (std::uint64_t i = done + lane; i < j.n; i += 32) j.dst[i] = j.src[i];
}

/// The GPU engine's environment for soft::Hca (see the Env contract in soft/hca.hpp).
class GpuEnv {
 public:
  __device__ GpuEnv(Arena own, std::int32_t pid, MoveJob* job)
      : own_(own), own_end_(own.base + own.hdr()->size), pid_(pid), job_(job) {}

  __device__ const Arena& own() const { return own_; }
  __device__ std::int32_t self_pid() const { return pid_; }
  __device__ std::uint64_t now_ns() const { return sync::now_ns(); }

  /// Our own arena is watched only by threads of this GPU; anything else (a peer GPU's
  /// arena or buffers, mapped host memory) by the system.
  __device__ sync::Scope scope(const Arena& a) const {
    return a.base == own_.base ? sync::Scope::kGpu : sync::Scope::kSystem;
  }

  /// The host resolved the peer's arena to an address of this process at RTR (peer_base).
  __device__ const Arena* peer(const QpCtx& q) {
    if (q.peer_base == 0) return nullptr;
    if (q.peer_base == reinterpret_cast<std::uintptr_t>(own_.base)) return &own_;
    peer_.base = reinterpret_cast<std::byte*>(q.peer_base);
    return &peer_;
  }

  __device__ std::uint64_t fetch_add(std::uint64_t* t, std::uint64_t v) { return sync::fetch_add(t, v); }
  __device__ std::uint64_t compare_swap(std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) {
    sync::compare_exchange(t, expected, desired);  // expected <- the value found
    return expected;
  }
  /// Loads and stores cannot fail softly: a bad address traps the engine (the watchdog says so).
  __device__ std::uint8_t take_fault() { return 0; }

  /// Move n bytes, 32 lanes wide beyond kSoloBytes. With `publish`, the last byte is stored
  /// last with release at the destination's scope.
  __device__ void copy(void* d, const void* s, std::uint64_t n, bool publish) {
    auto* dst = static_cast<std::byte*>(d);
    const auto* src = static_cast<const std::byte*>(s);
    const std::uint64_t body = publish ? n - 1 : n;
    if (body > kSoloBytes) {
      job_->dst = dst;
      job_->src = src;
      job_->n = body;
      __syncwarp();  // the helpers take the job
      move_part(*job_, 0);
      __syncwarp();  // every lane's share is stored (and ordered before what follows)
    } else {
      for (std::uint64_t i = 0; i < body; ++i) dst[i] = src[i];
    }
    if (publish) {
      const auto last = *reinterpret_cast<const std::uint8_t*>(src + n - 1);
      const bool local = dst >= own_.base && dst < own_end_;
      sync::store_release(reinterpret_cast<std::uint8_t*>(dst + n - 1), last,
                          local ? sync::Scope::kGpu : sync::Scope::kSystem);
    }
  }

 private:
  Arena own_;
  Arena peer_;
  const std::byte* own_end_;
  std::int32_t pid_;
  MoveJob* job_;
};

/// Epochs are published every kEpochSweeps sweeps (and once at start).
constexpr std::uint64_t kEpochSweeps = 16;

__global__ void __launch_bounds__(32 * soft::kMaxEngineWarps)
    engine_kernel(Arena arena, std::int32_t pid, std::uint32_t warps) {
  __shared__ MoveJob jobs[soft::kMaxEngineWarps];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  MoveJob* job = &jobs[warp];
  if (lane == 0) job->stop = 0;
  __syncwarp();
  if (lane != 0) {
    for (;;) {
      __syncwarp();  // a job (or stop) from lane 0
      if (job->stop) return;
      move_part(*job, lane);
      __syncwarp();
    }
  }
  GpuEnv env(arena, pid, job);
  ArenaHeader* h = arena.hdr();
  std::uint64_t sweeps = 0;
  sync::store_release(&h->epoch[warp], std::uint64_t{1});  // the heartbeat the host waits for
  while (sync::load_host_flag(&h->engine_stop) == 0) {
    const std::uint32_t n = sync::load_host_flag(&h->qp_high);
    for (std::uint32_t slot = warp; slot < n; slot += warps) {
      QpCtx& q = arena.qps()[slot];
      if (sync::load_polled(&q.qpn) != 0) soft::Hca<GpuEnv>::step(env, q);
    }
    if (++sweeps % kEpochSweeps == 0) sync::store_release(&h->epoch[warp], sweeps + 1);
  }
  job->stop = 1;
  __syncwarp();  // release the helpers
}

}  // namespace

cudaError_t launch_gpu_engine(cudaStream_t stream, soft::Arena arena, std::int32_t pid,
                              std::uint32_t warps) {
  engine_kernel<<<1, 32 * warps, 0, stream>>>(arena, pid, warps);
  return cudaGetLastError();
}

}  // namespace gv::detail
