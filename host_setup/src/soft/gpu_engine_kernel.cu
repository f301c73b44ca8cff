// The software HCA's GPU engine: soft::Hca<GpuEnv> run by a persistent kernel.
//
// `warps` warps in blocks of up to eight. Every lane is an engine: lane l of warp w serves the
// QP slots of table rounds l, l + 32, ... (soft::engine_slot), so up to 32 QPs of a warp
// execute their WQEs side by side, one lane each (RC order per QP and CQE order hold: a QP is
// one lane's). A warp sweeps its slots round by round; between rounds its lanes meet at a
// __syncwarp. A move of more than kSoloBytes is posted on the warp's MoveBoard in shared
// memory and cut into chunks: the posting lane takes chunks of it, and so does every lane of
// the warp that has finished its visit of the round or waits for a move of its own, so one
// busy QP still moves its payload up to 32 lanes wide. Nothing waits for a lane that is not
// moving: a lane that posted a move waits only for chunks other lanes have taken, which they
// store without waiting for anything (independent thread scheduling, Volta and later, lets
// the diverged lanes progress).
#include "gpu_engine_kernel.hpp"

#include <cuda/atomic>

namespace gv::detail {
namespace {

using soft::Arena;
using soft::ArenaHeader;

/// A lane moves up to this many bytes alone (one round of loads); larger moves go on the board.
constexpr std::uint64_t kSoloBytes = 512;
/// A board move is taken in chunks of this many bytes (a multiple of 16: every chunk of a move
/// has the alignment of its start).
constexpr std::uint64_t kChunkBytes = 512;

/// Move `words` words of type V from src to dst, eight loads in flight before their stores.
template <class V>
__device__ void move_run(std::byte* dst, const std::byte* src, std::uint64_t words) {
  auto* d = reinterpret_cast<V*>(dst);
  const auto* s = reinterpret_cast<const V*>(src);
  std::uint64_t i = 0;
  for (; i + 8 <= words; i += 8) {
    V v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = s[i + k];
#pragma unroll
    for (int k = 0; k < 8; ++k) d[i + k] = v[k];
  }
  for (; i < words; ++i) d[i] = s[i];
}

/// One lane moves n bytes, in the widest words both pointers allow.
__device__ __noinline__ void move_solo(std::byte* dst, const std::byte* src, std::uint64_t n) {
  const auto align = reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src);
  std::uint64_t done = 0;
  if ((align & 15) == 0) {
    done = n & ~std::uint64_t{15};
    move_run<uint4>(dst, src, done / 16);
  } else if ((align & 7) == 0) {
    done = n & ~std::uint64_t{7};
    move_run<std::uint64_t>(dst, src, done / 8);
  } else if ((align & 3) == 0) {
    done = n & ~std::uint64_t{3};
    move_run<std::uint32_t>(dst, src, done / 4);
  }
  move_run<std::uint8_t>(dst + done, src + done, n - done);
}

/// A move posted by one lane for the warp.
struct MoveJob {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t n;
  std::uint64_t chunks;
};

/// One warp's board of moves, in shared memory. Lane l alone writes job[l] and the generation
/// (high half) of take[l]; any lane takes chunk c of job[l] by advancing take[l]'s low half from
/// c to c + 1 with a compare-and-swap that names the generation, so a lane that read a finished
/// job's fields never takes a chunk of the next one. done[l] counts the chunks stored (release:
/// their stores before the owner's acquire, and so before its publishing release).
struct MoveBoard {
  MoveJob job[32];
  unsigned long long take[32];
  unsigned int done[32];
  unsigned int pending;  ///< lanes whose job has chunks left to take
  unsigned int working;  ///< lanes still visiting their QPs in this round
};

template <class T>
using shared_ref = cuda::atomic_ref<T, cuda::thread_scope_block>;

/// A lane's side of its warp's MoveBoard.
class Movers {
 public:
  __device__ Movers(MoveBoard* b, unsigned lane) : b_(b), lane_(lane) {}

