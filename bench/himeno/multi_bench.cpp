// himeno_bench --ranks N: Himeno over N ranks of this process (World::create_local: rank i on
// GPU i % GPUs) in the six synchronisation modes, against the one-GPU run measured in the same
// invocation.
//
// Per size, first the one-GPU row (DeviceDomain on GPU 0, exactly himeno_bench without --ranks),
// then a row per mode: the median time per iteration with communication and without (no-comm:
// the same kernels with puts and waits skipped), their difference (the mode's overhead), GFLOPS,
// the speedup over the one-GPU row, the parallel efficiency (speedup / GPUs the ranks use), the
// host CPU time per iteration (getrusage of the whole process over the timed repetitions) and
// the GPU energy per iteration (NVML's total-energy counter of the ranks' GPUs over the timed
// repetitions, or "unavailable"), and how far the Gosa is from the one-GPU Gosa.
#include "multi_bench.hpp"

#include <gpuverbs/himeno/multi.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "energy.hpp"
#include "metadata.hpp"
#include "one_gpu.hpp"
#include "stats.hpp"

namespace gv::himeno::bench {
namespace {

struct Size {
  std::string name;
  GridSize grid;
};

struct Cli {
  int ranks = 0;
  std::vector<Mode> modes{std::begin(kAllModes), std::end(kAllModes)};
  std::vector<Size> sizes;
  int iters = 0;  ///< 0: per size, about 50 ms of one-GPU work per repetition
  int reps = 5, planes_per_block = 0;
  Arithmetic arith = Arithmetic::kDouble;
  rma::Transport transport = rma::Transport::kNone;
  bool comm = true, no_comm = true;
  bool json = false;
};

constexpr int kExitBadInput = 2, kExitUnavailable = 3;

[[noreturn]] void bad_input(const std::string& why) {
  std::fprintf(stderr, "himeno_bench: %s\n", why.c_str());
  print_help(stderr);
  std::exit(kExitBadInput);
}

std::vector<Size> parse_sizes(const std::string& list) {
  std::vector<Size> out;
  if (list == "all") {
    for (SizeClass c : {SizeClass::XS, SizeClass::S, SizeClass::M, SizeClass::L, SizeClass::XL})
      out.push_back({to_string(c), grid_size(c)});
    return out;
  }
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string word = list.substr(at, comma - at);
    const auto c = parse_size_class(word);
    if (!c) bad_input("--size takes XS, S, M, L, XL, a comma-separated list of them, or all; not '" + word + "'");
    out.push_back({to_string(*c), grid_size(*c)});
    at = comma + 1;
  }
  return out;
}

int positive(const std::string& flag, const std::string& v) {
  try {
    return static_cast<int>(gv::bench::parse_uint(flag, v, 1, 1'000'000));
  } catch (const gv::bench::UsageError& e) {
    bad_input(e.what());
  }
}

Cli parse(int argc, char** argv) {
  Cli c;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&]() -> std::string {
      if (a + 1 >= argc) bad_input("missing value after " + arg);
      return argv[++a];
    };
    if (arg == "--ranks") {
      c.ranks = positive(arg, value());
    } else if (arg == "--mode") {
      try {
        c.modes = parse_modes(value());
      } catch (const std::invalid_argument& e) {
        bad_input(e.what());
      }
    } else if (arg == "--size") {
      c.sizes = parse_sizes(value());
    } else if (arg == "--dims") {
      const std::string v = value();
      Size s{"custom", {}};
      if (std::sscanf(v.c_str(), "%d,%d,%d", &s.grid.ni, &s.grid.nj, &s.grid.nk) != 3) bad_input("--dims takes NI,NJ,NK");
      c.sizes = {s};
    } else if (arg == "--iters") {
      c.iters = positive(arg, value());
    } else if (arg == "--reps") {
      c.reps = positive(arg, value());
    } else if (arg == "--planes-per-block") {
      c.planes_per_block = positive(arg, value());
    } else if (arg == "--arith") {
      const std::string v = value();
      if (v != "double" && v != "float") bad_input("--arith takes double or float");
      c.arith = v == "float" ? Arithmetic::kFloat : Arithmetic::kDouble;
    } else if (arg == "--transport") {
      const std::string v = value();
      if (v == "p2p") c.transport = rma::Transport::kP2p;
      else if (v == "ib") c.transport = rma::Transport::kIb;
      else if (v == "auto") c.transport = rma::Transport::kNone;
      else bad_input("--transport takes auto, p2p or ib");
    } else if (arg == "--no-comm") {
      c.comm = false;
    } else if (arg == "--comm-only") {
      c.no_comm = false;
    } else if (arg == "--json") {
      c.json = true;
    } else {
      bad_input("unknown option " + arg);
    }
  }
  if (!c.comm && !c.no_comm) bad_input("--no-comm and --comm-only leave nothing to run");
  if (c.sizes.empty()) c.sizes = parse_sizes("all");
  // A grid the ranks cannot share is refused before any GPU work.
  for (const Size& s : c.sizes) {
    try {
      (void)plan_rank(s.grid, c.ranks, 0, c.planes_per_block, c.arith);
    } catch (const std::invalid_argument& e) {
      bad_input("size " + s.name + " (" + std::to_string(s.grid.ni) + "x" + std::to_string(s.grid.nj) + "x" +
                std::to_string(s.grid.nk) + ") for --ranks " + std::to_string(c.ranks) + ": " + e.what());
    }
  }
  return c;
}

