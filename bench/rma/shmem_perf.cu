// shmem_perf: the rows of gv_rma that NVSHMEM's perftest also measures, written in NVSHMEM's
// API only, so the same source builds against NVSHMEM (target nvshmem_perf, where NVSHMEM is
// found) and against gpuverbs' NVSHMEM face (target gv_shmem_perf): one program, two
// implementations, compared in one run (bench/rma/compare.py joins their JSON).
//
// Two PEs (launch with gvrun -n 2, or mpirun -n 2 with NVSHMEM_BOOTSTRAP=MPI for NVSHMEM).
// Rows: p ping-pong (8 B), putmem_signal ping-pong (thread 8 B, block 8 B and 4 KiB),
// fetch_add round trip (value consumed; each on the next of 32 words, chain_word), putmem_nbi_block
// bandwidth from 1/8/32/132 CTAs,
// scattered 64-byte putmem_nbi message rate (132 CTAs x 256 threads, distinct cache lines) to the
// peer, and the same to this PE's own heap (rate_self: the calls without the peer's mapping).
// Each bandwidth and rate row is the median of kSamples timed launches, with the least and the
// greatest beside it in the JSON (`lo`, `hi`): its spread within the run.
#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "cuda_check.hpp"
#include "device_clock.cuh"
#include "metadata.hpp"
#include "report.hpp"
#include "stats.hpp"

#ifndef SHMEM_PERF_IMPL
#define SHMEM_PERF_IMPL "unknown"
#endif

namespace {


using gv::bench::LoopClock;
using gv::bench::settle;
using gv::bench::Timing;

/// op 0: p of the round into `flag`; 1: putmem_signal (thread); 2: putmem_signal_block.
__global__ void pingpong(int op, char* buf, const char* src, std::size_t bytes, uint64_t* flag, int warmup, int iters,
                         std::uint64_t* cycles, Timing* timing) {
  const int me = nvshmem_my_pe(), peer = 1 - me;
  const bool leader = threadIdx.x == 0;
  LoopClock clock{warmup, cycles, me == 0 && leader};
  for (int i = 1; i <= warmup + iters; ++i) {
    clock.begin(i);
    auto send = [&] {
      if (op == 0) {
        if (leader) nvshmem_uint64_p(flag, static_cast<uint64_t>(i), peer);
      } else if (op == 1) {
        if (leader) nvshmem_putmem_signal(buf, src, bytes, flag, static_cast<uint64_t>(i), NVSHMEM_SIGNAL_SET, peer);
      } else {
        nvshmemx_putmem_signal_block(buf, src, bytes, flag, static_cast<uint64_t>(i), NVSHMEM_SIGNAL_SET, peer);
      }
    };
    auto wait = [&] {
      if (leader) nvshmem_uint64_wait_until(flag, NVSHMEM_CMP_GE, static_cast<uint64_t>(i));
      __syncthreads();
    };
    if (me == 0) {
      send();
      wait();
    } else {
      wait();
      send();
    }
    clock.end(i);
  }
  clock.finish(timing);
}

/// A chain of fetch_adds, each on the next word of `counters` (chain_word).
__global__ void fetch_add_chain(unsigned long long* counters, int warmup, int iters, std::uint64_t* cycles,
                                Timing* timing, unsigned long long* sink) {
  unsigned long long carry = 0;
  LoopClock clock{warmup, cycles, true};
  for (int i = 1; i <= warmup + iters; ++i) {
    clock.begin(i);
    carry = nvshmem_ulonglong_atomic_fetch_add(gv::bench::chain_word(counters, i), (carry & 1) + 1, 1);
    settle(carry);
    clock.end(i);
  }
  clock.finish(timing);
  *sink = carry;
}

__global__ void put_bw(char* dst, const char* src, std::size_t bytes, int iters) {
  const std::size_t chunk = ((bytes / gridDim.x) + 15) & ~std::size_t{15};
  const std::size_t off = chunk * blockIdx.x;
  const std::size_t n = off >= bytes ? 0 : (bytes - off < chunk ? bytes - off : chunk);
  for (int i = 0; i < iters; ++i)
    if (n != 0) nvshmemx_putmem_nbi_block(dst + off, src + off, n, 1);
  nvshmem_quiet();
}

__global__ void put_rate(char* dst, const char* src, std::size_t bytes, unsigned slots, int iters, int pe) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < iters; ++i) {
    const unsigned slot = (t * 2654435761u + static_cast<unsigned>(i) * 40503u) % slots;
    nvshmem_putmem_nbi(dst + std::size_t{slot} * 512, src + (t % 64) * 512, bytes, pe);
  }
  nvshmem_quiet();
}

