// The software HCA's GPU engine: soft::Hca<GpuEnv> run by a persistent kernel.
//
// `warps` warps in blocks of up to eight. Every lane is an engine: lane l of warp w serves the
// QP slots of table rounds l, l + 32, ... (soft::engine_slot), so up to 32 QPs of a warp
// execute their WQEs side by side, one lane each, on diverged paths. A lane moves up to
// kSoloBytes alone and starts no WQE whose payload is larger (GpuEnv::may_move): it ends its
// visit before that WQE, which stays untouched at the QP's sq_head, and parks the QP. Once
// every lane's visit of the round is over, the warp serves the parked QPs one after another,
// converged: lane 0 runs the semantics, lanes 1..31 wait in a helper loop and join lane 0 for
// every data movement (a job in shared memory and two __syncwarp()s, which Volta and later
// allow at different program points), so a large payload moves 32 lanes wide. A move shared by
// lanes on diverged paths runs at one lane's speed (a warp executes diverged paths one after
// another; notes/verbs-gpu.md, "2026-11-23: the lane-parallel engine measured on one H100,
// and reverted"), so large moves are never made inside a lane's visit. RC order per QP and CQE
// order are those of one engine: a QP is visited by its lane or, parked, by its warp, one visit
// at a time, each executing from sq_head in order. A lane
// keeps its first slot's visit (round `lane`) in shared memory between visits (soft::KeptVisit),
// so that a visit starts without a round of loads of the QP's fields.
#include "gpu_engine_kernel.hpp"

namespace gv::detail {
namespace {

using soft::Arena;
using soft::ArenaHeader;

/// Rounds of loads a lane spends on an idle kept QP in one sweep (GpuEnv::poll_again()).
constexpr std::uint32_t kIdlePolls = 8;

/// A lane alone moves up to this many bytes (four rounds of eight 16-byte loads); a WQE with a
/// larger payload waits for its converged warp.
constexpr std::uint64_t kSoloBytes = 512;

/// Move `words` words of type V from src to dst, up to eight loads in flight before their
/// stores (the last group too: one load round, where a word at a time waited a round each).
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
  // The rest, fewer than 8, four loads in flight at a time (not one: a round each).
  for (; i < words; i += 4) {
    V v[4];
#pragma unroll
    for (std::uint64_t k = 0; k < 4; ++k)
      if (i + k < words) v[k] = s[i + k];
#pragma unroll
    for (std::uint64_t k = 0; k < 4; ++k)
      if (i + k < words) d[i + k] = v[k];
  }
}

/// Move n bytes with `move(word, dst, src, bytes)`, in the widest words (16, 8, 4 bytes) both
/// pointers allow, and the rest bytewise; `word` is a value of the word type.
template <class Move>
__device__ __forceinline__ void move_aligned(std::byte* dst, const std::byte* src, std::uint64_t n, Move move) {
  const auto align = reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src);
  std::uint64_t done = 0;
  if ((align & 15) == 0) {
    done = n & ~std::uint64_t{15};
    move(uint4{}, dst, src, done);
  } else if ((align & 7) == 0) {
    done = n & ~std::uint64_t{7};
    move(std::uint64_t{}, dst, src, done);
  } else if ((align & 3) == 0) {
    done = n & ~std::uint64_t{3};
    move(std::uint32_t{}, dst, src, done);
  }
  move(std::uint8_t{}, dst + done, src + done, n - done);
}

/// One lane moves n bytes.
__device__ __noinline__ void move_solo(std::byte* dst, const std::byte* src, std::uint64_t n) {
  move_aligned(dst, src, n, [](auto word, std::byte* d, const std::byte* s, std::uint64_t bytes) {
    move_run<decltype(word)>(d, s, bytes / sizeof(word));
  });
}

/// One warp's data-mover job while it serves parked QPs: written by lane 0, executed by all 32
/// lanes.
struct MoveJob {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t n;
  std::uint32_t stop;  ///< lane 0 has served the round's parked QPs: the helpers leave
};

