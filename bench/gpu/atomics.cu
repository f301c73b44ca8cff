// gv_gpu_verbs atomics: FETCH_ADD and CMP_SWP latency, each waited for: perftest's latency
// columns.
#include <cstdio>

#include "../common/measure.hpp"
#include "harness.hpp"

namespace gv::bench {
namespace {

std::uint64_t word_of(const std::vector<std::uint8_t>& b) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data(), sizeof(v));
  return v;
}

}  // namespace

void bench_atomics(const Options& o, Harness& h) {
  constexpr std::uint64_t kWarmup = 100;
  for (const Mode m : o.modes) {
    if (skips_host_controlled(m, "atomics")) continue;
    Testbed tb(m, o.gpus, Shape{}, h);
    std::printf("# atomics, %s: one 8-byte atomic at a time on the peer's memory, post to completion; %s\n",
                name(m), where(tb).c_str());
    print_latency_header(stdout, lead("mode", "variant"));
    for (const bool cas : {false, true}) {
      const char* variant = cas ? "cmp_swp" : "fetch_add";
      const Atomic exp{cas, kWarmup + o.iters};
      const std::string what = std::string(name(m)) + " atomics " + variant;
      const std::uint8_t zero[8] = {};
      const std::uint8_t poison[8] = {kPoison, kPoison, kPoison, kPoison, kPoison, kPoison, kPoison, kPoison};
      tb.put(1, 0, zero, sizeof(zero));
      tb.put(0, tb.region(), poison, sizeof(poison));
      tb.run(exp, 1, what);
      // Every operation applied (CMP_SWP k -> k + 1 succeeds only on its turn); the last one fetched n - 1.
      const std::uint64_t target = word_of(tb.get(1, 0, 8)), old = word_of(tb.get(0, tb.region(), 8));
      if (target != exp.n || old != exp.n - 1)
        throw gv::Error(what + ": the remote word is " + std::to_string(target) + " (expected " + std::to_string(exp.n) +
                        ") and the last fetched value " + std::to_string(old) + " (expected " + std::to_string(exp.n - 1) + ")");
      print_latency("atomics", tb, variant, 8, o.iters,
                    summarize(microseconds(h.samples_of(0), kWarmup, exp.n, 1000.0)));
    }
  }
}

}  // namespace gv::bench
