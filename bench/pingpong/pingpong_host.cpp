// gv_pingpong: the verbs path on host threads through the software HCA's CPU engine: RDMA WRITE
// ping-pong latency, bandwidth and message rate. A CPU figure: no GPU is involved (the GPU
// modes are gv_gpu_verbs). The experiments are the ones gv_gpu_verbs runs in kernels
// (bench/common/experiments.hpp), here on one host thread per QP.
//
//   latency  two QPs, a thread each; the receiver polls the last byte of the message
//            (perftest's write_lat, the dissertation's measurement), or with --poll completion
//            waits for a WRITE_WITH_IMM's receive completion. Half the round trip, perftest's
//            columns, in microseconds.
//   bw       WRITEs from one QP, kWindow in flight, one CQE per kSignalEvery: perftest's
//            bandwidth columns (GB/s = 1e9 B/s).
//   msgrate  8 B and 64 B inline WRITEs on 1, 2, 4, ... QPs, a thread each, as many as the
//            cores allow besides the CPU engine's.
//
// Every thread here spins (posters, pollers and the engine): with more of them than cores the
// figures measure the scheduler, so such runs are flagged with a warning, and message-rate rows
// that would need more threads than cores are skipped.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

#include "../common/args.hpp"
#include "../common/bed.hpp"
#include "../common/measure.hpp"
#include "../common/provider.hpp"
#include "../common/report.hpp"
#include "../common/stats.hpp"

namespace gv::bench {
namespace {

constexpr int kMaxQps = 32;  ///< message rate: QPs at most

struct Options {
  ProviderArgs nic;
  std::vector<std::uint64_t> sizes;  ///< empty: 8 B for latency, 64 KiB for bandwidth
  std::uint64_t iters = 1000;
  bool completion = false;
  bool latency = true, bw = true, msgrate = true;
  std::string json;  ///< --json FILE: where JSON rows go (empty: none)
};

constexpr char kUsage[] =
    "usage: gv_pingpong [--provider soft|mlx5 [-d DEVICE] [-i PORT] [-x GID_INDEX]] [-s BYTES | -a]\n"
    "                   [-n ITERS] [--poll last-byte|completion] [--run LIST] [--json FILE]\n"
    "  -s BYTES    one message size, 1 .. 1073741824 (default: 8 B for latency, 64 KiB for bw;\n"
    "              msgrate always sends 8 B and 64 B)\n"
    "  -a          all sizes 8 B .. 4 MiB (latency runs at most 100 iterations above 64 KiB)\n"
    "  -n ITERS    exchanges a size (latency; 100 warm-up ones first), messages a size (bw, at most\n"
    "              512 MiB) or a QP (msgrate); 1 .. 1000000, default 1000\n"
    "  --poll      latency: last-byte, the receiver polls the message's last byte (default), or\n"
    "              completion: WRITE_WITH_IMM, the receiver polls its receive CQ\n"
    "  --run LIST  comma list of latency, bw, msgrate (default: all three)\n"
    "  --json FILE append one JSON object per row to FILE, after one naming the run (commit,\n"
    "              device, date, command); the table is printed either way\n"
    "  -h, --help  this text\n"
    GV_BENCH_PROVIDER_USAGE
    "With --provider mlx5 the QPs are two of one ConnectX port connected to each other (a loopback\n"
    "pair); host threads post and poll, the provider's thread rings the doorbells.\n";

Options parse(int argc, char** argv) {
  Options o;
  ArgWalker args(argc, argv);
  while (args.more()) {
    const std::string a = args.next();
    if (o.nic.take(a, args)) continue;
    if (a == "-s" || a == "--size") o.sizes = {args.number(a, 1, std::uint64_t{1} << 30)};
    else if (a == "-a" || a == "--all") o.sizes = pow2_sizes(3, 22);
    else if (a == "-n" || a == "--iters") o.iters = args.number(a, 1, 1'000'000);
    else if (a == "--poll") {
      const std::string p = args.value(a);
      if (p != "last-byte" && p != "completion") throw UsageError("--poll takes last-byte or completion");
      o.completion = p == "completion";
    } else if (a == "--run") {
      o.latency = o.bw = o.msgrate = false;
      const std::string list = args.value(a);
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        const std::string b = list.substr(at, end - at);
        if (b == "latency") o.latency = true;
        else if (b == "bw") o.bw = true;
        else if (b == "msgrate") o.msgrate = true;
        else throw UsageError("--run takes a comma list of latency, bw, msgrate; not '" + b + "'");
        at = end + 1;
      }
    } else if (a == "--json") o.json = args.value(a);
    else throw UsageError("unknown argument " + a);
  }
  o.nic.check();
  return o;
}

/// QP pairs on one device of the provider chosen, run by host threads (at most one per pair, or two for
/// the one pair of a ping-pong); the roles' results in plain memory.
class HostBed {
 public:
  HostBed(const ProviderArgs& provider, const Shape& shape, std::uint64_t samples_per_role)
      : cap_(samples_per_role), status_(std::max<std::size_t>(2, static_cast<std::size_t>(shape.pairs))),
        samples_(status_.size() * cap_), bed_(open(provider, shape), shape) {}

