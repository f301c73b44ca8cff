// gv_rma: the rma layer measured the way NVSHMEM's perftest measures NVSHMEM, with its anchors
// (raw peer stores, cudaMemcpyPeerAsync) in the same run.
//
// Two ranks in this process (World::create_local): on GPUs 0 and 1 when there are two, both on
// GPU 0 otherwise (then "remote" memory is the same GPU's: a lower bound on the software cost,
// not a link figure). Rows, each over the transports asked for (p2p, ib):
//   p           ping-pong of one 8-byte value (p + wait_until on the same word)
//   put_signal  ping-pong of put_signal (signal set) + wait_until, thread/warp/block scope
//   ll          ping-pong of put_ll + wait_ll (flag-in-data words), thread/warp/block scope;
//               ll_channel, the same through an LlChannel opened once per kernel; and ll_wait_put,
//               the channel's rounds with each rank's wait and next put in one call (wait_put):
//               rank 0 puts round 1 before its loop, then each iteration waits for round i and
//               puts round i + 1 (the other rows put, then wait, in one iteration)
//   put         one-sided: put + quiet, per operation
//   get         one-sided: get, per operation
//   fetch_add / compare_swap   round trips whose next operand depends on the fetched value, each
//               on the next of 32 words (chain_word: an atomic's latency depends on where its word lies)
//   bw          put_nbi<Block> from 1, 8, 32, 132 CTAs, one quiet at the end (GB/s = 1e9 B/s)
//   rate        8/64/512-byte puts to scattered destinations (distinct cache lines), Mmsg/s
//   anchors     raw flag-in-every-8-bytes ping-pong; raw fenced ping-pongs (8 bytes from
//               registers; and raw_put_sys: 8 B..4 KiB from memory at thread and block scope,
//               put_signal's floor across GPUs; raw_put_gpu, fenced at device scope, its floor
//               where the ranks share a GPU); raw_ll: flagged 16-byte lines by hand, one a member (an
//               LlChannel's floor: 8 B from a thread, to 256 B from a warp, to 4 KiB from a
//               block); raw peer fetch-and-add chains at gpu and system scope;
//               cudaMemcpyPeerAsync bandwidth
// Latency columns are perftest's, half round trip for ping-pongs, in microseconds. Per-iteration
// times come from clock64() calibrated against %globaltimer over the whole loop.
// Placements (--placements N): a ping-pong row runs N times, its buffers and signal words moved
// kPlaceStride bytes further into both ranks' areas each time, and reports the samples of all N
// together, plus t_placed, the mean of the N placements' medians. Where a few words lie in the L2
// moves a small round by up to ~0.1 us (the same code, one process: a thread's LL round at 8 B
// 0.36 us at one placement, 0.47 at another; notes/rma.md), so one placement compares codes by
// where their words fell; the mean over placements compares the codes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpuverbs/host/world.hpp>
#include <gpuverbs/rma.hpp>

#include "args.hpp"
#include "cuda_check.hpp"
#include "device_clock.cuh"
#include "metadata.hpp"
#include "report.hpp"
#include "stats.hpp"

