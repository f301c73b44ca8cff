// Himeno benchmark on one GPU: Gosa, time, GFLOPS (34 x interior points x iterations / time),
// achieved bandwidth at the sweep's 56 bytes per point, and the fraction of the device-to-device
// copy bandwidth measured in the same run (the memory ceiling).
//
//   himeno_bench [--size XS|S|M|L|XL | --dims NI,NJ,NK] [--iters N] [--reps R]
//                [--arith double|float] [--split] [--planes-per-block P] [--json]
//   himeno_bench --ranks N ...   (several GPUs: multi_bench.cpp; -h for both)
//
// Each repetition restores the initial p (untimed), then times --iters iterations (sweep and
// Gosa sum each) with events; the statistics are over repetitions. Every repetition must
// give the same Gosa bits (the sum is deterministic); the run fails otherwise.
#include <gpuverbs/himeno/gpu.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "multi_bench.hpp"
#include "stats.hpp"
#include "one_gpu.hpp"

namespace {

using namespace gv::himeno;

// Bytes one interior point moves per iteration: p once (window reuse), 12 coefficients,
// the new p.
constexpr int kBytesPerPoint = 14 * 4;

struct Options {
  std::string size = "M";
  GridSize grid = grid_size(SizeClass::M);
  int iters = 100, reps = 5, planes_per_block = 0;
  Arithmetic arith = Arithmetic::kDouble;
  bool split = false, json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "himeno_bench: %s\nusage: himeno_bench [--size XS|S|M|L|XL | --dims NI,NJ,NK] "
               "[--iters N] [--reps R] [--arith double|float] [--split] [--planes-per-block P] "
               "[--json]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&]() -> std::string {
      if (a + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++a];
    };
    auto number = [&](std::uint64_t lo) -> int {
      try {
        return static_cast<int>(gv::bench::parse_uint(arg, value(), lo, 1'000'000));
      } catch (const gv::bench::UsageError& e) {
        usage(e.what());
      }
    };
    if (arg == "--size") {
      o.size = value();
      const auto sc = parse_size_class(o.size);
      if (!sc) usage("--size takes XS, S, M, L or XL (or use --dims)");
      o.grid = grid_size(*sc);
      o.size = to_string(*sc);
    } else if (arg == "--dims") {
      const std::string v = value();
      if (std::sscanf(v.c_str(), "%d,%d,%d", &o.grid.ni, &o.grid.nj, &o.grid.nk) != 3)
        usage("--dims takes NI,NJ,NK");
      o.size = "custom";
    } else if (arg == "--iters") {
      o.iters = number(1);
    } else if (arg == "--reps") {
      o.reps = number(1);
    } else if (arg == "--planes-per-block") {
      o.planes_per_block = number(0);
    } else if (arg == "--arith") {
      const std::string v = value();
      if (v != "double" && v != "float") usage("--arith takes double or float");
      o.arith = v == "float" ? Arithmetic::kFloat : Arithmetic::kDouble;
    } else if (arg == "--split") {
      o.split = true;
    } else if (arg == "--json") {
      o.json = true;
    } else {
      usage(("unknown option " + arg).c_str());
    }
  }
  return o;
}