gv::bench::JsonLog g_json;  // --json FILE: PE 0's rows, after the run's metadata object

void emit_latency(const std::string& test, const char* scope, std::size_t bytes, int iters, const std::vector<double>& us) {
  const auto s = gv::bench::summarize(us);
  g_json.row(gv::bench::latency_json("shmem_perf", std::string("\"impl\":\"") + SHMEM_PERF_IMPL + "\",\"test\":\"" + test +
                                                       "\",\"scope\":\"" + scope + "\",",
                                     bytes, static_cast<std::uint64_t>(iters), s));
  char lead[64];
  std::snprintf(lead, sizeof(lead), "%-14s %-6s", test.c_str(), scope);
  gv::bench::print_latency_row(stdout, bytes, static_cast<std::uint64_t>(iters), s, lead);
  std::fflush(stdout);
}

/// Timed launches a bandwidth or rate row takes, each between its own pair of events after the
/// row's untimed warm-up. One launch of a 64 KiB row lasts some 70 us, and single launches read
/// the face at 0.59x NVSHMEM's bandwidth in one run and 0.85x in the next (one H100, 2026-11-28).
constexpr int kSamples = 7;

/// Milliseconds of kSamples launches of `launch` (work on the default stream), sorted.
template <class Launch>
std::vector<float> sample_ms(Launch&& launch) {
  std::vector<float> ms(kSamples);
  cudaEvent_t a, b;
  GV_BENCH_CUDA(cudaEventCreate(&a));
  GV_BENCH_CUDA(cudaEventCreate(&b));
  for (float& m : ms) {
    GV_BENCH_CUDA(cudaEventRecord(a));
    launch();
    GV_BENCH_CUDA(cudaGetLastError());
    GV_BENCH_CUDA(cudaEventRecord(b));
    GV_BENCH_CUDA(cudaEventSynchronize(b));
    GV_BENCH_CUDA(cudaEventElapsedTime(&m, a, b));
  }
  GV_BENCH_CUDA(cudaEventDestroy(a));
  GV_BENCH_CUDA(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms;
}

/// A row from sorted launch times: `bytes_per_launch` and `msgs_per_launch` (0 for a bandwidth
/// row) over the median launch, and over the slowest and the fastest as `lo` and `hi`.
void emit_rate(const std::string& test, const std::string& variant, std::size_t bytes, int iters,
               const std::vector<float>& ms, double bytes_per_launch, double msgs_per_launch) {
  const auto gbs = [&](float m) { return bytes_per_launch / (m * 1e-3) / 1e9; };
  const auto mmsgs = [&](float m) { return msgs_per_launch / (m * 1e-3) / 1e6; };
  const float med = ms[ms.size() / 2], slow = ms.back(), fast = ms.front();
  // lo and hi in the row's unit: Mmsg/s for a rate row, GB/s for a bandwidth row.
  const bool rate = msgs_per_launch > 0;
  const auto in_unit = [&](float m) { return rate ? mmsgs(m) : gbs(m); };
  char spread[128];
  std::snprintf(spread, sizeof(spread), "\"samples\":%d,\"lo\":%.3f,\"hi\":%.3f,", static_cast<int>(ms.size()),
                in_unit(slow), in_unit(fast));
  g_json.row(gv::bench::rate_json("shmem_perf",
                                  std::string("\"impl\":\"") + SHMEM_PERF_IMPL + "\",\"test\":\"" + test +
                                      "\",\"variant\":\"" + variant + "\"," + spread,
                                  bytes, static_cast<std::uint64_t>(iters), gbs(med), rate ? mmsgs(med) : 0));
  std::printf("%-14s %-10s %-10zu %-10d %-16.2f %-10.3f %.2f-%.2f\n", test.c_str(), variant.c_str(), bytes, iters,
              gbs(med), rate ? mmsgs(med) : 0.0, in_unit(slow), in_unit(fast));
  std::fflush(stdout);
}

}  // namespace