namespace {

namespace rma = gv::rma;
using gv::Status;
using rma::Endpoint;
using rma::Transport;


using gv::bench::gtimer;
using gv::bench::LoopClock;
using gv::bench::settle;
using gv::bench::Timing;

template <class G, int kOp>
__device__ __forceinline__ Status send(const Endpoint& ep, rma::LlChannel<G>& ch, std::byte* buf, const std::byte* src,
                                       std::size_t bytes, std::uint64_t* sig, std::uint64_t i, int peer) {
  if constexpr (kOp == 0) return rma::p<G>(ep, sig, i, peer);
  else if constexpr (kOp == 3) return ch.put(src, bytes, static_cast<std::uint32_t>(i));
  else if constexpr (kOp == 2) return rma::put_ll<G>(ep, buf, src, bytes, static_cast<std::uint32_t>(i), peer);
  else return rma::put_signal<G>(ep, buf, src, bytes, sig, i, rma::SignalOp::kSet, peer);
}

/// The wait that ends a half round trip: wait_ll of round i into `out` (op 2), else the signal.
template <class G, int kOp>
__device__ __forceinline__ Status receive(const Endpoint& ep, rma::LlChannel<G>& ch, const std::byte* buf, std::byte* out,
                                          std::size_t bytes, const std::uint64_t* sig, std::uint64_t i) {
  if constexpr (kOp == 3) return ch.wait(out, bytes, static_cast<std::uint32_t>(i));
  else if constexpr (kOp == 2) return rma::wait_ll<G>(ep, buf, bytes, static_cast<std::uint32_t>(i), out);
  else return rma::wait_until<G>(ep, sig, rma::Cmp::kGe, i);
}

/// Where a ping-pong rank's block runs (--sms): on SM `sm` of its GPU, or, with sm < 0, wherever
/// the one-block grid lands. Two ranks on one GPU meet in its L2, and the SMs they run on move a
/// small round by up to 0.15 us on an H100 or H200 (notes/rma.md), so rows are compared on one
/// placement. With an SM the grid has two blocks an SM; the first block on `sm` runs and the
/// others leave. words[0]: a block runs; words[1]: the blocks that left (the last of them runs if
/// none landed on `sm`); words[2]: the SM that ran.
struct Place {
  int sm = -1;
  std::uint32_t* words = nullptr;
};

/// Whether this block is the rank's (Place); every thread of the block gets the same answer.
__device__ __forceinline__ bool take_block(const Place& pl) {
  if (pl.sm < 0) return true;
  __shared__ std::uint32_t won;
  if (threadIdx.x == 0) {
    std::uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    bool w = sm == static_cast<std::uint32_t>(pl.sm) && atomicCAS(pl.words, 0u, 1u) == 0u;
    if (!w && atomicAdd(pl.words + 1, 1u) == gridDim.x - 1) w = atomicCAS(pl.words, 0u, 1u) == 0u;
    if (w) pl.words[2] = sm;
    won = w;
  }
  __syncthreads();
  return won != 0;
}

/// Ping-pong between ranks 0 and 1: op 0 = p of the round number, op 1 = put_signal, op 2 =
/// put_ll of `bytes` into the LL buffer `buf` (wait_ll copies the reply to `out`), op 3 = op 2
/// through an LlChannel opened before the loop, op 4 = op 3 through wait_put (rank 0 puts round 1
/// first; then every iteration of either rank is one wait_put, rank 0's last a wait).
template <class G, int kOp>
__global__ void pingpong(__grid_constant__ const Endpoint ep, std::byte* buf, const std::byte* src, std::byte* out,
                         std::size_t bytes, std::uint64_t* sig, int warmup, int iters, std::uint64_t* cycles,
                         Timing* timing, std::uint32_t* st, Place place) {
  if (!take_block(place)) return;
  const int rank = static_cast<int>(ep.rank), peer = 1 - rank;
  LoopClock clock{warmup, cycles, rank == 0 && G::index() == 0};
  rma::LlChannel<G> ch;
  if (const Status s = kOp >= 3 ? ch.open(ep, buf, bytes, peer, peer) : Status::kOk; s != Status::kOk) {
    if (G::index() == 0) *st = static_cast<std::uint32_t>(s);
    return;
  }
  for (int i = 1; i <= warmup + iters; ++i) {
    clock.begin(i);
    const auto round = static_cast<std::uint64_t>(i);
    Status s;
    if constexpr (kOp == 4) {
      const auto k = static_cast<std::uint32_t>(i);
      if (rank == 0) {
        s = i == 1 ? ch.put(src, bytes, 1) : Status::kOk;
        if (s == Status::kOk) s = i < warmup + iters ? ch.wait_put(out, bytes, k, src, bytes, k + 1) : ch.wait(out, bytes, k);
      } else {
        s = ch.wait_put(out, bytes, k, src, bytes, k);
      }
    } else if (rank == 0) {
      s = send<G, kOp>(ep, ch, buf, src, bytes, sig, round, peer);
      if (s == Status::kOk) s = receive<G, kOp>(ep, ch, buf, out, bytes, sig, round);
    } else {
      s = receive<G, kOp>(ep, ch, buf, out, bytes, sig, round);
      if (s == Status::kOk) s = send<G, kOp>(ep, ch, buf, src, bytes, sig, round, peer);
    }
    if (s != Status::kOk) {
      if (G::index() == 0) *st = static_cast<std::uint32_t>(s);
      return;
    }
    clock.end(i);
  }
  clock.finish(timing);
}

/// One-sided per-operation latency at rank 0: op 0 = put + quiet, 1 = get, 2 = fetch_add,
/// 3 = compare_swap (each operand depends on the value fetched before). The operation is a
/// template argument: a switch on it inside the timed loop put an indirect branch (BRX through a
/// jump table) and a reconvergence barrier into every iteration (SASS on an H200), which the
/// face's chain (shmem_perf) and the raw chains do not have.
template <class G, int kOp>
__global__ void one_sided(__grid_constant__ const Endpoint ep, std::byte* buf, std::byte* local, std::size_t bytes,
                          std::uint64_t* word, int warmup, int iters, std::uint64_t* cycles, Timing* timing,
                          std::uint32_t* st, std::uint64_t* sink) {
  static_assert(kOp >= 0 && kOp <= 3);
  std::uint64_t carry = 0;
  LoopClock clock{warmup, cycles, G::index() == 0};
  for (int i = 1; i <= warmup + iters; ++i) {
    clock.begin(i);
    Status s;
    if constexpr (kOp == 0) {
      s = rma::put<G>(ep, buf, local, bytes, 1);
      if (s == Status::kOk) s = rma::quiet<G>(ep);
    } else if constexpr (kOp == 1) {
      s = rma::get<G>(ep, local, buf, bytes, 1);
    } else if constexpr (kOp == 2) {
      std::uint64_t old = 0;
      s = rma::fetch_add<G>(ep, gv::bench::chain_word(word, i), (carry & 1) + 1, 1, old);
      carry = old;
      settle(carry);
    } else {
      std::uint64_t old = 0;
      s = rma::compare_swap<G>(ep, gv::bench::chain_word(word, i), carry, carry + 1, 1, old);
      carry = old == carry ? carry + 1 : old;
      settle(carry);
    }
    if (s != Status::kOk) {
      if (G::index() == 0) *st = static_cast<std::uint32_t>(s);
      return;
    }
    clock.end(i);
  }
  if (G::index() == 0) {
    clock.finish(timing);
    *sink = carry;
  }
}

/// Bandwidth: every block puts its share of `bytes` to rank 1, `iters` times, then one quiet.
__global__ void put_bw(__grid_constant__ const Endpoint ep, std::byte* dst, const std::byte* src, std::size_t bytes,
                       int iters, std::uint32_t* st) {
  const std::size_t chunk = ((bytes / gridDim.x) + 15) & ~std::size_t{15};
  const std::size_t off = chunk * blockIdx.x;
  const std::size_t n = off >= bytes ? 0 : (bytes - off < chunk ? bytes - off : chunk);
  Status s = Status::kOk;
  for (int i = 0; i < iters && s == Status::kOk; ++i)
    if (n != 0) s = rma::put_nbi<rma::Block>(ep, dst + off, src + off, n, 1);
  if (s == Status::kOk) s = rma::quiet<rma::Block>(ep);
  if (s != Status::kOk && threadIdx.x == 0) atomicMax(st, static_cast<std::uint32_t>(s));
}

/// Message rate: every thread (8/64 B) or warp (512 B) puts `iters` messages to scattered
/// 512-byte-aligned slots of a `slots`-slot area, then one quiet.
template <class G>
__global__ void put_rate(__grid_constant__ const Endpoint ep, std::byte* dst, const std::byte* src, std::size_t bytes,
                         std::uint32_t slots, int iters, std::uint32_t* st) {
  const unsigned gid = (blockIdx.x * blockDim.x + threadIdx.x) / G::count();
  Status s = Status::kOk;
  for (int i = 0; i < iters && s == Status::kOk; ++i) {
    const std::uint32_t slot = (gid * 2654435761u + static_cast<std::uint32_t>(i) * 40503u) % slots;
    s = rma::put_nbi<G>(ep, dst + std::size_t{slot} * 512, src + (gid % 64) * 512, bytes, 1);
  }
  if (s == Status::kOk) s = rma::quiet<G>(ep);
  if (s != Status::kOk && G::index() == 0) atomicMax(st, static_cast<std::uint32_t>(s));
}

/// The rounds of a raw ping-pong: rank 0 puts round i then waits for it, rank 1 waits then puts;
/// false as soon as a wait times out.
template <class Put, class Wait>
__device__ bool raw_rounds(int rank, int warmup, int iters, LoopClock& clock, Put& put, Wait& wait) {
  for (int i = 1; i <= warmup + iters; ++i) {
    clock.begin(i);
    const auto round = static_cast<std::uint32_t>(i);
    bool ok = true;
    if (rank == 0) {
      put(round);
      ok = wait(round);
    } else {
      ok = wait(round);
      if (ok) put(round);
    }
    if (!ok) return false;
    clock.end(i);
  }
  return true;
}

/// Anchor: raw ping-pong with the flag in every 8-byte word ({4 bytes data, 4 bytes flag}),
/// stored straight to the peer's memory: what a put_signal of 8 bytes could cost at best.
__global__ void raw_flag_pingpong(int rank, int variant, std::uint64_t* mine, std::uint64_t* theirs, int warmup,
                                  int iters, std::uint64_t* cycles, Timing* timing, gv::Budget budget,
                                  std::uint32_t* st, Place place) {
  if (!take_block(place)) return;
  auto put = [&](std::uint32_t i) {
    const std::uint64_t w = (std::uint64_t{i} << 32) | (0xabc00000u + i);
    reinterpret_cast<volatile std::uint64_t*>(theirs)[0] = w;
    if (variant == 1) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    if (variant == 2) asm volatile("fence.acq_rel.sys;" ::: "memory");
    reinterpret_cast<volatile std::uint64_t*>(theirs)[1] = w;
  };
  // Bounded like every wait of the library (the raw poll itself, the clock read every 1024 polls).
  // Both words are loaded before either is tested: with the tests joined by ||, the second word's
  // load waited for the first one's test, a second round trip once the first word had come (one
  // H200, ranks on SMs 0 and 1: 0.35-0.44 us against 0.28 with both loads in flight).
  auto wait = [&](std::uint32_t i) {
    const volatile std::uint64_t* m = mine;
    const std::uint64_t start = gtimer();
    for (std::uint32_t n = 1;; ++n) {
      const std::uint64_t a = m[0], b = m[1];
      if (static_cast<std::uint32_t>(a >> 32) == i && static_cast<std::uint32_t>(b >> 32) == i) return true;
      if ((n & 1023u) == 0 && gtimer() - start > budget.ns) return false;
    }
  };
  LoopClock clock{warmup, cycles, rank == 0};
  if (!raw_rounds(rank, warmup, iters, clock, put, wait)) {
    *st = static_cast<std::uint32_t>(Status::kTimeout);
    return;
  }
  clock.finish(timing);
}

/// Anchor: put_signal's floor with the data in memory, as a put has it: the group copies `bytes`
/// from `src` to the peer (16-byte words, all of a member's loads before its stores), syncs,
/// and its leader fences at system scope (kSys) or device scope (a peer on this GPU: the scope
/// put_signal releases at there) and stores the round into the peer's flag; the waiting leader
/// polls its flag with acquire loads (what consuming the data needs), then syncs.
template <class G, bool kSys>
__global__ void raw_put_pingpong(int rank, const uint4* src, uint4* theirs, std::size_t bytes, std::uint64_t* mine_flag,
                                 std::uint64_t* their_flag, int warmup, int iters, std::uint64_t* cycles,
                                 Timing* timing, gv::Budget budget, std::uint32_t* st, Place place) {
  if (!take_block(place)) return;
  constexpr unsigned kInFlight = std::is_same_v<G, rma::Thread> ? 16 : 4;  // as rma's copies
  const unsigned me = G::index(), cnt = G::count();
  const std::size_t words = bytes / 16;
  auto put = [&](std::uint32_t i) {
    for (std::size_t w0 = me; w0 < words; w0 += kInFlight * cnt) {
      uint4 v[kInFlight];
#pragma unroll
      for (unsigned j = 0; j < kInFlight; ++j)
        if (w0 + j * cnt < words) v[j] = src[w0 + j * cnt];
#pragma unroll
      for (unsigned j = 0; j < kInFlight; ++j)
        if (w0 + j * cnt < words) theirs[w0 + j * cnt] = v[j];
    }
    if (bytes % 16 != 0 && me == 0)  // 8 bytes: one 8-byte word
      reinterpret_cast<std::uint64_t*>(theirs)[words * 2] = reinterpret_cast<const std::uint64_t*>(src)[words * 2];
    G::sync();
    if (me == 0) {
      if constexpr (kSys) asm volatile("fence.acq_rel.sys;" ::: "memory");
      else asm volatile("fence.acq_rel.gpu;" ::: "memory");
      asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(their_flag), "l"(std::uint64_t{i}) : "memory");
    }
  };
  auto wait = [&](std::uint32_t i) {
    bool ok = true;
    if (me == 0) {
      const std::uint64_t start = gtimer();
      std::uint64_t v = 0;
      for (std::uint32_t n = 1;; ++n) {
        asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(mine_flag) : "memory");
        if (v >= i) break;
        if ((n & 1023u) == 0 && gtimer() - start > budget.ns) {
          ok = false;
          break;
        }
      }
    }
    return G::from_leader(static_cast<std::uint32_t>(ok)) != 0;
  };
  LoopClock clock{warmup, cycles, rank == 0 && me == 0};
  if (!raw_rounds(rank, warmup, iters, clock, put, wait)) {
    if (me == 0) *st = static_cast<std::uint32_t>(Status::kTimeout);
    return;
  }
  clock.finish(timing);
}