/// About 50 ms of one-GPU work per repetition (at ~75 G points/s), within [20, 2000] iterations.
int iterations_for(const GridSize& g) {
  const double points = double(interior_points(g));
  return int(std::clamp(std::lround(4e9 / points), 20L, 2000L));
}

double median(std::vector<double> v) { return gv::bench::summarize(std::move(v)).typical; }

double rel_diff(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

/// A number for a table cell or a JSON value; `missing` where there is none.
std::string num(const std::optional<double>& v, const char* missing, const char* format = "%.4g") {
  if (!v) return missing;
  char b[64];
  std::snprintf(b, sizeof b, format, *v);
  return b;
}

std::string transport_name(rma::Transport t) { return t == rma::Transport::kNone ? "auto" : rma::to_string(t); }

/// One measured (mode, comm) setting: median ms per iteration, CPU µs and energy mJ per iteration.
struct Measured {
  double us_per_iter = 0.0, us_min = 0.0, cpu_us = 0.0;
  std::optional<double> energy_mj;
  double gosa = 0.0;
};

Measured measure(MultiDomain& md, Mode m, bool comm, int iters, int reps, CostMeter cost) {
  md.reset();
  (void)md.run(m, iters, comm);  // warm-up; builds the mode's graphs
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    md.reset();
    cost.begin();
    const double ms = md.run(m, iters, comm);
    cost.end();
    per.push_back(ms * 1e3 / iters);
  }
  Measured out;
  out.us_per_iter = median(per);
  out.us_min = *std::min_element(per.begin(), per.end());
  out.cpu_us = cost.cpu_us / (double(reps) * iters);
  if (cost.energy_mj) out.energy_mj = *cost.energy_mj / (double(reps) * iters);
  out.gosa = md.gosa().back();
  return out;
}

std::string device_names() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return "unknown";
  std::string names;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess) names += std::string(names.empty() ? "" : ", ") + p.name;
  }
  return std::to_string(n) + "x [" + names + "]";
}

}  // namespace

void print_help(std::FILE* f) {
  std::fprintf(f,
               "usage: himeno_bench [--size XS|S|M|L|XL | --dims NI,NJ,NK] [--iters N] [--reps R]\n"
               "                    [--arith double|float] [--split] [--planes-per-block P] [--json]\n"
               "         one GPU: Gosa, time, GFLOPS, bandwidth against the measured copy bandwidth\n"
               "       himeno_bench --ranks N [--mode LIST|all] [--size LIST|all | --dims NI,NJ,NK]\n"
               "                    [--iters N] [--reps R] [--transport auto|p2p|ib] [--no-comm | --comm-only]\n"
               "                    [--arith double|float] [--planes-per-block P] [--json]\n"
               "         N ranks in this process (rank i on GPU i %% GPUs), in the modes\n"
               "         %s, each with and without\n"
               "         communication (--no-comm / --comm-only: one of them),\n"
               "         against the one-GPU run of the same invocation; --iters defaults to about\n"
               "         50 ms of one-GPU work per repetition. Exit status: 0 ok, 1 a run failed,\n"
               "         2 bad input, 3 a requested mode cannot run on this device (the row says why).\n",
               "hybrid,stream,in-kernel,device-launch,persistent,graph");
}