constexpr const char* kUsage =
    "usage: shmem_perf [--json FILE] [-n ITERS] [--bw-max BYTES]   (2 PEs: gvrun -n 2, or mpirun -n 2)\n"
    "  --json FILE  also append the run's metadata and one object per row to FILE (PE 0)\n";

int run(int argc, char** argv) {
  int iters = 1000;
  std::string json_path;
  std::size_t bw_max = std::size_t{256} << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (gv::bench::is_help(a)) {
      throw gv::bench::HelpRequested{};
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "-n" && i + 1 < argc) {
      iters = static_cast<int>(gv::bench::parse_uint(a, argv[++i], 1, 1000000));
    } else if (a == "--bw-max" && i + 1 < argc) {
      bw_max = static_cast<std::size_t>(gv::bench::parse_uint(a, argv[++i], 4096, std::uint64_t{1} << 32));
    } else {
      throw gv::bench::UsageError("unknown argument '" + a + "'");
    }
  }
  nvshmem_init();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  int gpus = 0;
  GV_BENCH_CUDA(cudaGetDeviceCount(&gpus));
  GV_BENCH_CUDA(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % gpus));
  if (n != 2) {
    if (me == 0) std::fprintf(stderr, "shmem_perf: needs exactly 2 PEs, has %d\n", n);
    nvshmem_finalize();
    return 2;
  }
  cudaDeviceProp prop{};
  GV_BENCH_CUDA(cudaGetDeviceProperties(&prop, nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % gpus));
  const std::string device = std::string(prop.name) + (gpus >= 2 ? " x2" : " x1 (both PEs on one GPU)");
  if (me == 0) {
    if (!json_path.empty()) g_json.open(json_path, device + " (" + SHMEM_PERF_IMPL + ")", argc, argv);
    std::printf("# shmem_perf (%s) on %s\n", SHMEM_PERF_IMPL, device.c_str());
  }
  const std::size_t area = bw_max;
  char* buf = static_cast<char*>(nvshmem_malloc(area));
  char* src = static_cast<char*>(nvshmem_malloc(area));
  uint64_t* flag = static_cast<uint64_t*>(nvshmem_calloc(8, sizeof(uint64_t)));
  auto* counters = static_cast<unsigned long long*>(
      nvshmem_calloc(gv::bench::kChainBytes / sizeof(unsigned long long), sizeof(unsigned long long)));
  std::uint64_t* cycles = nullptr;
  Timing* timing = nullptr;
  unsigned long long* sink = nullptr;
  GV_BENCH_CUDA(cudaMallocHost(&cycles, sizeof(std::uint64_t) * static_cast<std::size_t>(iters)));
  GV_BENCH_CUDA(cudaMallocHost(&timing, sizeof(Timing)));
  GV_BENCH_CUDA(cudaMallocHost(&sink, sizeof(unsigned long long)));
  GV_BENCH_CUDA(cudaMemset(src, 0x5a, area));
  const int warmup = iters / 10 + 10;
  auto samples = [&](bool halve) {
    const double ns_per_cycle = timing->cycles ? static_cast<double>(timing->ns) / static_cast<double>(timing->cycles) : 0;
    std::vector<double> us(static_cast<std::size_t>(iters));
    for (int i = 0; i < iters; ++i) us[static_cast<std::size_t>(i)] = static_cast<double>(cycles[i]) * ns_per_cycle / 1000.0 / (halve ? 2 : 1);
    return us;
  };
  struct Row {
    int op;
    const char* test;
    const char* scope;
    std::size_t bytes;
    unsigned threads;
  };
  const Row rows[] = {{0, "p", "thread", 8, 1},          {1, "put_signal", "thread", 8, 1},
                      {1, "put_signal", "thread", 64, 1}, {2, "put_signal", "block", 8, 512},
                      {2, "put_signal", "block", 64, 512}, {2, "put_signal", "block", 4096, 512}};
  for (const Row& r : rows) {
    GV_BENCH_CUDA(cudaMemset(flag, 0, 8 * sizeof(uint64_t)));
    nvshmem_barrier_all();
    pingpong<<<1, r.threads>>>(r.op, buf, src, r.bytes, flag, warmup, iters, cycles, timing);
    GV_BENCH_CUDA(cudaGetLastError());
    GV_BENCH_CUDA(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    if (me == 0) emit_latency(r.test, r.scope, r.bytes, iters, samples(true));
  }
  if (me == 0) {
    fetch_add_chain<<<1, 1>>>(counters, warmup, iters, cycles, timing, sink);
    GV_BENCH_CUDA(cudaGetLastError());
    GV_BENCH_CUDA(cudaDeviceSynchronize());
    emit_latency("fetch_add", "thread", 8, iters, samples(false));
  }
  nvshmem_barrier_all();
  if (me == 0)
    std::printf("# rates, the median of %d launches: test variant bytes iters GB/s Mmsg/s lo-hi (slowest-fastest launch, "
                "Mmsg/s for rate rows, GB/s for bw)\n",
                kSamples);
  for (const int ctas : {1, 8, 32, 132}) {
    for (std::size_t bytes = 65536; bytes <= bw_max; bytes *= 4) {
      const int reps = static_cast<int>(std::max<std::size_t>(5, std::min<std::size_t>(200, (std::size_t{4} << 30) / bytes)));
      nvshmem_barrier_all();
      if (me == 0) {
        put_bw<<<ctas, 512>>>(buf, src, bytes, 1);
        GV_BENCH_CUDA(cudaGetLastError());
        const auto ms = sample_ms([&] { put_bw<<<ctas, 512>>>(buf, src, bytes, reps); });
        emit_rate("bw", std::to_string(ctas) + "cta", bytes, reps, ms, static_cast<double>(bytes) * reps, 0);
      }
    }
  }
  nvshmem_barrier_all();
  if (me == 0) {
    const unsigned slots = static_cast<unsigned>(std::min<std::size_t>(area / 512, 1u << 20));
    const int reps = 200, ctas = 132, threads = 256;
    for (const int pe : {1, 0}) {
      put_rate<<<ctas, threads>>>(buf, src, 64, slots, 1, pe);  // warm-up, as for bw: first touches untimed
      GV_BENCH_CUDA(cudaGetLastError());
      const auto ms = sample_ms([&] { put_rate<<<ctas, threads>>>(buf, src, 64, slots, reps, pe); });
      const double msgs = static_cast<double>(ctas) * threads * reps;
      emit_rate(pe == 1 ? "rate" : "rate_self", "thread", 64, reps, ms, msgs * 64, msgs);
    }
  }
  nvshmem_barrier_all();
  nvshmem_free(counters);
  nvshmem_free(flag);
  nvshmem_free(src);
  nvshmem_free(buf);
  nvshmem_finalize();
  return 0;
}

// Failures (no GPU, a face that cannot start) end with a message and exit status 1, not an
// uncaught exception.
int main(int argc, char** argv) { return gv::bench::run_main("shmem_perf", kUsage, [&] { return run(argc, argv); }); }