/// Every member's `ok`, and a sync of the group (a block's barrier, a warp's vote).
template <class G>
__device__ __forceinline__ bool group_all(bool ok) {
  if constexpr (std::is_same_v<G, rma::Block>) return __syncthreads_and(ok) != 0;
  else if constexpr (std::is_same_v<G, rma::Warp>) return __all_sync(0xffffffffu, ok) != 0;
  else return ok;
}

/// Every lane of this member's warp's `v` (a thread's own): a warp or a block's warp leaves a
/// poll together (gv_rma's blocks are whole warps).
template <class G>
__device__ __forceinline__ bool warp_all(bool v) {
  if constexpr (std::is_same_v<G, rma::Thread>) return v;
  else return __all_sync(0xffffffffu, v) != 0;
}

/// Anchor: the LL protocol's own floor, written by hand. Each member stores its 8 bytes of `src`
/// as one flagged line ({4 data bytes, round} twice, one 16-byte relaxed store) straight into the
/// peer's buffer; the waiting member polls its line of its own buffer with 16-byte relaxed loads
/// until both flags carry the round (a warp's lanes, those without a line too, leave the poll on
/// one vote: lanes that left alone kept the warp diverged, 0.43 against 0.31 us a round from a
/// warp at 8-128 B on one H200), copies the data to `out`, and the group syncs. No argument
/// checks, header, credit word, abort word or poll batches: what an LlChannel round costs at least.
/// One line a member: up to 8 B from a thread, 256 B from a warp, 4 KiB from a block of 512.
template <class G>
__global__ void raw_ll_pingpong(int rank, const std::uint64_t* src, std::uint64_t* mine, std::uint64_t* theirs,
                                std::uint64_t* out, std::size_t bytes, int warmup, int iters, std::uint64_t* cycles,
                                Timing* timing, gv::Budget budget, std::uint32_t* st, Place place) {
  if (!take_block(place)) return;
  const unsigned me = G::index();
  const bool has_line = me < bytes / 8;
  auto put = [&](std::uint32_t i) {
    if (!has_line) return;
    const std::uint64_t d = src[me], flag = std::uint64_t{i} << 32;
    asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(theirs + 2 * me), "l"(flag | (d & 0xffffffffu)),
                 "l"(flag | (d >> 32))
                 : "memory");
  };
  auto wait = [&](std::uint32_t i) {
    bool ok = true;
    const std::uint64_t start = gtimer();
    std::uint64_t a = 0, b = 0;
    for (std::uint32_t n = 1;; ++n) {
      bool got = true;
      if (has_line) {
        asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(mine + 2 * me) : "memory");
        got = static_cast<std::uint32_t>(a >> 32) == i && static_cast<std::uint32_t>(b >> 32) == i;
      }
      if (warp_all<G>(got)) break;
      if ((n & 1023u) == 0 && !warp_all<G>(gtimer() - start <= budget.ns)) {
        ok = false;
        break;
      }
    }
    if (has_line) out[me] = (b << 32) | (a & 0xffffffffu);
    return group_all<G>(ok);
  };
  LoopClock clock{warmup, cycles, rank == 0 && me == 0};
  if (!raw_rounds(rank, warmup, iters, clock, put, wait)) {
    if (me == 0) *st = static_cast<std::uint32_t>(Status::kTimeout);
    return;
  }
  clock.finish(timing);
}

// ---- host side -----------------------------------------------------------------------------

struct Options {
  std::vector<Transport> transports{Transport::kP2p, Transport::kIb};
  std::vector<std::string> tests{"p", "put_signal", "ll", "put", "get", "atomics", "bw", "rate", "anchors"};
  int iters = 1000;
  std::size_t max_bytes = std::size_t{4} << 20;
  std::size_t bw_max = std::size_t{1} << 30;
  std::string json;  ///< --json FILE: rows appended there too
  int sms[2] = {-1, -1};  ///< --sms A,B: the SMs of rank 0's and rank 1's ping-pong blocks
  int placements = 1;     ///< --placements N: each ping-pong row at N placements of its words
  unsigned block_threads = 512;  ///< --block-threads N: the threads of a block-scope row
};