// Device-to-device copy bandwidth (bytes read + bytes written) over 1 GiB, median of 10.
double copy_bandwidth_gbs() {
  constexpr std::size_t kBytes = std::size_t(1) << 30;
  void *src = nullptr, *dst = nullptr;
  GV_BENCH_CUDA(cudaMalloc(&src, kBytes));
  GV_BENCH_CUDA(cudaMalloc(&dst, kBytes));
  GV_BENCH_CUDA(cudaMemset(src, 0x3c, kBytes));
  cudaEvent_t t0, t1;
  GV_BENCH_CUDA(cudaEventCreate(&t0));
  GV_BENCH_CUDA(cudaEventCreate(&t1));
  std::vector<double> ms;
  for (int r = 0; r < 12; ++r) {
    GV_BENCH_CUDA(cudaEventRecord(t0));
    GV_BENCH_CUDA(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice));
    GV_BENCH_CUDA(cudaEventRecord(t1));
    GV_BENCH_CUDA(cudaEventSynchronize(t1));
    float m = 0.0f;
    GV_BENCH_CUDA(cudaEventElapsedTime(&m, t0, t1));
    if (r >= 2) ms.push_back(m);  // first two are warm-up
  }
  GV_BENCH_CUDA(cudaEventDestroy(t0));
  GV_BENCH_CUDA(cudaEventDestroy(t1));
  GV_BENCH_CUDA(cudaFree(src));
  GV_BENCH_CUDA(cudaFree(dst));
  return 2.0 * double(kBytes) / (gv::bench::summarize(ms).typical * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) try {
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "-h") == 0 || std::strcmp(argv[a], "--help") == 0) {
      gv::himeno::bench::print_help(stdout);
      return 0;
    }
  }
  for (int a = 1; a < argc; ++a)
    if (std::strcmp(argv[a], "--ranks") == 0) return gv::himeno::bench::run_multi(argc, argv);
  const Options o = parse(argc, argv);
  int dev = 0;
  GV_BENCH_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  GV_BENCH_CUDA(cudaGetDeviceProperties(&prop, dev));
  const double copy_gbs = copy_bandwidth_gbs();

  HostFields init;
  try {
    init = standard_fields(o.grid);
  } catch (const std::exception& e) {
    usage(e.what());
  }
  DeviceDomain dom(init, o.planes_per_block, o.arith);
  const PlaneRange all{1, init.layout.ni - 1};
  const Halves h = split_halves(all);
  const std::vector<PlaneRange> ranges =
      o.split ? std::vector<PlaneRange>{h.top, h.bottom} : std::vector<PlaneRange>{all};

  cudaStream_t stream;
  GV_BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::OneGpuRun run;
  try {
    run = bench::time_one_gpu(dom, ranges, o.iters, o.reps, stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "himeno_bench: %s\n", e.what());
    return 1;
  }
  const std::vector<double>& ms = run.ms;
  const double first_gosa = run.gosa;

  const gv::bench::LatencyStats s = gv::bench::summarize(ms);  // of ms per repetition
  const double points = double(interior_points(o.grid));
  const double sec = s.typical * 1e-3;
  const double gflops = kFlopsPerPoint * points * o.iters / sec / 1e9;
  const double gbs = kBytesPerPoint * points * o.iters / sec / 1e9;
  const double ceiling_gflops = copy_gbs / kBytesPerPoint * kFlopsPerPoint;
  const char* arith = o.arith == Arithmetic::kDouble ? "double" : "float";
  const LaunchPlan plan = plan_sweep(init.layout, all, dom.planes_per_block(), o.arith);

  if (o.json) {
    std::printf(
        "{\"bench\":\"himeno\",\"device\":\"%s\",\"size\":\"%s\",\"ni\":%d,\"nj\":%d,\"nk\":%d,"
        "\"iters\":%d,\"reps\":%d,\"arith\":\"%s\",\"split\":%s,\"planes_per_block\":%d,"
        "\"gosa\":%.10e,\"time_ms_min\":%.4f,\"time_ms_median\":%.4f,\"time_ms_mean\":%.4f,"
        "\"time_ms_p99\":%.4f,\"gflops\":%.1f,\"bytes_per_point\":%d,\"achieved_gbs\":%.1f,"
        "\"copy_gbs\":%.1f,\"fraction_of_copy_bw\":%.3f,\"ceiling_gflops\":%.1f}\n",
        prop.name, o.size.c_str(), o.grid.ni, o.grid.nj, o.grid.nk, o.iters, o.reps, arith,
        o.split ? "true" : "false", plan.planes_per_block, first_gosa, s.min, s.typical, s.avg,
        s.p99, gflops, kBytesPerPoint, gbs, copy_gbs, gbs / copy_gbs, ceiling_gflops);
  } else {
    std::printf("# himeno on %s: %dx%dx%d (%s), %d iterations x %d reps, %s arithmetic%s, "
                "%d planes per block\n",
                prop.name, o.grid.ni, o.grid.nj, o.grid.nk, o.size.c_str(), o.iters, o.reps, arith,
                o.split ? ", top/bottom launches" : "", plan.planes_per_block);
    std::printf("%-7s %-16s %10s %10s %10s %10s %9s %6s %9s %9s %7s\n", "size", "gosa", "t_min_ms",
                "t_med_ms", "t_mean_ms", "t_p99_ms", "GFLOPS", "B/pt", "GB/s", "copyGB/s", "frac");
    std::printf("%-7s %-16.9e %10.3f %10.3f %10.3f %10.3f %9.1f %6d %9.1f %9.1f %7.3f\n",
                o.size.c_str(), first_gosa, s.min, s.typical, s.avg, s.p99, gflops, kBytesPerPoint,
                gbs, copy_gbs, gbs / copy_gbs);
  }
  GV_BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
} catch (const std::exception& e) {  // a failed CUDA call (GV_BENCH_CUDA)
  std::fprintf(stderr, "himeno_bench: %s\n", e.what());
  return 1;
}