/// Lane `lane`'s share of a move in words of type V (n a multiple of sizeof(V), both pointers
/// aligned to it): every 32nd word from word `lane`, four words in flight before their stores.
template <class V>
__device__ void move_words(std::byte* dst, const std::byte* src, std::uint64_t n, unsigned lane) {
  auto* d = reinterpret_cast<V*>(dst);
  const auto* s = reinterpret_cast<const V*>(src);
  const std::uint64_t words = n / sizeof(V);
  std::uint64_t i = lane;
  for (; i + 3 * 32 < words; i += 4 * 32) {
    const V a = s[i], b = s[i + 32], c = s[i + 2 * 32], e = s[i + 3 * 32];
    d[i] = a;
    d[i + 32] = b;
    d[i + 2 * 32] = c;
    d[i + 3 * 32] = e;
  }
  for (; i < words; i += 32) d[i] = s[i];
}

/// Lane `lane`'s share of job j (see move_words).
__device__ __noinline__ void move_part(const MoveJob& j, unsigned lane) {
  move_aligned(j.dst, j.src, j.n, [lane](auto word, std::byte* d, const std::byte* s, std::uint64_t bytes) {
    move_words<decltype(word)>(d, s, bytes, lane);
  });
}

/// The GPU engine's environment for soft::Hca (the EngineEnv concept, semantics/env.hpp).
class GpuEnv {
 public:
  /// A lane's engine (`job` null: it moves alone, and parks the QP of a WQE it may not move),
  /// or lane 0 serving a parked QP for its warp (`job`: the warp's, its helpers waiting on it).
  __device__ GpuEnv(Arena own, std::int32_t pid, MoveJob* job)
      : own_(own), own_end_(own.base + own.hdr()->size), pid_(pid), job_(job) {}

  __device__ const Arena& own() const { return own_; }
  __device__ std::int32_t self_pid() const { return pid_; }
  __device__ std::uint64_t now_ns() const { return sync::now_ns(); }

  __device__ sync::Scope scope(const Arena& a) const { return scope_of(a.base); }

  /// The host resolved the peer's arena to an address of this process at RTR (peer_base).
  __device__ Arena peer(const soft::QpVisit& q) const { return Arena{reinterpret_cast<std::byte*>(q.peer_base)}; }

  /// The responder's atomics: after everything stored before (an atomic is no release of the
  /// messages before it).
  __device__ std::uint64_t fetch_add(std::uint64_t* t, std::uint64_t v) {
    settle();
    return sync::fetch_add(t, v);
  }
  __device__ std::uint64_t compare_swap(std::uint64_t* t, std::uint64_t expected, std::uint64_t desired) {
    settle();
    sync::compare_exchange(t, expected, desired);  // expected <- the value found
    return expected;
  }
  /// Loads and stores cannot fail softly: a bad address traps the engine (the watchdog says so).
  __device__ std::uint8_t take_fault() { return 0; }

  /// A lane alone moves a WQE's payload of up to kSoloBytes; a larger one parks the QP for the
  /// warp (take_parked()), which moves any.
  __device__ bool may_move(std::uint64_t n) {
    if (job_ != nullptr || n <= kSoloBytes) return true;
    parked_ = true;
    return false;
  }

  /// Whether a visit since the last call ended before a WQE it may not move.
  __device__ bool take_parked() {
    const bool p = parked_;
    parked_ = false;
    return p;
  }

  /// Move n bytes: a lane alone, or (serving a parked QP) the warp beyond 8 bytes. With
  /// `publish`, the last byte is stored last with release at the widest scope of the message's
  /// destinations (see put() for messages of up to 8 bytes).
  __device__ void copy(void* d, const void* s, std::uint64_t n, bool publish) {
    auto* dst = static_cast<std::byte*>(d);
    unsettled_ = copy_out(dst, static_cast<const std::byte*>(s), n, publish, scope_of(dst), unsettled_, job_);
  }

  /// Store the n <= 8 low bytes of v (little-endian). A published message that fits one
  /// naturally aligned store (1, 2, 4 or 8 bytes) and follows no unsettled bytes is that one
  /// store, and settle() orders it before what follows: its receiver need not wait for a fence.
  __device__ void put(void* d, std::uint64_t v, std::uint32_t n, bool publish) {
    auto* dst = static_cast<std::byte*>(d);
    const sync::Scope scope = scope_of(dst);
    // The single store inline: through put_out()'s call it took about 0.5 us a WQE (a per-step
    // trace of the ping-pong on one H200, notes/verbs-gpu.md).
    if (!put_single(dst, v, n, publish, scope, unsettled_)) unsettled_ = put_out(dst, v, n, publish, scope, unsettled_);
  }

