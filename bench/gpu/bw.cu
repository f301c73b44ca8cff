// gv_gpu_verbs bw: WRITEs from one QP, kWindow in flight, one CQE per kSignalEvery: perftest's
// bandwidth columns.
#include <cstdio>

#include "../common/measure.hpp"
#include "harness.hpp"

namespace gv::bench {

void bench_bw(const Options& o, Harness& h) {
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{65536} : o.sizes;
  Shape shape;
  shape.region = region_for(*std::max_element(sizes.begin(), sizes.end()));
  for (const Mode m : o.modes) {
    if (skips_host_controlled(m, "bw")) continue;
    Testbed tb(m, o.gpus, shape, h);
    std::printf("# bw, %s: RDMA WRITEs from one QP, %llu in flight, one CQE per %u, at most 512 MiB a size; "
                "GB/s = 1e9 B/s; %s\n",
                name(m), static_cast<unsigned long long>(kWindow), kSignalEvery, where(tb).c_str());
    print_bw_header(stdout, lead("mode", "variant"));
    for (const std::uint64_t bytes : sizes) {
      const std::uint64_t n = bw_messages(o.iters, bytes);
      const BwStats s = measure_bw(tb, bytes, n, std::string(name(m)) + " bw " + std::to_string(bytes) + " B");
      print_bw_row(stdout, bytes, n, s, lead(name(m), "write"));
      g_json.row(bw_json("bw", json_keys(m, "write", tb.gpus()), bytes, n, s));
    }
  }
}

}  // namespace gv::bench
