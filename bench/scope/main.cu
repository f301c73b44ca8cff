// gv_scope: how fast this machine moves bytes and resolves atomics along each path a gpuverbs
// queue can take, on Google Benchmark so Comm|Scope's flags and names carry over. Exit 2 on bad
// input (an unknown argument, a GPU or NUMA id that does not exist, sizes out of range, a filter
// that matches nothing); 1 where the machine has no GPU.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "family.hpp"
#include "host_env.hpp"
#include "numa.hpp"  // host_setup's: the GPU's node from its PCI device

namespace {

/// The node a GPU's rows pin to by default: its PCI device's, else the first node present.
int default_node(int gpu, const std::vector<bool>& present) {
  char bdf[32] = {};
  if (cudaDeviceGetPCIBusId(bdf, sizeof(bdf), gpu) == cudaSuccess) {
    const int n = gv::detail::pci_numa_node(bdf);
    if (n >= 0 && static_cast<std::size_t>(n) < present.size() && present[static_cast<std::size_t>(n)]) return n;
  }
  for (std::size_t i = 0; i < present.size(); ++i)
    if (present[i]) return static_cast<int>(i);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gv::scope;
  Plan plan;
  int gpus = 0;
  try {
    plan.opt = parse_options(argc, argv);
    if (plan.opt.help) {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    const std::vector<bool> nodes = numa_nodes_present();
    const cudaError_t e = cudaGetDeviceCount(&gpus);
    if (e != cudaSuccess) gpus = 0;
    validate_options(plan.opt, gpus, nodes);
    if (gpus == 0) {
      std::fprintf(stderr, "gv_scope needs a GPU: %s\n", gv::detail::cuda_error_text(e == cudaSuccess ? cudaErrorNoDevice : e).c_str());
      return 1;
    }
    plan.gpus = plan.opt.cuda;
    if (plan.gpus.empty())
      for (int g = 0; g < gpus; ++g) plan.gpus.push_back(g);
    // --numa N pins every GPU's rows to each named node (Comm|Scope registers numa × cuda).
    std::vector<int> g2;
    for (const int g : plan.gpus) {
      if (plan.opt.numa.empty()) {
        g2.push_back(g);
        plan.numa_of_gpu.push_back(default_node(g, nodes));
      } else {
        for (const int n : plan.opt.numa) {
          g2.push_back(g);
          plan.numa_of_gpu.push_back(n);
        }
      }
    }
    plan.gpus = g2;
    for (const std::string& a : plan.opt.rest) plan.min_time_given |= a.rfind("--benchmark_min_time", 0) == 0;
    register_copies(plan);
    register_zero_copy(plan);
    register_unified(plan);
    register_latency(plan);
    register_atomics(plan);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "gv_scope: %s\n", ex.what());
    return 2;
  }
  std::vector<char*> args;
  for (std::string& a : plan.opt.rest) args.push_back(a.data());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    char bdf[32] = {};
    (void)cudaDeviceGetPCIBusId(bdf, sizeof(bdf), plan.gpus[i]);
    cudaDeviceProp p{};
    (void)cudaGetDeviceProperties(&p, plan.gpus[i]);
    benchmark::AddCustomContext("cuda" + std::to_string(plan.gpus[i]) + "_numa" + std::to_string(plan.numa_of_gpu[i]),
                                std::string(p.name) + " " + bdf + ", PCI NUMA node " +
                                    std::to_string(gv::detail::pci_numa_node(bdf)) + ", " +
                                    std::to_string(gv::detail::numa_node_count()) + " NUMA node(s)");
  }
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks();
  release_cached();
  benchmark::Shutdown();
  if (ran == 0) {
    std::fprintf(stderr, "gv_scope: no benchmark matches the filter (gv_scope --benchmark_list_tests lists them)\n");
    return 2;
  }
  return 0;
}