  /// An idle kept QP's loads once more, at once, while every lane polling beside this one in
  /// the warp has such a QP (the warp leaves together), up to kIdlePolls rounds a sweep: one
  /// round is all the next doorbell waits for, where a sweep took two (the loop around it).
  __device__ bool poll_again(bool idle_kept, std::uint32_t polls) {
    return __all_sync(__activemask(), idle_kept) && polls < kIdlePolls;
  }

  /// Order every byte copy() and put() stored before what this engine stores next.
  __device__ void settle() {
    if (unsettled_ == kSystem || unsettled_ == kReleased) sync::release_fence(sync::Scope::kSystem);
    else if (unsettled_ == kGpuOnly) sync::release_fence(sync::Scope::kGpu);
    unsettled_ = kNone;
  }

  /// Before a WQE's data: settle() the relaxed stores of earlier messages, but leave a released
  /// last byte to the next release (every copy() of more than 8 bytes ends with one, and put()
  /// makes one unless it follows nothing unsettled), or to the fence before an atomic.
  __device__ void order_messages() {
    if (unsettled_ != kReleased) settle();
  }

 private:
  /// What this engine stored that is not yet ordered before its later stores: nothing; a
  /// message's last byte, stored with release (its bytes are ordered before it, but a later
  /// relaxed store may pass it); relaxed stores observed by this GPU only; or by the system.
  /// kReleased does not say the release's scope and settles at system scope: keeping the two
  /// apart measured slower (notes/verbs-gpu.md,
  /// "2026-11-24: the responder kept across visits").
  enum Unsettled : std::uint8_t { kNone, kReleased, kGpuOnly, kSystem };
  static __device__ Unsettled level(sync::Scope s) { return s == sync::Scope::kGpu ? kGpuOnly : kSystem; }
  /// After relaxed stores observed at scope s (a pending release may be of system scope).
  static __device__ Unsettled wider(Unsettled u, sync::Scope s) {
    if (u == kReleased) return kSystem;
    return level(s) > u ? level(s) : u;
  }

  // copy() and put() are out of line, with scalar arguments and the unsettled scope passed in
  // and returned (nothing moves to local memory): one copy of their code serves every call
  // site of the inlined Hca steps (the engine's SASS fell from 382 to 88 KB). The single store
  // of a small message (put_single) is inline: its call cost a ping-pong about 0.5 us.

  /// copy() to dst, which `scope` observes, after stores unsettled at `u`; returns the new u.
  static __device__ __noinline__ Unsettled copy_out(std::byte* dst, const std::byte* src, std::uint64_t n,
                                                    bool publish, sync::Scope scope, Unsettled u, MoveJob* job) {
    if (n <= 8) {
      std::uint64_t v = 0;
      for (std::uint64_t i = 0; i < n; ++i) v |= std::uint64_t{static_cast<std::uint8_t>(src[i])} << (8 * i);
      return put_single(dst, v, static_cast<std::uint32_t>(n), publish, scope, u)
                 ? u
                 : put_out(dst, v, static_cast<std::uint32_t>(n), publish, scope, u);
    }
    const std::uint64_t body = publish ? n - 1 : n;
    const auto last = static_cast<std::uint8_t>(src[n - 1]);  // loaded beside the body's loads
    if (job == nullptr) {
      move_solo(dst, src, body);  // a lane's visit: up to kSoloBytes (may_move())
    } else {
      // The warp's move: a lane's share of up to 128 bytes (16-byte words) is one round of
      // loads, where lane 0 alone waited for a round per 4 words.
      job->dst = dst;
      job->src = src;
      job->n = body;
      __syncwarp();  // the helpers take the job
      move_part(*job, 0);
      __syncwarp();  // every lane's share is stored (and ordered before what follows)
    }
    u = wider(u, scope);
    return publish ? release_last(dst + n - 1, last, scope, u) : u;
  }

