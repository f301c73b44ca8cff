#include "options.hpp"

#include <charconv>

#include <gpuverbs/host/verbs.hpp>

namespace gv::scope {
namespace {

int parse_int(const std::string& v, const char* what) {
  int x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    throw Error(std::string(what) + " wants a whole number, got '" + v + "'");
  return x;
}

/// "--name=V" or "--name V": the value, advancing i past it; nullopt-like empty flag `found`.
bool take(const std::string& name, int argc, char** argv, int& i, std::string& value) {
  const std::string a = argv[i];
  if (a == name) {
    if (i + 1 >= argc) throw Error(name + " needs a value");
    value = argv[++i];
    return true;
  }
  if (a.rfind(name + "=", 0) == 0) {
    value = a.substr(name.size() + 1);
    return true;
  }
  return false;
}

}  // namespace

std::string usage() {
  return "usage: gv_scope [--cuda ID]... [--numa ID]... [--sizes LO:HI[:STEP]] [--atomic-sweep default|full]\n"
         "                [Google Benchmark flags: --benchmark_filter=RE --benchmark_list_tests\n"
         "                 --benchmark_out=FILE --benchmark_out_format=json|csv --benchmark_repetitions=N ...]\n"
         "  --cuda ID        a GPU to measure (repeatable; default: every visible GPU)\n"
         "  --numa ID        a NUMA node to pin host threads and memory to (repeatable; default: the GPU's node)\n"
         "  --sizes LO:HI[:STEP]  transfer sizes 2^LO..2^HI bytes, " + std::to_string(kMinLog2) + " <= LO <= HI <= " +
         std::to_string(kMaxLog2) + ", every STEP (default 10:28:2; STEP defaults to 1)\n"
         "  --atomic-sweep   full: every Atomic-RMW op, scope and memory over the 11x11 contention x padding\n"
         "                   sweep (default: the sweep for fetch_add on device memory, the rest at 4 corners)\n"
         "Names: <family>_<Src>To<Dst>[_flush]/<numa>/<cuda>/log2(N):k as Comm|Scope; exit 2 on bad input.\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  if (argc > 0) o.rest.emplace_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string v;
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (take("--cuda", argc, argv, i, v)) {
      const int id = parse_int(v, "--cuda");
      if (id < 0) throw Error("--cuda wants a GPU id >= 0, got " + v);
      o.cuda.push_back(id);
    } else if (take("--numa", argc, argv, i, v)) {
      const int id = parse_int(v, "--numa");
      if (id < 0) throw Error("--numa wants a NUMA node id >= 0, got " + v);
      o.numa.push_back(id);
    } else if (take("--sizes", argc, argv, i, v)) {
      const auto c1 = v.find(':');
      if (c1 == std::string::npos) throw Error("--sizes wants LO:HI[:STEP] (log2 bytes), got '" + v + "'");
      const auto c2 = v.find(':', c1 + 1);
      o.log2_lo = parse_int(v.substr(0, c1), "--sizes LO");
      o.log2_hi = parse_int(v.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1), "--sizes HI");
      o.log2_step = c2 == std::string::npos ? 1 : parse_int(v.substr(c2 + 1), "--sizes STEP");
      if (o.log2_lo < kMinLog2 || o.log2_hi > kMaxLog2 || o.log2_lo > o.log2_hi || o.log2_step < 1)
        throw Error("--sizes " + v + " is out of range: want " + std::to_string(kMinLog2) + " <= LO <= HI <= " +
                    std::to_string(kMaxLog2) + " and STEP >= 1");
    } else if (take("--atomic-sweep", argc, argv, i, v)) {
      if (v != "default" && v != "full") throw Error("--atomic-sweep wants default or full, got '" + v + "'");
      o.atomic_full = v == "full";
    } else if (a.rfind("--benchmark_", 0) == 0) {
      o.rest.push_back(a);
    } else {
      throw Error("unknown argument '" + a + "' (gv_scope --help lists them)");
    }
  }
  return o;
}

void validate_options(const Options& o, int gpus, const std::vector<bool>& numa_present) {
  for (const int id : o.cuda)
    if (id >= gpus)
      throw Error("--cuda " + std::to_string(id) + ": no such GPU (" + std::to_string(gpus) + " visible" +
                  (gpus > 0 ? ", ids 0.." + std::to_string(gpus - 1) : "") + ")");
  int nodes = 0;
  for (const bool b : numa_present) nodes += b ? 1 : 0;
  for (const int id : o.numa)
    if (static_cast<std::size_t>(id) >= numa_present.size() || !numa_present[static_cast<std::size_t>(id)])
      throw Error("--numa " + std::to_string(id) + ": no such NUMA node (this machine has " + std::to_string(nodes) +
                  (nodes == 1 ? " node" : " nodes") + "; see /sys/devices/system/node)");
}

}  // namespace gv::scope