/// Bytes between placements: 17 lines of 256 B, so that each placement's words fall on other
/// L2 lines and another 4 KiB page. At most kMaxPlacements.
constexpr std::size_t kPlaceStride = 17 * 256;
constexpr int kMaxPlacements = 16;
/// Signal words a row uses (the first 4 KiB of a placement's signal area).
constexpr std::size_t kSigBytes = 4096;

bool wants(const Options& o, const std::string& t) { return std::find(o.tests.begin(), o.tests.end(), t) != o.tests.end(); }

/// Two ranks, their streams and the buffers every test shares.
struct Pair {
  std::vector<std::unique_ptr<gv::World>> w;
  cudaStream_t s[2]{};
  std::byte* buf[2]{};    // destination area (bw: the whole size)
  std::byte* src[2]{};    // source area
  std::uint64_t* sig[2]{};
  std::uint64_t* cycles = nullptr;  // rank 0, host-mapped
  Timing* timing = nullptr;
  std::uint32_t* st[2]{};
  std::uint64_t* sink = nullptr;
  std::size_t area = 0;
  Transport t;
  int sms[2] = {-1, -1};              ///< --sms: each rank's SM (-1: not chosen)
  std::size_t shift = 0;              ///< the current placement: bytes into buf and sig (b(), sg())
  int sm_count = 0;                   ///< SMs of GPU 0
  std::uint32_t* place_words[2]{};    ///< each rank's Place words (its heap)