  /// A published message of n <= 8 bytes that fits one naturally aligned store and follows no
  /// unsettled bytes: that one store (u becomes its scope), and true. Otherwise false.
  static __device__ __forceinline__ bool put_single(std::byte* dst, std::uint64_t v, std::uint32_t n, bool publish,
                                                    sync::Scope scope, Unsettled& u) {
    // n is a power of two here: the alignment is a mask (`% n` of a 64-bit address was a call
    // to a 66-instruction division routine in every message's path).
    if (!publish || u != kNone || (n != 1 && n != 2 && n != 4 && n != 8) ||
        (reinterpret_cast<std::uintptr_t>(dst) & (n - 1)) != 0)
      return false;
    switch (n) {
      case 1: sync::store_relaxed(reinterpret_cast<std::uint8_t*>(dst), static_cast<std::uint8_t>(v), scope); break;
      case 2: sync::store_relaxed(reinterpret_cast<std::uint16_t*>(dst), static_cast<std::uint16_t>(v), scope); break;
      case 4: sync::store_relaxed(reinterpret_cast<std::uint32_t*>(dst), static_cast<std::uint32_t>(v), scope); break;
      default: sync::store_relaxed(reinterpret_cast<std::uint64_t*>(dst), v, scope); break;
    }
    u = level(scope);
    return true;
  }