  std::size_t region() const { return bed_.region(); }
  /// "provider soft (CPU engine)", or the NIC's Device::describe().
  std::string describe() {
    const gv::Device& d = *bed_.devices().front();
    return d.name() == "soft" ? "provider soft (CPU engine)" : d.describe();
  }
  void put(int e, std::size_t off, const std::uint8_t* src, std::size_t n) { bed_.put(e, off, src, n); }
  std::vector<std::uint8_t> get(int e, std::size_t off, std::size_t n) const { return bed_.get(e, off, n); }
  RoleResults results() { return RoleResults{status_.data(), samples_.data(), cap_}; }
  template <class Exp>
  void run(const Exp& exp, int roles, const std::string& what) {
    bed_.run_on_threads(exp, roles, results(), what);
  }

 private:
  static std::vector<std::unique_ptr<gv::Device>> open(const ProviderArgs& provider, const Shape& shape) {
    gv::DeviceOptions o;
    o.arena_bytes = arena_bytes(shape, 2 * shape.pairs, true);
    std::vector<std::unique_ptr<gv::Device>> v;
    v.push_back(gv::Device::open(provider.open_name(), provider.options(o)));
    return v;
  }

  std::uint64_t cap_;
  std::vector<Status> status_;
  std::vector<std::uint64_t> samples_;
  QpBed bed_;
};

unsigned cores() { return std::max(1u, std::thread::hardware_concurrency()); }

/// A warning when `threads` spinning threads (the CPU engine's included) outnumber the cores.
void warn_if_oversubscribed(unsigned threads, const char* who) {
  if (threads <= cores()) return;
  std::printf("# warning: %u spinning threads (%s and the CPU engine's) on %u cores: the figures below "
               "include the scheduler's time slices, not only the verbs path\n",
              threads, who, cores());
}

std::string json_keys(const std::string& provider, const char* variant) {
  return "\"provider\":\"" + provider + "\",\"mode\":\"cpu-threads\",\"variant\":\"" + variant + "\",";
}

void run_latency(const Options& o, JsonLog& json) {
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{8} : o.sizes;
  Shape shape;
  shape.region = region_for(*std::max_element(sizes.begin(), sizes.end()));
  HostBed tb(o.nic, shape, o.iters + 100);
  const char* variant = o.completion ? "completion" : "last_byte";
  std::printf("# latency: RDMA WRITE ping-pong, %s, a host thread a side, %s; half the round trip\n",
              tb.describe().c_str(),
              o.completion ? "WRITE_WITH_IMM, the receiver polls its receive CQ" : "the receiver polls the last byte");
  warn_if_oversubscribed(3, "2 ping-pong threads");
  print_latency_header(stdout);
  for (const std::uint64_t bytes : sizes) {
    const bool big = bytes > 65536;
    const std::uint64_t iters = big ? std::min<std::uint64_t>(o.iters, 100) : o.iters;
    const std::uint64_t warmup = big ? 10 : 100;
    const std::string what = "latency " + std::to_string(bytes) + " B";
    const LatencyStats s = measure_pingpong(tb, bytes, iters, warmup, o.completion, what);
    print_latency_row(stdout, bytes, iters, s);
    json.row(latency_json("pingpong", json_keys(o.nic.provider, variant), bytes, iters, s));
  }
}

void run_bw(const Options& o, JsonLog& json) {
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{65536} : o.sizes;
  Shape shape;
  shape.region = region_for(*std::max_element(sizes.begin(), sizes.end()));
  HostBed tb(o.nic, shape, o.iters + 100);
  std::printf("# bw: RDMA WRITEs from one QP, a host thread, %llu in flight, one CQE per %u, at most 512 MiB a "
              "size; GB/s = 1e9 B/s\n",
              static_cast<unsigned long long>(kWindow), kSignalEvery);
  warn_if_oversubscribed(2, "1 posting thread");
  print_bw_header(stdout);
  for (const std::uint64_t bytes : sizes) {
    const std::uint64_t n = bw_messages(o.iters, bytes);
    const BwStats s = measure_bw(tb, bytes, n, "bw " + std::to_string(bytes) + " B");
    print_bw_row(stdout, bytes, n, s);
    json.row(bw_json("bw", json_keys(o.nic.provider, "write"), bytes, n, s));
  }
}

void run_msgrate(const Options& o, JsonLog& json) {
  Shape shape;
  shape.pairs = std::clamp(static_cast<int>(cores()) - 1, 1, kMaxQps);
  HostBed tb(o.nic, shape, o.iters + 100);
  std::printf("# msgrate: inline RDMA WRITEs, a host thread per QP, %llu in flight, one CQE per %u, %llu per QP\n",
              static_cast<unsigned long long>(kWindow), kSignalEvery, static_cast<unsigned long long>(o.iters));
  std::printf(" %-6s %-8s %-12s %s\n", "#QPs", "#bytes", "#messages", "MsgRate[Mmsg/s]");
  for (const std::uint32_t bytes : {8u, 64u}) {
    for (int qps = 1; qps <= kMaxQps; qps *= 2) {
      if (qps > shape.pairs) {
        std::printf("# msgrate: %d QPs and more skipped: %d posting threads and the CPU engine's exceed the %u cores\n",
                    qps, qps, cores());
        break;
      }
      const std::string what = "msgrate " + std::to_string(qps) + " QPs " + std::to_string(bytes) + " B";
      const double rate = measure_msgrate(tb, bytes, qps, o.iters, what);
      const double total = static_cast<double>(o.iters) * qps;
      std::printf(" %-6d %-8u %-12.0f %.4f\n", qps, bytes, total, rate);
      json.row(msgrate_json(json_keys(o.nic.provider, "inline"), bytes, o.iters, qps, total, rate));
    }
  }
}

int run(const Options& o, int argc, char** argv) {
  JsonLog json;
  const std::string executor = o.nic.nic() ? o.nic.open_name() + " (a NIC)" : "soft provider, CPU engine";
  if (!o.json.empty()) json.open(o.json, executor + ", on " + host_cpu(), argc, argv);
  if (o.latency) run_latency(o, json);
  if (o.bw) run_bw(o, json);
  if (o.msgrate) run_msgrate(o, json);
  return 0;
}

}  // namespace
}  // namespace gv::bench

int main(int argc, char** argv) {
  using namespace gv::bench;
  return run_main("gv_pingpong", kUsage, [&] { return run(parse(argc, argv), argc, argv); });
}