  /// Move n bytes with the help of the warp's lanes; every byte is stored, and ordered before
  /// this lane's next release, when it returns.
  __device__ void move(std::byte* dst, const std::byte* src, std::uint64_t n) const {
    MoveJob& j = b_->job[lane_];
    j = MoveJob{dst, src, n, (n + kChunkBytes - 1) / kChunkBytes};
    b_->done[lane_] = 0;
    shared_ref<unsigned long long> take(b_->take[lane_]);
    const unsigned long long gen = (take.load(cuda::std::memory_order_relaxed) >> 32) + 1;
    take.store(gen << 32, cuda::std::memory_order_release);  // the job's fields before its ticket
    shared_ref<unsigned int>(b_->pending).fetch_or(1u << lane_, cuda::std::memory_order_relaxed);
    while (take_chunk(lane_)) {
    }
    shared_ref<unsigned int>(b_->pending).fetch_and(~(1u << lane_), cuda::std::memory_order_relaxed);
    shared_ref<unsigned int> done(b_->done[lane_]);
    while (done.load(cuda::std::memory_order_acquire) < j.chunks) help();
  }

  /// Take chunks of every posted move until none is left to take; false if there was none.
  __device__ bool help() const {
    bool any = false;
    for (unsigned p = shared_ref<unsigned int>(b_->pending).load(cuda::std::memory_order_relaxed); p != 0;
         p &= p - 1) {
      const unsigned owner = __ffs(p) - 1;
      while (take_chunk(owner)) any = true;
    }
    return any;
  }

  /// The round's end: this lane's visits are over; help the others' moves until every lane's
  /// are. Lanes with nothing to take sleep between looks: a diverged spin would take issue
  /// slots from the lanes still executing WQEs.
  __device__ void finish_round() const {
    shared_ref<unsigned int> working(b_->working);
    working.fetch_and(~(1u << lane_), cuda::std::memory_order_relaxed);
    while (working.load(cuda::std::memory_order_relaxed) != 0)
      if (!help()) __nanosleep(64);
  }

  /// A new round: every lane visits (lane 0 only, between two __syncwarp()s of the whole warp).
  __device__ void start_round() const { b_->working = ~0u; }

 private:
  /// Take and store one chunk of `owner`'s job; false if none is left to take.
  __device__ bool take_chunk(unsigned owner) const {
    shared_ref<unsigned long long> take(b_->take[owner]);
    unsigned long long t = take.load(cuda::std::memory_order_acquire);
    for (;;) {
      const volatile MoveJob& vj = b_->job[owner];
      const MoveJob j{vj.dst, vj.src, vj.n, vj.chunks};
      const std::uint64_t c = t & 0xffffffffu;
      if (c >= j.chunks) return false;
      // A failed swap means another lane took chunk c or the owner posted a new job: reread.
      if (take.compare_exchange_weak(t, t + 1, cuda::std::memory_order_acquire, cuda::std::memory_order_acquire)) {
        const std::uint64_t off = c * kChunkBytes;
        move_solo(j.dst + off, j.src + off, j.n - off < kChunkBytes ? j.n - off : kChunkBytes);
        shared_ref<unsigned int>(b_->done[owner]).fetch_add(1, cuda::std::memory_order_release);
        return true;
      }
    }
  }

  MoveBoard* b_;
  unsigned lane_;
};

/// The GPU engine's environment for soft::Hca (see the Env contract in soft/hca.hpp).
class GpuEnv {
 public:
  __device__ GpuEnv(Arena own, std::int32_t pid, Movers movers)
      : own_(own), own_end_(own.base + own.hdr()->size), pid_(pid), movers_(movers) {}

  __device__ const Arena& own() const { return own_; }
  __device__ std::int32_t self_pid() const { return pid_; }
  __device__ std::uint64_t now_ns() const { return sync::now_ns(); }

  __device__ sync::Scope scope(const Arena& a) const { return scope_of(a.base); }

  /// The host resolved the peer's arena to an address of this process at RTR (peer_base).
  __device__ Arena peer(const soft::QpVisit& q) const { return Arena{reinterpret_cast<std::byte*>(q.peer_base)}; }

  __device__ std::uint64_t fetch_add(std::uint64_t* t, std::uint64_t v) { return sync::fetch_add(t, v); }
  __device__ std::uint64_t compare_swap(std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) {
    sync::compare_exchange(t, expected, desired);  // expected <- the value found
    return expected;
  }
  /// Loads and stores cannot fail softly: a bad address traps the engine (the watchdog says so).
  __device__ std::uint8_t take_fault() { return 0; }