  /// put() to dst, which `scope` observes, after stores unsettled at `u`, when put_single() does
  /// not apply: the bytes, the last with release; returns the new u.
  static __device__ __noinline__ Unsettled put_out(std::byte* dst, std::uint64_t v, std::uint32_t n, bool publish,
                                                   sync::Scope scope, Unsettled u) {
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

  /// The last byte of a message, with release at the widest scope its bytes (and an earlier
  /// released byte) went to: the message's bytes are ordered before it, but not what follows
  /// it. A later message's single relaxed store or an atomic could be seen before this byte,
  /// which RC order forbids: kReleased makes them fence first (put_single() declines, settle()).
  static __device__ Unsettled release_last(std::byte* p, std::uint8_t v, sync::Scope scope, Unsettled u) {
    const bool sys = u == kSystem || u == kReleased;
    sync::store_release(reinterpret_cast<std::uint8_t*>(p), v, sys ? sync::Scope::kSystem : scope);
    return kReleased;
  }

  Arena own_;
  const std::byte* own_end_;
  std::int32_t pid_;
  MoveJob* job_;
  Unsettled unsettled_ = kNone;
  bool parked_ = false;
};
static_assert(soft::EngineEnv<GpuEnv>);

/// Epochs are published every kEpochSweeps sweeps (and once at start); the table's high mark
/// and the count of QPs created are read every kFlagSweeps sweeps, the beacon's stop flag
/// every kStopSweeps.
constexpr std::uint64_t kEpochSweeps = 16;
constexpr std::uint64_t kFlagSweeps = 16;
static_assert(kFlagSweeps == kEpochSweeps,
              "GpuEngine::forget_stale(): the flags are read in the sweep after an epoch is published");
constexpr std::uint64_t kStopSweeps = 64;

/// Warps per engine block: more warps take more blocks (one SM each, in practice), so the
/// register budget of a warp stays that of a small block.
constexpr std::uint32_t kWarpsPerBlock = 8;

/// Lanes 1..31 while lane 0 serves parked QPs: their share of every move, until lane 0 stops.
__device__ void help_moves(const MoveJob* job, unsigned lane) {
  for (;;) {
    __syncwarp();  // a job (or stop) from lane 0
    if (job->stop) return;
    move_part(*job, lane);
    __syncwarp();
  }
}

/// The round's parked QPs (`parked`: the lanes that parked one; lane p visited table round
/// `round0 + p`), served one after another by the converged warp, in lane order: lane 0 visits
/// each with the warp's moves, lanes 1..31 help. (Inlined: out of line, the second copy of the
/// semantics doubled the kernel's stack frame to 1920 bytes, past the default stack limit of 1024.)
__device__ __forceinline__ void serve_parked(Arena arena, std::int32_t pid, MoveJob* job, unsigned lane, unsigned parked,
                             std::uint32_t warp, std::uint32_t round0, std::uint32_t warps) {
  if (lane == 0) {
    GpuEnv env(arena, pid, job);
    for (; parked != 0; parked &= parked - 1)
      soft::Hca<GpuEnv>::step_slot(env, arena.qps()[soft::engine_slot(warp, round0 + __ffs(parked) - 1, warps)]);
    job->stop = 1;
    __syncwarp();  // the helpers leave
  } else {
    help_moves(job, lane);
  }
  __syncwarp();  // every helper has read stop: lane 0 may clear it for the next parked round, whose
                 // helpers read it only after lane 0's first __syncwarp there
  if (lane == 0) job->stop = 0;
}

__global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    engine_kernel(Arena arena, std::int32_t pid, std::uint32_t warps, EngineBeacon* beacon) {
  __shared__ MoveJob jobs[kWarpsPerBlock];
  // Every lane's kept visit of its first slot (table round `lane`), one per thread of the block
  // (dynamic: launch_gpu_engine sizes it).
  extern __shared__ soft::KeptVisit kept_visits[];
  const unsigned warp = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= warps) return;  // the last block's spare warps (whole warps: blocks are warps wide)
  MoveJob* job = &jobs[threadIdx.x / 32];
  soft::KeptVisit* const kept = &kept_visits[threadIdx.x];
  kept->valid = 0;
  if (lane == 0) job->stop = 0;
  __syncwarp();
  GpuEnv env(arena, pid, nullptr);  // this lane's engine: it moves alone
  ArenaHeader* h = arena.hdr();
  std::uint64_t sweeps = 0;
  if (lane == 0) {
    sync::store_release(&h->epoch[warp], std::uint64_t{1});  // the first heartbeat
    if (warp == 0) sync::store_release(&beacon->started, 1u, sync::Scope::kSystem);
  }
  std::uint32_t n = 0, created = 0;
  for (;; ++sweeps) {
    // The host's flags change rarely: most sweeps cost the QPs' own loads only. The stop flag
    // lies in host memory (a PCIe round trip), the table's high mark in the arena; lane 0 reads
    // them for the warp (every lane is here: the last sweep ended with a __syncwarp).
    if (sweeps % kStopSweeps == 0 &&
        __shfl_sync(~0u, lane == 0 ? sync::load_host_flag(&beacon->stop) : 0u, 0) != 0)
      break;
    if (sweeps % kFlagSweeps == 0) {
      n = __shfl_sync(~0u, lane == 0 ? sync::load_host_flag(&h->qp_high) : 0u, 0);
      // A QP created since: what L1 holds of its slot may be an earlier QP's, which the polled
      // round's plain loads would act on (GpuEngine::forget_stale() waits for this fence).
      // A lane's kept visit is dropped too: its slot may hold a new QP.
      if (const std::uint32_t c = __shfl_sync(~0u, lane == 0 ? sync::load_host_flag(&h->qps_created) : 0u, 0);
          c != created) {
        created = c;
        sync::acquire_fence();
        kept->valid = 0;
      }
    }
    // Lane l takes table rounds l, l + 32, ...: the warp's lanes visit up to 32 slots at once
    // (every lane takes the loop's turns together: round - lane is the same for all).
    for (std::uint32_t round = lane; (round - lane) * warps < n; round += 32) {
      const std::uint32_t slot = soft::engine_slot(warp, round, warps);
      if (slot < n) soft::Hca<GpuEnv>::step_slot(env, arena.qps()[slot], round == lane ? kept : nullptr);
      // Every lane's visit is over: the warp, converged, serves the QPs that were parked.
      if (const unsigned parked = __ballot_sync(~0u, env.take_parked()); parked != 0)
        serve_parked(arena, pid, job, lane, parked, warp, round - lane, warps);
    }
    __syncwarp();  // every lane's visits of the sweep are over (and ordered before the epoch)
    if (lane == 0 && (sweeps + 1) % kEpochSweeps == 0) sync::store_release(&h->epoch[warp], sweeps + 2);
  }
}

}  // namespace

cudaError_t launch_gpu_engine(cudaStream_t stream, soft::Arena arena, std::int32_t pid,
                              std::uint32_t warps, EngineBeacon* beacon) {
  const std::uint32_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const std::uint32_t threads = 32 * (warps < kWarpsPerBlock ? warps : kWarpsPerBlock);
  const std::size_t kept_bytes = threads * sizeof(soft::KeptVisit);  // past the 48 KiB default at 8 warps
  if (const cudaError_t e = cudaFuncSetAttribute(engine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(kept_bytes));
      e != cudaSuccess)
    return e;
  engine_kernel<<<blocks, threads, kept_bytes, stream>>>(arena, pid, warps, beacon);
  return cudaGetLastError();
}

}  // namespace gv::detail