  Pair(Transport tr, std::size_t area_bytes, int max_iters) : area(area_bytes), t(tr) {
    // Streams and host memory before the World: with ib the software HCA's engine is resident
    // from then on, and an allocation could wait for it.
    int gpus = 0;
    GV_BENCH_CUDA(cudaGetDeviceCount(&gpus));
    for (int r = 0; r < 2; ++r) {
      GV_BENCH_CUDA(cudaSetDevice(r % gpus));
      GV_BENCH_CUDA(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    }
    GV_BENCH_CUDA(cudaSetDevice(0));
    GV_BENCH_CUDA(cudaMallocHost(&cycles, sizeof(std::uint64_t) * static_cast<std::size_t>(max_iters)));
    GV_BENCH_CUDA(cudaMallocHost(&timing, sizeof(Timing)));
    GV_BENCH_CUDA(cudaMallocHost(&sink, sizeof(std::uint64_t)));
    gv::WorldOptions o;
    o.memory = gv::WorldOptions::Memory::kGpu;
    o.transport = tr;
    o.heap_bytes = 2 * area_bytes + (std::size_t{16} << 20);
    o.budget = gv::Budget{30'000'000'000ull};
    w = gv::World::create_local(2, o);
    for (int r = 0; r < 2; ++r) {
      GV_BENCH_CUDA(cudaSetDevice(w[r]->gpu()));
      buf[r] = static_cast<std::byte*>(w[r]->alloc(area_bytes));
      src[r] = static_cast<std::byte*>(w[r]->alloc(area_bytes));
      sig[r] = static_cast<std::uint64_t*>(w[r]->alloc(kSigBytes + kPlaceStride * (kMaxPlacements - 1)));
      st[r] = static_cast<std::uint32_t*>(w[r]->alloc(64));
      place_words[r] = static_cast<std::uint32_t*>(w[r]->alloc(64));
      GV_BENCH_CUDA(cudaMemsetAsync(src[r], 0x5a, area_bytes, s[r]));
      GV_BENCH_CUDA(cudaStreamSynchronize(s[r]));
    }
  }
  ~Pair() {
    for (int r = 0; r < 2; ++r) {
      (void)cudaSetDevice(w[r]->gpu());
      (void)cudaStreamSynchronize(s[r]);
    }
    w.clear();  // engines stop first
    for (int r = 0; r < 2; ++r) (void)cudaStreamDestroy(s[r]);
    (void)cudaFreeHost(cycles);
    (void)cudaFreeHost(timing);
    (void)cudaFreeHost(sink);
  }
  const Endpoint& ep(int r) const { return w[r]->endpoint(); }
  /// Rank r's buffer area and signal words at the current placement (`shift` bytes in).
  std::byte* b(int r) const { return buf[r] + shift; }
  std::uint64_t* sg(int r) const { return sig[r] + shift / sizeof(std::uint64_t); }
  /// Ping-pong kernels: rank r's placement, and their grid (one block, or two an SM to place one).
  Place place(int r) const { return Place{sms[r], place_words[r]}; }
  unsigned grid() const { return sms[0] < 0 ? 1u : 2u * static_cast<unsigned>(sm_count); }
  void on(int r) const { GV_BENCH_CUDA(cudaSetDevice(w[r]->gpu())); }
  /// Zeroes the first `bytes` of both ranks' areas at the current placement: an LL buffer there
  /// starts again at round 1.
  void zero_areas(std::size_t bytes) {
    if (shift + bytes > area) throw gv::Error("gv_rma: a placement past the buffer area (raise --bw-max)");
    for (int r = 0; r < 2; ++r) {
      on(r);
      GV_BENCH_CUDA(cudaMemsetAsync(b(r), 0, bytes, s[r]));
      GV_BENCH_CUDA(cudaStreamSynchronize(s[r]));
    }
  }
  void reset() {
    for (int r = 0; r < 2; ++r) {
      on(r);
      GV_BENCH_CUDA(cudaMemsetAsync(sg(r), 0, kSigBytes, s[r]));
      GV_BENCH_CUDA(cudaMemsetAsync(st[r], 0, 64, s[r]));
      GV_BENCH_CUDA(cudaMemsetAsync(place_words[r], 0, 64, s[r]));
      GV_BENCH_CUDA(cudaStreamSynchronize(s[r]));
    }
  }
  /// Wait for both ranks; false (with a message) when a kernel reported a status. Throws
  /// gv::Error naming the cause when a rank's World failed (nothing more can run over it).
  bool finish(const char* what) {
    bool ok = true;
    for (int r = 0; r < 2; ++r) {
      on(r);
      GV_BENCH_CUDA(cudaStreamSynchronize(s[r]));
      std::uint32_t v = 0;
      GV_BENCH_CUDA(cudaMemcpyAsync(&v, st[r], 4, cudaMemcpyDeviceToHost, s[r]));
      GV_BENCH_CUDA(cudaStreamSynchronize(s[r]));
      if (v != 0) {
        std::fprintf(stderr, "gv_rma: %s over %s: rank %d: %s\n", what, rma::to_string(t), r, gv::to_string(static_cast<Status>(v)));
        ok = false;
      }
      if (sms[r] < 0) continue;
      std::uint32_t words[3] = {};
      GV_BENCH_CUDA(cudaMemcpyAsync(words, place_words[r], sizeof(words), cudaMemcpyDeviceToHost, s[r]));
      GV_BENCH_CUDA(cudaStreamSynchronize(s[r]));
      if (words[0] != 0 && words[2] != static_cast<std::uint32_t>(sms[r]))
        std::fprintf(stderr, "gv_rma: %s: rank %d ran on SM %u, not %d (no block of its grid landed there)\n", what, r,
                     words[2], sms[r]);
    }
    if (!ok)
      for (const auto& x : w) x->check();
    return ok;
  }
  /// Per-iteration microseconds (`halve`: half round trips).
  std::vector<double> samples(int iters, bool halve) const {
    const double ns_per_cycle = timing->cycles ? static_cast<double>(timing->ns) / static_cast<double>(timing->cycles) : 0;
    std::vector<double> us(static_cast<std::size_t>(iters));
    for (int i = 0; i < iters; ++i) us[static_cast<std::size_t>(i)] = static_cast<double>(cycles[i]) * ns_per_cycle / 1000.0 / (halve ? 2 : 1);
    return us;
  }
};

std::string g_device;
gv::bench::JsonLog g_log;

/// One latency row. `medians`: with more than one, the row ran at that many placements (`us`
/// holds all their samples, `iters` each); the JSON row adds placements, t_placed (their mean)
/// and t_placed_lo / t_placed_hi, and a line after the text row says the same.
void emit_latency(const std::string& test, const char* scope, const char* transport, std::size_t bytes,
                  int iters, const std::vector<double>& us, const std::vector<double>& medians = {}) {
  const auto s = gv::bench::summarize(us);
  char lead[64];
  std::snprintf(lead, sizeof(lead), "%-12s %-6s %-4s", test.c_str(), scope, transport);
  std::string extra = "\"test\":\"" + test + "\",\"scope\":\"" + scope + "\",\"transport\":\"" + transport + "\",";
  double placed = 0, lo = 0, hi = 0;
  if (medians.size() > 1) {
    for (double m : medians) placed += m;
    placed /= static_cast<double>(medians.size());
    lo = *std::min_element(medians.begin(), medians.end());
    hi = *std::max_element(medians.begin(), medians.end());
    char b[160];
    std::snprintf(b, sizeof(b), "\"placements\":%zu,\"t_placed\":%.3f,\"t_placed_lo\":%.3f,\"t_placed_hi\":%.3f,",
                  medians.size(), placed, lo, hi);
    extra += b;
  }
  g_log.row(gv::bench::latency_json("gv_rma", extra, bytes, static_cast<std::uint64_t>(iters), s));
  gv::bench::print_latency_row(stdout, bytes, static_cast<std::uint64_t>(iters), s, lead);
  if (medians.size() > 1)
    std::printf("#   %s %s %zu B: t_placed %.2f (mean of %zu placements' medians, %.2f-%.2f)\n", test.c_str(), scope,
                bytes, placed, medians.size(), lo, hi);
  std::fflush(stdout);
}

/// A ping-pong row at every placement (Options::placements): `launch` starts both ranks'
/// kernels at p's current placement (after p.reset()); the row is emitted once, from all of them.
/// A placement whose kernels report a status ends the row without one.
template <class Launch>
void placed_row(const Options& o, Pair& p, const char* test, const char* scope, const char* transport,
                std::size_t bytes, int iters, Launch&& launch) {
  std::vector<double> all, medians;
  bool ok = true;
  for (int k = 0; k < o.placements; ++k) {
    p.shift = static_cast<std::size_t>(k) * kPlaceStride;
    p.reset();
    launch();
    ok = p.finish(test);
    if (!ok) break;
    const std::vector<double> us = p.samples(iters, true);
    medians.push_back(gv::bench::summarize(us).typical);
    all.insert(all.end(), us.begin(), us.end());
  }
  p.shift = 0;
  if (ok) emit_latency(test, scope, transport, bytes, iters, all, medians);
}

void emit_rate(const std::string& test, const std::string& variant, const char* transport,
               std::size_t bytes, std::uint64_t iters, double gbs, double mmsgs) {
  g_log.row(gv::bench::rate_json("gv_rma", "\"test\":\"" + test + "\",\"variant\":\"" + variant + "\",\"transport\":\"" +
                                               transport + "\",",
                                  bytes, iters, gbs, mmsgs));
  std::printf("%-12s %-10s %-4s %-10zu %-12llu %-16.2f %.3f\n", test.c_str(), variant.c_str(), transport, bytes,
              static_cast<unsigned long long>(iters), gbs, mmsgs);
  std::fflush(stdout);
}

int iters_for(const Options& o, std::size_t bytes) {
  const std::size_t cap = (std::size_t{1} << 30) / std::max<std::size_t>(bytes, 1);
  return static_cast<int>(std::max<std::size_t>(20, std::min<std::size_t>(static_cast<std::size_t>(o.iters), cap)));
}

/// Threads a kernel of group G is launched with (G::count() means nothing on the host): a block's
/// are --block-threads, for the ping-pongs, put and get (512 at most, since the block kernels are
/// held to the 128 registers a block of 512 may have: compile.registers_gv_rma); the bandwidth
/// and rate rows keep their own.
template <class G>
unsigned threads_of(const Options& o) {
  return std::is_same_v<G, rma::Thread> ? 1u : (std::is_same_v<G, rma::Warp> ? 32u : o.block_threads);
}

template <class G>
void run_pingpong(Options& o, Pair& p, int op, const char* scope, std::size_t max_bytes) {
  const char* test = op == 0 ? "p" : "put_signal";
  const std::size_t first = op == 0 ? 8 : 8;
  const std::size_t last = op == 0 ? 8 : max_bytes;
  for (std::size_t bytes = first; bytes <= last; bytes *= 2) {
    const int iters = iters_for(o, bytes), warmup = std::max(10, iters / 10);
    placed_row(o, p, test, scope, rma::to_string(p.t), bytes, iters, [&] {
      for (int r : {1, 0}) {
        p.on(r);
        auto* k = op == 0 ? pingpong<G, 0> : pingpong<G, 1>;
        k<<<p.grid(), threads_of<G>(o), 0, p.s[r]>>>(p.ep(r), p.b(r), p.src[r], nullptr, bytes, p.sg(r), warmup, iters,
                                                     p.cycles, p.timing, p.st[r], p.place(r));
        GV_BENCH_CUDA(cudaGetLastError());
      }
    });
  }
}

template <class G, int kOp = 2>
void run_ll(Options& o, Pair& p, const char* scope, std::size_t max_bytes) {
  const char* test = kOp == 4 ? "ll_wait_put" : (kOp == 3 ? "ll_channel" : "ll");
  for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
    const int iters = iters_for(o, bytes), warmup = std::max(10, iters / 10);
    // A fresh buffer for every row and placement: its rounds start again at seq 1.
    const std::size_t box = (rma::ll_bytes(bytes) + 255) & ~std::size_t{255};
    placed_row(o, p, test, scope, rma::to_string(p.t), bytes, iters, [&] {
      p.zero_areas(2 * box);
      for (int r : {1, 0}) {
        p.on(r);
        pingpong<G, kOp><<<p.grid(), threads_of<G>(o), 0, p.s[r]>>>(p.ep(r), p.b(r), p.src[r], p.b(r) + box, bytes,
                                                                    p.sg(r), warmup, iters, p.cycles, p.timing, p.st[r],
                                                                    p.place(r));
        GV_BENCH_CUDA(cudaGetLastError());
      }
    });
  }
}

template <class G, int kOp>
void run_one_sided(Options& o, Pair& p, const char* scope, std::size_t max_bytes) {
  static const char* names[] = {"put", "get", "fetch_add", "compare_swap"};
  constexpr bool atomic = kOp >= 2;
  for (std::size_t bytes = 8; bytes <= (atomic ? 8 : max_bytes); bytes *= 2) {
    const int iters = iters_for(o, bytes), warmup = std::max(10, iters / 10);
    p.reset();
    p.on(0);
    const unsigned threads = threads_of<G>(o);
    // Local buffer in the heap (ib needs registered memory): src of rank 0.
    // Atomics walk the words at the start of the area (chain_word), the raw chains' words.
    auto* words = reinterpret_cast<std::uint64_t*>(p.buf[0]);
    one_sided<G, kOp><<<1, threads, 0, p.s[0]>>>(p.ep(0), p.buf[0], p.src[0], bytes, words, warmup, iters, p.cycles,
                                                 p.timing, p.st[0], p.sink);
    GV_BENCH_CUDA(cudaGetLastError());
    if (!p.finish(names[kOp])) continue;
    emit_latency(names[kOp], scope, rma::to_string(p.t), bytes, iters, p.samples(iters, false));
  }
}

/// Milliseconds `launch` (work enqueued on rank 0's stream) takes, by events around it; false
/// (with a message) when a kernel of either rank reported a status.
template <class Launch>
bool time_on_rank0(Pair& p, const char* what, float& ms, Launch&& launch) {
  p.reset();
  p.on(0);
  cudaEvent_t a, b;
  GV_BENCH_CUDA(cudaEventCreate(&a));
  GV_BENCH_CUDA(cudaEventCreate(&b));
  GV_BENCH_CUDA(cudaEventRecord(a, p.s[0]));
  launch();
  GV_BENCH_CUDA(cudaEventRecord(b, p.s[0]));
  GV_BENCH_CUDA(cudaGetLastError());
  const bool ok = p.finish(what);
  GV_BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  GV_BENCH_CUDA(cudaEventDestroy(a));
  GV_BENCH_CUDA(cudaEventDestroy(b));
  return ok;
}

void run_bw(Options& o, Pair& p) {
  for (const int ctas : {1, 8, 32, 132}) {
    for (std::size_t bytes = 4096; bytes <= std::min(o.bw_max, p.area); bytes *= 4) {
      const int iters = static_cast<int>(std::max<std::size_t>(5, std::min<std::size_t>(1000, (std::size_t{8} << 30) / bytes)));
      p.reset();
      p.on(0);
      put_bw<<<ctas, 512, 0, p.s[0]>>>(p.ep(0), p.buf[0], p.src[0], bytes, 1, p.st[0]);  // warm-up
      if (!p.finish("bw")) continue;
      float ms = 0;
      if (!time_on_rank0(p, "bw", ms, [&] { put_bw<<<ctas, 512, 0, p.s[0]>>>(p.ep(0), p.buf[0], p.src[0], bytes, iters, p.st[0]); }))
        continue;
      const double gbs = static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9;
      emit_rate("bw", std::to_string(ctas) + "cta", rma::to_string(p.t), bytes, static_cast<std::uint64_t>(iters), gbs, 0);
    }
  }
}

void run_rate(Options& o, Pair& p) {
  const std::uint32_t slots = static_cast<std::uint32_t>(std::min<std::size_t>(p.area / 512, 1u << 20));
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{64}, std::size_t{512}}) {
    // ib: fewer posters than the 33792 of p2p, which left the GPU engine's lanes full past the
    // budget (S5-2: 'queue full').
    const int ctas = p.t == Transport::kIb ? 16 : 132, threads = p.t == Transport::kIb ? 64 : 256;
    const int iters = p.t == Transport::kIb ? 20 : 200;
    float ms = 0;
    const bool ok = time_on_rank0(p, "rate", ms, [&] {
      if (bytes == 512) put_rate<rma::Warp><<<ctas, threads, 0, p.s[0]>>>(p.ep(0), p.buf[0], p.src[0], bytes, slots, iters, p.st[0]);
      else put_rate<rma::Thread><<<ctas, threads, 0, p.s[0]>>>(p.ep(0), p.buf[0], p.src[0], bytes, slots, iters, p.st[0]);
    });
    if (!ok) continue;
    const double msgs = static_cast<double>(ctas) * threads / (bytes == 512 ? 32 : 1) * iters;
    emit_rate("rate", bytes == 512 ? "warp" : "thread", rma::to_string(p.t), bytes, static_cast<std::uint64_t>(iters),
              msgs * static_cast<double>(bytes) / (ms * 1e-3) / 1e9, msgs / (ms * 1e-3) / 1e6);
  }
}