  /// Move n bytes (with the warp's lanes beyond kSoloBytes). With `publish`, the last byte is stored
  /// last with release at the widest scope of the message's destinations (see put() for
  /// messages of up to 8 bytes).
  __device__ void copy(void* d, const void* s, std::uint64_t n, bool publish) {
    auto* dst = static_cast<std::byte*>(d);
    unsettled_ = copy_out(dst, static_cast<const std::byte*>(s), n, publish, scope_of(dst), unsettled_, movers_);
  }

  /// Store the n <= 8 low bytes of v (little-endian). A published message that fits one
  /// naturally aligned store (1, 2, 4 or 8 bytes) and follows no unsettled bytes is that one
  /// store, and settle() orders it before what follows: its receiver need not wait for a fence.
  __device__ void put(void* d, std::uint64_t v, std::uint32_t n, bool publish) {
    auto* dst = static_cast<std::byte*>(d);
    unsettled_ = put_out(dst, v, n, publish, scope_of(dst), unsettled_);
  }

  /// Order every byte copy() stored before what this engine stores next.
  __device__ void settle() {
    if (unsettled_ == kSystem) sync::release_fence(sync::Scope::kSystem);
    else if (unsettled_ == kGpuOnly) sync::release_fence(sync::Scope::kGpu);
    unsettled_ = kNone;
  }

 private:
  /// Widest scope of the stores not yet ordered by a release or a fence.
  enum Unsettled : std::uint8_t { kNone, kGpuOnly, kSystem };
  static __device__ Unsettled level(sync::Scope s) { return s == sync::Scope::kGpu ? kGpuOnly : kSystem; }
  static __device__ Unsettled wider(Unsettled u, sync::Scope s) { return level(s) > u ? level(s) : u; }

  // copy() and put() are out of line, with scalar arguments and the unsettled scope passed in
  // and returned (nothing moves to local memory): one copy of their code serves every call
  // site of the inlined Hca steps (the engine's SASS fell from 382 to 88 KB; its speed did not
  // change: instruction fetch was not its cost).

  /// copy() to dst, which `scope` observes, after stores unsettled at `u`; returns the new u.
  static __device__ __noinline__ Unsettled copy_out(std::byte* dst, const std::byte* src, std::uint64_t n,
                                                    bool publish, sync::Scope scope, Unsettled u, Movers movers) {
    if (n <= 8) {
      std::uint64_t v = 0;
      for (std::uint64_t i = 0; i < n; ++i) v |= std::uint64_t{static_cast<std::uint8_t>(src[i])} << (8 * i);
      return put_out(dst, v, static_cast<std::uint32_t>(n), publish, scope, u);
    }
    const std::uint64_t body = publish ? n - 1 : n;
    if (body <= kSoloBytes) move_solo(dst, src, body);
    else movers.move(dst, src, body);
    u = wider(u, scope);
    return publish ? release_last(dst + n - 1, static_cast<std::uint8_t>(src[n - 1]), scope, u) : u;
  }

  /// put() to dst, which `scope` observes, after stores unsettled at `u`; returns the new u.
  static __device__ __noinline__ Unsettled put_out(std::byte* dst, std::uint64_t v, std::uint32_t n, bool publish,
                                                   sync::Scope scope, Unsettled u) {
    if (publish && u == kNone && (n == 1 || n == 2 || n == 4 || n == 8) &&
        reinterpret_cast<std::uintptr_t>(dst) % n == 0) {
      switch (n) {
        case 1: sync::store_relaxed(reinterpret_cast<std::uint8_t*>(dst), static_cast<std::uint8_t>(v), scope); break;
        case 2: sync::store_relaxed(reinterpret_cast<std::uint16_t*>(dst), static_cast<std::uint16_t>(v), scope); break;
        case 4: sync::store_relaxed(reinterpret_cast<std::uint32_t*>(dst), static_cast<std::uint32_t>(v), scope); break;
        default: sync::store_relaxed(reinterpret_cast<std::uint64_t*>(dst), v, scope); break;
      }
      return level(scope);
    }
    const std::uint32_t body = publish ? n - 1 : n;
    for (std::uint32_t i = 0; i < body; ++i) dst[i] = static_cast<std::byte>(v >> (8 * i));
    if (body != 0) u = wider(u, scope);
    return publish ? release_last(dst + n - 1, static_cast<std::uint8_t>(v >> (8 * (n - 1))), scope, u) : u;
  }

