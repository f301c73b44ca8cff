// gv_gpu_verbs msgrate: 8 B and 64 B inline WRITEs on 1..32 QPs: one block per QP in the GPU
// modes, one host thread (host) or proxy thread (host-assisted) per QP, capped at one per core
// besides the CPU engine's (rows beyond are skipped, with a note).
#include <cstdio>
#include <thread>

#include "../common/measure.hpp"
#include "harness.hpp"

namespace gv::bench {

void bench_msgrate(const Options& o, Harness& h) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  Shape shape;
  shape.pairs = kMaxRoles;
  for (const Mode m : o.modes) {
    if (skips_host_controlled(m, "msgrate")) continue;
    Testbed tb(m, o.gpus, shape, h);
    std::printf("# msgrate, %s: inline RDMA WRITEs, %s per QP, %llu in flight, one CQE per %u, %llu per QP; %s\n",
                name(m),
                m == Mode::kCpuThreads ? "one host thread" : m == Mode::kHostAssisted ? "one block and one proxy thread" : "one block",
                static_cast<unsigned long long>(kWindow), kSignalEvery, static_cast<unsigned long long>(o.iters),
                where(tb).c_str());
    std::printf("%s %-6s %-8s %-12s %s\n", lead("mode", "variant").c_str(), "#QPs", "#bytes", "#messages", "MsgRate[Mmsg/s]");
    for (const std::uint32_t bytes : {8u, 64u}) {
      for (const int qps : {1, 2, 4, 8, 16, 32}) {
        if (host_threads_post(m) && static_cast<unsigned>(qps) + 1 > cores) {
          std::printf("# msgrate, %s: %d QPs skipped: %d posting threads and the CPU engine's exceed the %u cores\n",
                      name(m), qps, qps, cores);
          continue;
        }
        const std::string what = std::string(name(m)) + " msgrate " + std::to_string(qps) + " QPs " + std::to_string(bytes) + " B";
        const double rate = measure_msgrate(tb, bytes, qps, o.iters, what);
        const double total = static_cast<double>(o.iters) * qps;
        std::printf("%s %-6d %-8u %-12.0f %.4f\n", lead(name(m), "inline").c_str(), qps, bytes, total, rate);
        g_json.row(msgrate_json(json_keys(m, "inline", tb.gpus()), bytes, o.iters, qps, total, rate));
      }
    }
  }
}

}  // namespace gv::bench