int run_multi(int argc, char** argv) {
  const Cli c = parse(argc, argv);
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "himeno_bench: no usable GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 1;
  }
  EnergyMeter energy;
  const char* arith = c.arith == Arithmetic::kDouble ? "double" : "float";
  const std::string command = gv::bench::command_line(argc, argv);
  if (c.json) {
    const std::string extra = "\"ranks\":" + std::to_string(c.ranks) + ",\"transport\":\"" + transport_name(c.transport) +
                              "\",\"energy\":\"" + (energy.why().empty() ? "nvml" : energy.why()) + "\",";
    std::printf("%s\n", gv::bench::metadata_json(device_names(), command, extra).c_str());
  } else {
    std::printf("# himeno on %s, %d rank(s), transport %s, %s arithmetic; energy: %s\n# %s\n", device_names().c_str(),
                c.ranks, transport_name(c.transport).c_str(), arith,
                energy.why().empty() ? "NVML total energy" : energy.why().c_str(), command.c_str());
    std::printf("%-6s %-14s %6s %11s %11s %11s %9s %8s %6s %10s %12s %10s\n", "size", "mode", "iters", "t_iter_us",
                "nocomm_us", "overhead_us", "GFLOPS", "speedup", "eff", "cpu_us/it", "energy_mJ/it", "gosa_diff");
  }
  std::fflush(stdout);
  int status = 0;
  for (const Size& s : c.sizes) {
    const int iters = c.iters > 0 ? c.iters : iterations_for(s.grid);
    const double flops = double(kFlopsPerPoint) * double(interior_points(s.grid));
    try {
      // The one-GPU row, on GPU 0, before any World exists (with ib a resident engine would
      // make DeviceDomain's cudaFree wait forever).
      OneGpuRun base;
      CostMeter base_cost{energy, {0}};
      {
        gv::bench::cuda_check(cudaSetDevice(0), "cudaSetDevice(0)");
        DeviceDomain dom(standard_fields(s.grid), c.planes_per_block, c.arith);
        cudaStream_t stream = nullptr;
        gv::bench::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        base = time_one_gpu(dom, {PlaneRange{1, s.grid.ni - 1}}, iters, c.reps, stream,
                            [&](bool before) { before ? base_cost.begin() : base_cost.end(); });
        gv::bench::cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
      }
      const double t1 = median(base.ms) * 1e3 / iters;
      const double cpu1 = base_cost.cpu_us / (double(c.reps) * iters);
      const double timed = double(c.reps) * iters;
      std::optional<double> e1;
      if (base_cost.energy_mj) e1 = *base_cost.energy_mj / timed;
      if (c.json)
        std::printf("{\"bench\":\"himeno_multi\",\"size\":\"%s\",\"ni\":%d,\"nj\":%d,\"nk\":%d,\"mode\":\"one-gpu\","
                    "\"ranks\":1,\"gpus\":1,\"iters\":%d,\"reps\":%d,\"arith\":\"%s\",\"us_per_iter\":%.3f,"
                    "\"gflops\":%.1f,\"cpu_us_per_iter\":%.3f,\"energy_mj_per_iter\":%s,\"gosa\":%.12e}\n",
                    s.name.c_str(), s.grid.ni, s.grid.nj, s.grid.nk, iters, c.reps, arith, t1, flops / t1 / 1e3, cpu1,
                    num(e1, "\"unavailable\"").c_str(), base.gosa);
      else
        std::printf("%-6s %-14s %6d %11.2f %11s %11s %9.1f %8.3f %6.3f %10.2f %12s %10s\n", s.name.c_str(), "one-gpu",
                    iters, t1, "-", "-", flops / t1 / 1e3, 1.0, 1.0, cpu1, num(e1, "unavailable").c_str(), "-");
      std::fflush(stdout);

      MultiOptions mo;
      mo.planes_per_block = c.planes_per_block;
      mo.arithmetic = c.arith;
      mo.capacity = iters;
      WorldOptions wo;
      wo.memory = WorldOptions::Memory::kGpu;
      wo.transport = c.transport;
      wo.budget = Budget{10'000'000'000ull};
      wo.heap_bytes = MultiDomain::heap_bytes(s.grid, c.ranks, mo);
      auto worlds = World::create_local(c.ranks, wo);
      MultiDomain md(raw(worlds), s.grid, [](const Slab& slab) { return standard_fields(slab); }, mo);
      std::vector<int> gpus;
      for (int i = 0; i < md.driven(); ++i) gpus.push_back(md.gpu(i));
      std::sort(gpus.begin(), gpus.end());
      gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
      for (Mode m : c.modes) {
        const std::string why = md.why_not(m);
        if (!why.empty()) {
          status = kExitUnavailable;
          if (c.json)
            std::printf("{\"bench\":\"himeno_multi\",\"size\":\"%s\",\"mode\":\"%s\",\"ranks\":%d,\"unavailable\":\"%s\"}\n",
                        s.name.c_str(), to_string(m), c.ranks, gv::bench::json_escape(why).c_str());
          else
            std::printf("%-6s %-14s unavailable: %s\n", s.name.c_str(), to_string(m), why.c_str());
          std::fflush(stdout);
          continue;
        }
        std::optional<Measured> with, without;
        if (c.comm) with = measure(md, m, true, iters, c.reps, CostMeter{energy, gpus});
        if (c.no_comm) without = measure(md, m, false, iters, c.reps, CostMeter{energy, gpus});
        const Measured& main = with ? *with : *without;
        const double speedup = t1 / main.us_per_iter;
        std::optional<double> nocomm, overhead, nocomm_cpu, gosa_diff;
        if (without) {
          nocomm = without->us_per_iter;
          nocomm_cpu = without->cpu_us;
        }
        if (with && without) overhead = with->us_per_iter - without->us_per_iter;
        if (with) gosa_diff = rel_diff(with->gosa, base.gosa);
        if (c.json) {
          std::printf(
              "{\"bench\":\"himeno_multi\",\"size\":\"%s\",\"ni\":%d,\"nj\":%d,\"nk\":%d,\"mode\":\"%s\",\"ranks\":%d,"
              "\"gpus\":%zu,\"transport\":\"%s\",\"iters\":%d,\"reps\":%d,\"arith\":\"%s\",\"comm\":%s,"
              "\"us_per_iter\":%.3f,\"us_per_iter_min\":%.3f,\"nocomm_us_per_iter\":%s,\"overhead_us_per_iter\":%s,"
              "\"gflops\":%.1f,\"speedup\":%.4f,\"efficiency\":%.4f,\"cpu_us_per_iter\":%.3f,"
              "\"nocomm_cpu_us_per_iter\":%s,\"energy_mj_per_iter\":%s,\"gosa\":%.12e,\"gosa_one_gpu\":%.12e,"
              "\"gosa_rel_diff\":%s,\"one_gpu_us_per_iter\":%.3f}\n",
              s.name.c_str(), s.grid.ni, s.grid.nj, s.grid.nk, to_string(m), c.ranks, gpus.size(),
              rma::to_string(worlds[0]->transport_to(c.ranks > 1 ? 1 : 0)), iters, c.reps, arith,
              with ? "true" : "false", main.us_per_iter, main.us_min, num(nocomm, "null", "%.3f").c_str(),
              num(overhead, "null", "%.3f").c_str(), flops / main.us_per_iter / 1e3, speedup,
              speedup / double(gpus.size()), main.cpu_us, num(nocomm_cpu, "null", "%.3f").c_str(),
              num(main.energy_mj, "\"unavailable\"").c_str(), main.gosa, base.gosa, num(gosa_diff, "null", "%.3e").c_str(),
              t1);
        } else {
          std::printf("%-6s %-14s %6d %11.2f %11s %11s %9.1f %8.3f %6.3f %10.2f %12s %10s\n", s.name.c_str(), to_string(m),
                      iters, main.us_per_iter, num(nocomm, "-", "%.2f").c_str(), num(overhead, "-", "%.2f").c_str(),
                      flops / main.us_per_iter / 1e3, speedup, speedup / double(gpus.size()), main.cpu_us,
                      num(main.energy_mj, "unavailable").c_str(), num(gosa_diff, "-", "%.1e").c_str());
        }
        std::fflush(stdout);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "himeno_bench: size %s: %s\n", s.name.c_str(), e.what());
      return 1;
    }
  }
  return status;
}

}  // namespace gv::himeno::bench