  /// Our own arena is watched only by threads of this GPU; anything else (a peer GPU's
  /// memory, mapped host memory, our GPU's memory outside the arena) by the system.
  __device__ sync::Scope scope_of(const std::byte* p) const {
    return p >= own_.base && p < own_end_ ? sync::Scope::kGpu : sync::Scope::kSystem;
  }

  /// The last byte of a message, with release at the widest scope its bytes went to (u and
  /// scope): everything is settled after it.
  static __device__ Unsettled release_last(std::byte* p, std::uint8_t v, sync::Scope scope, Unsettled u) {
    sync::store_release(reinterpret_cast<std::uint8_t*>(p), v, u == kSystem ? sync::Scope::kSystem : scope);
    return kNone;
  }

  Arena own_;
  const std::byte* own_end_;
  std::int32_t pid_;
  Movers movers_;
  Unsettled unsettled_ = kNone;
};

/// Epochs are published every kEpochSweeps sweeps (and once at start); the table's high mark
/// is read every kFlagSweeps sweeps, the beacon's stop flag every kStopSweeps.
constexpr std::uint64_t kEpochSweeps = 16;
constexpr std::uint64_t kFlagSweeps = 16;
constexpr std::uint64_t kStopSweeps = 64;

/// Warps per engine block: more warps take more blocks (one SM each, in practice), so the
/// register budget of a warp stays that of a small block.
constexpr std::uint32_t kWarpsPerBlock = 8;

__global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    engine_kernel(Arena arena, std::int32_t pid, std::uint32_t warps, EngineBeacon* beacon) {
  __shared__ MoveBoard boards[kWarpsPerBlock];
  const unsigned warp = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= warps) return;  // the last block's spare warps (whole warps: blocks are warps wide)
  MoveBoard* board = &boards[threadIdx.x / 32];
  board->take[lane] = 0;
  board->done[lane] = 0;
  if (lane == 0) board->pending = 0;
  __syncwarp();
  const Movers movers(board, lane);
  GpuEnv env(arena, pid, movers);
  ArenaHeader* h = arena.hdr();
  std::uint64_t sweeps = 0;
  if (lane == 0) {
    sync::store_release(&h->epoch[warp], std::uint64_t{1});  // the first heartbeat
    if (warp == 0) sync::store_release(&beacon->started, 1u, sync::Scope::kSystem);
  }
  std::uint32_t n = 0;
  for (;; ++sweeps) {
    // The host's flags change rarely: most sweeps cost the QPs' own loads only. The stop flag
    // lies in host memory (a PCIe round trip), the table's high mark in the arena; lane 0 reads
    // them for the warp (every lane is here: the last round ended with a __syncwarp).
    if (sweeps % kStopSweeps == 0 &&
        __shfl_sync(~0u, lane == 0 ? sync::load_host_flag(&beacon->stop) : 0u, 0) != 0)
      break;
    if (sweeps % kFlagSweeps == 0) n = __shfl_sync(~0u, lane == 0 ? sync::load_host_flag(&h->qp_high) : 0u, 0);
    // Lane l takes table rounds l, l + 32, ...: the warp's lanes visit up to 32 slots at once.
    for (std::uint32_t round = lane; (round - lane) * warps < n; round += 32) {
      if (lane == 0) movers.start_round();
      __syncwarp();  // every lane sees the round started before any leaves it
      const std::uint32_t slot = soft::engine_slot(warp, round, warps);
      if (slot < n) soft::Hca<GpuEnv>::step_slot(env, arena.qps()[slot]);
      movers.finish_round();
      __syncwarp();  // every lane's visits and moves of the round are done (and ordered before the epoch)
    }
    if (lane == 0 && (sweeps + 1) % kEpochSweeps == 0) sync::store_release(&h->epoch[warp], sweeps + 2);
  }
}

}  // namespace

cudaError_t launch_gpu_engine(cudaStream_t stream, soft::Arena arena, std::int32_t pid,
                              std::uint32_t warps, EngineBeacon* beacon) {
  const std::uint32_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  engine_kernel<<<blocks, 32 * (warps < kWarpsPerBlock ? warps : kWarpsPerBlock), 0, stream>>>(arena, pid, warps, beacon);
  return cudaGetLastError();
}

}  // namespace gv::detail