/// Anchor: a chain of raw fetch-and-adds on the peer's words (rma's chain's), each operand depending
/// on the value fetched before (consumed before the clock), at gpu scope (variant 0: atomicAdd,
/// what a one-GPU program uses) or system scope (1: atomicAdd_system, the scope rma's atomics
/// take, since the word's other users are on another GPU).
__global__ void raw_fetch_add_chain(int variant, unsigned long long* theirs, int warmup, int iters,
                                    std::uint64_t* cycles, Timing* timing, std::uint64_t* sink) {
  unsigned long long carry = 0;
  LoopClock clock{warmup, cycles, true};
  for (int i = 1; i <= warmup + iters; ++i) {
    clock.begin(i);
    unsigned long long* at = gv::bench::chain_word(theirs, i);
    carry = variant == 0 ? atomicAdd(at, (carry & 1) + 1) : atomicAdd_system(at, (carry & 1) + 1);
    settle(carry);
    clock.end(i);
  }
  clock.finish(timing);
  *sink = carry;
}

void run_anchors(Options& o, Pair& p) {
  // Raw flag ping-pong through the peer's mapped memory.
  const int iters = o.iters, warmup = std::max(10, iters / 10);
  p.reset();
  // The peer's copy of symmetric `x` of rank r (in r's address space).
  auto peer_of = [&](int r, void* x) { return p.w[r]->ptr(x, 1 - r); };
  if (peer_of(0, p.sig[0]) != nullptr && peer_of(1, p.sig[1]) != nullptr) {
    // 0: flag in every word (no fence); 1, 2: data word, a release fence at gpu / system scope,
    // then the flag word: the floor of a fenced put_signal at each scope (gpu scope is not
    // enough for a peer on another GPU; it is measured to show what the system scope costs).
    static const char* names[] = {"raw_flag", "raw_fence_gpu", "raw_fence_sys"};
    for (int variant = 0; variant < 3; ++variant) {
      placed_row(o, p, names[variant], "thread", "peer", 8, iters, [&] {
        for (int r : {1, 0}) {
          p.on(r);
          auto* theirs = static_cast<std::uint64_t*>(peer_of(r, p.sg(r) + 16));
          raw_flag_pingpong<<<p.grid(), 1, 0, p.s[r]>>>(r, variant, p.sg(r) + 16, theirs, warmup, iters, p.cycles,
                                                        p.timing, p.ep(r).budget, p.st[r], p.place(r));
          GV_BENCH_CUDA(cudaGetLastError());
        }
      });
    }
    // put_signal's floor with its data in memory: thread and block scope, 8 B..4 KiB, fenced at
    // system scope, and at device scope where the ranks share a GPU (the scope put_signal takes
    // there: Endpoint::direct_same_gpu).
    const bool same_gpu = p.ep(0).direct_same_gpu != 0;
    for (const bool sys : {true, false}) {
      if (!sys && !same_gpu) continue;
      for (const bool block : {false, true}) {
        for (std::size_t bytes = 8; bytes <= std::min<std::size_t>(4096, p.area); bytes *= 2) {
          placed_row(o, p, sys ? "raw_put_sys" : "raw_put_gpu", block ? "block" : "thread", "peer", bytes, iters, [&] {
            for (int r : {1, 0}) {
              p.on(r);
              const auto* src = reinterpret_cast<const uint4*>(p.src[r]);
              auto* their_buf = static_cast<uint4*>(peer_of(r, p.b(r)));
              auto* their_flag = static_cast<std::uint64_t*>(peer_of(r, p.sg(r) + 32));
              const auto kernel = block ? (sys ? raw_put_pingpong<rma::Block, true> : raw_put_pingpong<rma::Block, false>)
                                        : (sys ? raw_put_pingpong<rma::Thread, true> : raw_put_pingpong<rma::Thread, false>);
              kernel<<<p.grid(), block ? threads_of<rma::Block>(o) : 1u, 0, p.s[r]>>>(
                  r, src, their_buf, bytes, p.sg(r) + 32, their_flag, warmup, iters, p.cycles, p.timing, p.ep(r).budget,
                  p.st[r], p.place(r));
              GV_BENCH_CUDA(cudaGetLastError());
            }
          });
        }
      }
    }
    // The LL protocol's floor (one line a member; the buffers zeroed, since rounds start at 1).
    constexpr std::size_t kLlArea = 8192;  // 512 lines; `out` follows
    for (const char* scope : {"thread", "warp", "block"}) {
      const std::size_t top =
          scope[0] == 't' ? 8 : (scope[0] == 'w' ? 256 : 8 * std::size_t{threads_of<rma::Block>(o)});
      for (std::size_t bytes = 8; bytes <= std::min(top, p.area / 4); bytes *= 2) {
        placed_row(o, p, "raw_ll", scope, "peer", bytes, iters, [&] {
          p.zero_areas(2 * kLlArea);
          for (int r : {1, 0}) {
            p.on(r);
            const auto* src = reinterpret_cast<const std::uint64_t*>(p.src[r]);
            auto* mine = reinterpret_cast<std::uint64_t*>(p.b(r));
            auto* theirs = static_cast<std::uint64_t*>(peer_of(r, p.b(r)));
            auto* out = reinterpret_cast<std::uint64_t*>(p.b(r) + kLlArea);
            const gv::Budget budget = p.ep(r).budget;
            if (scope[0] == 't')
              raw_ll_pingpong<rma::Thread><<<p.grid(), 1, 0, p.s[r]>>>(r, src, mine, theirs, out, bytes, warmup, iters,
                                                                        p.cycles, p.timing, budget, p.st[r], p.place(r));
            else if (scope[0] == 'w')
              raw_ll_pingpong<rma::Warp><<<p.grid(), 32, 0, p.s[r]>>>(r, src, mine, theirs, out, bytes, warmup, iters,
                                                                       p.cycles, p.timing, budget, p.st[r], p.place(r));
            else
              raw_ll_pingpong<rma::Block><<<p.grid(), threads_of<rma::Block>(o), 0, p.s[r]>>>(
                  r, src, mine, theirs, out, bytes, warmup, iters, p.cycles, p.timing, budget, p.st[r], p.place(r));
            GV_BENCH_CUDA(cudaGetLastError());
          }
        });
      }
    }
    // The floor of rma::fetch_add over p2p: the same chain on raw atomics at each scope.
    static const char* fadd_names[] = {"raw_fadd_gpu", "raw_fadd_sys"};
    for (int variant = 0; variant < 2; ++variant) {
      p.reset();
      p.on(0);
      auto* words = static_cast<unsigned long long*>(p.w[0]->ptr(p.buf[0], 1));
      raw_fetch_add_chain<<<1, 1, 0, p.s[0]>>>(variant, words, warmup, iters, p.cycles, p.timing, p.sink);
      GV_BENCH_CUDA(cudaGetLastError());
      if (p.finish(fadd_names[variant])) emit_latency(fadd_names[variant], "thread", "peer", 8, iters, p.samples(iters, false));
    }
  }
  // cudaMemcpyPeerAsync from rank 0's heap to rank 1's.
  for (std::size_t bytes = 4096; bytes <= std::min(o.bw_max, p.area); bytes *= 4) {
    const int n = static_cast<int>(std::max<std::size_t>(5, std::min<std::size_t>(1000, (std::size_t{8} << 30) / bytes)));
    p.on(0);
    cudaEvent_t a, b;
    GV_BENCH_CUDA(cudaEventCreate(&a));
    GV_BENCH_CUDA(cudaEventCreate(&b));
    GV_BENCH_CUDA(cudaMemcpyPeerAsync(p.buf[1], p.w[1]->gpu(), p.src[0], p.w[0]->gpu(), bytes, p.s[0]));
    GV_BENCH_CUDA(cudaEventRecord(a, p.s[0]));
    for (int i = 0; i < n; ++i)
      GV_BENCH_CUDA(cudaMemcpyPeerAsync(p.buf[1], p.w[1]->gpu(), p.src[0], p.w[0]->gpu(), bytes, p.s[0]));
    GV_BENCH_CUDA(cudaEventRecord(b, p.s[0]));
    GV_BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    GV_BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    GV_BENCH_CUDA(cudaEventDestroy(a));
    GV_BENCH_CUDA(cudaEventDestroy(b));
    emit_rate("memcpy_peer", "copy", "peer", bytes, static_cast<std::uint64_t>(n),
              static_cast<double>(bytes) * n / (ms * 1e-3) / 1e9, 0);
  }
}

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: gv_rma [--transport p2p|ib|both] [--test LIST] [-n ITERS] [--max-bytes B] [--bw-max B] [--json FILE] [--sms A,B] [--placements N]\n"
               "              [--block-threads N]\n"
               "  --transport  which rma transports to measure (default both)\n"
               "  --test       comma-separated: p,put_signal,ll,put,get,atomics,bw,rate,anchors (default all)\n"
               "  -n           iterations per latency row (default 1000; fewer for large messages)\n"
               "  --max-bytes  largest latency message (default 4194304)\n"
               "  --bw-max     largest bandwidth message (default 1073741824; ib rows stop at 64 MiB)\n"
               "  --json FILE  also append the rows to FILE as JSON, after a metadata object (commit, device, date, command)\n"
               "  --sms A,B    run rank 0's ping-pong blocks on SM A of its GPU and rank 1's on SM B (default: wherever\n"
               "               they land; on one GPU the pair moves a small round by up to 0.15 us)\n"
               "  --placements N  run each ping-pong row (p, put_signal, ll, the raw anchors) with its buffers and\n"
               "               signal words at N places (4352 B apart, N <= 16; default 1) and add t_placed, the mean\n"
               "               of the N medians: where a few words lie in the L2 moves a small round by up to ~0.1 us\n"
               "  --block-threads N  threads of the block-scope rows (the ping-pongs, put, get; not bw or rate):\n"
               "               a multiple of 32 up to 512 (default 512); a block's LL round grows with its threads\n"
               "Two ranks in this process: GPUs 0 and 1, or both on GPU 0 when there is one GPU.\n");
}

}  // namespace

