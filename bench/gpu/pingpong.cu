// gv_gpu_verbs pingpong: RDMA WRITE ping-pong between two QPs, one block (GPU) or thread (host) a
// side; with two GPUs one side on each. Half round trip in perftest's latency columns. Variants:
// last_byte (the receiver polls the last byte of its buffer, as perftest and the dissertation
// do) and completion (WRITE_WITH_IMM consumed by receives posted ahead in batches, polled on the
// receive CQ). host-controlled runs the completion variant only: its host sees a message arrive
// by its receive completion (the buffers are GPU memory).
#include <cstdio>

#include "../common/measure.hpp"
#include "harness.hpp"

namespace gv::bench {

void bench_pingpong(const Options& o, Harness& h) {
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{8} : o.sizes;
  Shape shape;
  shape.region = region_for(*std::max_element(sizes.begin(), sizes.end()));
  for (const Mode m : o.modes) {
    Testbed tb(m, o.gpus, shape, h);
    for (const bool completion : {false, true}) {
      const char* variant = completion ? "completion" : "last_byte";
      if (m == Mode::kHostControlled && !completion) {
        std::printf("# pingpong, host-controlled, last_byte: not measured; the host learns of a message by "
                    "its receive completion\n");
        continue;
      }
      std::printf("# pingpong, %s, %s: %s; half round trip; %s\n", name(m), variant,
                  completion ? "RDMA WRITE_WITH_IMM, the receiver polls its receive CQ"
                             : "RDMA WRITE, the receiver polls the last byte",
                  where(tb).c_str());
      print_latency_header(stdout, lead("mode", "variant"));
      for (const std::uint64_t bytes : sizes) {
        const bool big = bytes > 65536;
        const std::uint64_t iters = big ? std::min<std::uint64_t>(o.iters, 100) : o.iters;
        const std::uint64_t warmup = big ? 10 : 100;
        const std::string what = std::string(name(m)) + " pingpong " + variant + " " + std::to_string(bytes) + " B";
        print_latency("pingpong", tb, variant, bytes, iters, measure_pingpong(tb, bytes, iters, warmup, completion, what));
      }
    }
  }
}

}  // namespace gv::bench