int main(int argc, char** argv) try {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gv_rma: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--json") {
      o.json = value("--json");
    } else if (a == "--transport") {
      const std::string v = value("--transport");
      if (v == "p2p") o.transports = {Transport::kP2p};
      else if (v == "ib") o.transports = {Transport::kIb};
      else if (v == "both") o.transports = {Transport::kP2p, Transport::kIb};
      else { std::fprintf(stderr, "gv_rma: --transport %s: use p2p, ib or both\n", v.c_str()); return 2; }
    } else if (a == "--test") {
      o.tests.clear();
      std::string v = value("--test");
      for (std::size_t pos = 0; pos <= v.size();) {
        const std::size_t c = v.find(',', pos);
        const std::string t = v.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        static const char* known[] = {"p", "put_signal", "ll", "put", "get", "atomics", "bw", "rate", "anchors"};
        if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return t == k; }) == std::end(known)) {
          std::fprintf(stderr, "gv_rma: unknown test '%s'\n", t.c_str());
          return 2;
        }
        o.tests.push_back(t);
        if (c == std::string::npos) break;
        pos = c + 1;
      }
    } else if (a == "--sms") {
      const std::string v = value("--sms");
      const std::size_t c = v.find(',');
      try {
        if (c == std::string::npos) throw gv::bench::UsageError("--sms " + v + ": give two SMs, A,B");
        for (int r = 0; r < 2; ++r)
          o.sms[r] = static_cast<int>(gv::bench::parse_uint("--sms", r == 0 ? v.substr(0, c) : v.substr(c + 1), 0, 1023));
      } catch (const gv::bench::UsageError& e) {
        std::fprintf(stderr, "gv_rma: %s\n", e.what());
        return 2;
      }
    } else if (a == "--block-threads") {
      try {
        const std::string v = value("--block-threads");
        o.block_threads = static_cast<unsigned>(gv::bench::parse_uint(a, v, 32, 512));
        if (o.block_threads % 32 != 0)
          throw gv::bench::UsageError("--block-threads " + v + ": give a multiple of 32 (a block of whole warps)");
      } catch (const gv::bench::UsageError& e) {
        std::fprintf(stderr, "gv_rma: %s\n", e.what());
        return 2;
      }
    } else if (a == "-n" || a == "--max-bytes" || a == "--bw-max" || a == "--placements") {
      try {
        if (a == "-n") o.iters = static_cast<int>(gv::bench::parse_uint(a, value("-n"), 1, 1'000'000));
        else if (a == "--placements")
          o.placements = static_cast<int>(gv::bench::parse_uint(a, value("--placements"), 1, kMaxPlacements));
        else if (a == "--max-bytes") o.max_bytes = gv::bench::parse_uint(a, value("--max-bytes"), 8, std::size_t{1} << 30);
        else o.bw_max = gv::bench::parse_uint(a, value("--bw-max"), 4096, std::size_t{4} << 30);
      } catch (const gv::bench::UsageError& e) {
        std::fprintf(stderr, "gv_rma: %s\n", e.what());
        return 2;
      }
    } else {
      std::fprintf(stderr, "gv_rma: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::fprintf(stderr, "gv_rma: no NVIDIA GPU or driver found\n");
    return 1;
  }
  cudaDeviceProp prop{};
  GV_BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_device = std::string(prop.name) + (gpus >= 2 ? " x2 (ranks on GPUs 0 and 1)" : " x1 (both ranks on GPU 0)");
  if (o.sms[0] >= prop.multiProcessorCount || o.sms[1] >= prop.multiProcessorCount ||
      (gpus < 2 && o.sms[0] >= 0 && o.sms[0] == o.sms[1])) {
    std::fprintf(stderr, "gv_rma: --sms %d,%d: the GPU has SMs 0-%d, and two ranks on one GPU need two SMs\n", o.sms[0],
                 o.sms[1], prop.multiProcessorCount - 1);
    return 2;
  }
  if (!o.json.empty()) g_log.open(o.json, g_device, argc, argv);
  std::printf("# gv_rma on %s\n", g_device.c_str());
  if (o.sms[0] >= 0) std::printf("# ping-pong ranks' blocks on SMs %d (rank 0) and %d (rank 1)\n", o.sms[0], o.sms[1]);
  if (o.block_threads != 512) std::printf("# block-scope rows from blocks of %u threads\n", o.block_threads);

  bool failed = false;
  for (const Transport t : o.transports) {
    try {
      const std::size_t area = t == Transport::kIb ? std::min<std::size_t>(o.bw_max, std::size_t{64} << 20) : std::max(o.bw_max, o.max_bytes);
      // Room for the last placement's rows (an LL box and its `out` of up to 2 * ll_bytes(4 KiB)).
      const std::size_t placed = kPlaceStride * static_cast<std::size_t>(o.placements - 1) + (std::size_t{64} << 10);
      Pair p(t, std::max({area, o.max_bytes, gv::bench::kChainBytes, placed}), o.iters);
      p.sms[0] = o.sms[0];
      p.sms[1] = o.sms[1];
      p.sm_count = prop.multiProcessorCount;
      {
        std::printf("\n# transport %s: latency rows [usec]\n", rma::to_string(t));
        gv::bench::print_latency_header(stdout, "test         scope  tr  ");
      }
      if (wants(o, "p")) run_pingpong<rma::Thread>(o, p, 0, "thread", 8);
      if (wants(o, "put_signal")) {
        run_pingpong<rma::Thread>(o, p, 1, "thread", std::min<std::size_t>(o.max_bytes, 65536));
        run_pingpong<rma::Warp>(o, p, 1, "warp", std::min<std::size_t>(o.max_bytes, std::size_t{1} << 20));
        run_pingpong<rma::Block>(o, p, 1, "block", o.max_bytes);
      }
      if (wants(o, "ll")) {
        run_ll<rma::Thread>(o, p, "thread", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Warp>(o, p, "warp", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Block>(o, p, "block", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Thread, 3>(o, p, "thread", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Warp, 3>(o, p, "warp", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Block, 3>(o, p, "block", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Thread, 4>(o, p, "thread", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Warp, 4>(o, p, "warp", std::min<std::size_t>(o.max_bytes, 4096));
        run_ll<rma::Block, 4>(o, p, "block", std::min<std::size_t>(o.max_bytes, 4096));
      }
      if (wants(o, "put")) {
        run_one_sided<rma::Thread, 0>(o, p, "thread", std::min<std::size_t>(o.max_bytes, 65536));
        run_one_sided<rma::Block, 0>(o, p, "block", o.max_bytes);
      }
      if (wants(o, "get")) {
        run_one_sided<rma::Thread, 1>(o, p, "thread", std::min<std::size_t>(o.max_bytes, 65536));
        run_one_sided<rma::Block, 1>(o, p, "block", o.max_bytes);
      }
      if (wants(o, "atomics")) {
        run_one_sided<rma::Thread, 2>(o, p, "thread", 8);
        run_one_sided<rma::Thread, 3>(o, p, "thread", 8);
      }
      if (wants(o, "bw") || wants(o, "rate") || wants(o, "anchors"))
        std::printf("\n# transport %s: rate rows\n%-12s %-10s %-4s %-10s %-12s %-16s %s\n", rma::to_string(t), "test",
                    "variant", "tr", "#bytes", "#iterations", "BW average[GB/s]", "MsgRate[Mmsg/s]");
      if (wants(o, "bw")) run_bw(o, p);
      if (wants(o, "rate")) run_rate(o, p);
      if (wants(o, "anchors") && t == Transport::kP2p) run_anchors(o, p);
    } catch (const gv::Error& e) {
      std::fprintf(stderr, "gv_rma: the rows over %s stop here: %s\n", rma::to_string(t), e.what());
      failed = true;
    }
  }
  return failed ? 1 : 0;
} catch (const std::exception& e) {  // a failed CUDA call (GV_BENCH_CUDA)
  std::fprintf(stderr, "gv_rma: %s\n", e.what());
  return 1;
}
