// gv_scope's host side without a GPU: its command line, the Atomic-RMW patterns and host
// reference, the cache flush, and NUMA placement (libnuma binding, the GPU's node from sysfs,
// pages checked with move_pages).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

#include "atomics_kernels.cuh"
#include "host_env.hpp"
#include "numa.hpp"
#include "options.hpp"
#include "rounds.hpp"

namespace gs = gv::scope;

namespace {

gs::Options parse(std::vector<std::string> a) {
  a.insert(a.begin(), "gv_scope");
  std::vector<char*> v;
  for (auto& s : a) v.push_back(s.data());
  return gs::parse_options(static_cast<int>(v.size()), v.data());
}

std::string error_of(std::vector<std::string> a) {
  try {
    (void)parse(std::move(a));
  } catch (const gv::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ScopeOptions, RepeatableIdsSizesAndGoogleBenchmarkFlags) {
  const gs::Options o = parse({"--cuda", "1", "--cuda=0", "--numa", "0", "--sizes=12:20:4", "--benchmark_filter=Pinned",
                               "--atomic-sweep", "full", "--benchmark_out_format=json"});
  EXPECT_EQ(o.cuda, (std::vector<int>{1, 0}));
  EXPECT_EQ(o.numa, (std::vector<int>{0}));
  EXPECT_EQ(o.log2_lo, 12);
  EXPECT_EQ(o.log2_hi, 20);
  EXPECT_EQ(o.log2_step, 4);
  EXPECT_TRUE(o.atomic_full);
  EXPECT_EQ(o.rest, (std::vector<std::string>{"gv_scope", "--benchmark_filter=Pinned", "--benchmark_out_format=json"}));
  const gs::Options d = parse({});
  EXPECT_EQ(d.log2_lo, 10);
  EXPECT_EQ(d.log2_hi, 28);
  EXPECT_EQ(d.log2_step, 2);
  EXPECT_FALSE(d.atomic_full);
  EXPECT_EQ(parse({"--sizes", "8:33"}).log2_step, 1);
}

TEST(ScopeOptions, BadInputNamesTheArgument) {
  EXPECT_NE(error_of({"--cuda", "x"}).find("--cuda wants a whole number"), std::string::npos);
  EXPECT_NE(error_of({"--cuda", "-1"}).find("GPU id >= 0"), std::string::npos);
  EXPECT_NE(error_of({"--numa"}).find("--numa needs a value"), std::string::npos);
  EXPECT_NE(error_of({"--sizes", "7:20"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of({"--sizes", "10:34"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of({"--sizes", "20:10"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of({"--sizes", "10:20:0"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of({"--sizes", "10"}).find("LO:HI"), std::string::npos);
  EXPECT_NE(error_of({"--atomic-sweep", "most"}).find("default or full"), std::string::npos);
  EXPECT_NE(error_of({"--frobnicate"}).find("unknown argument '--frobnicate'"), std::string::npos);
  EXPECT_EQ(error_of({"--cuda", "3"}), "");
}

TEST(ScopeOptions, IdsCheckedAgainstTheMachine) {
  const gs::Options o = parse({"--cuda", "1", "--numa", "2"});
  EXPECT_NO_THROW(gs::validate_options(o, 2, {true, false, true}));
  try {
    gs::validate_options(o, 1, {true, false, true});
    ADD_FAILURE() << "GPU 1 of 1 accepted";
  } catch (const gv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda 1: no such GPU (1 visible, ids 0..0)"), std::string::npos) << e.what();
  }
  try {
    gs::validate_options(o, 2, {true, true, false});
    ADD_FAILURE() << "absent node 2 accepted";
  } catch (const gv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--numa 2: no such NUMA node (this machine has 2 nodes"), std::string::npos) << e.what();
  }
}

// Each word of the contiguous, branched and cross-warp patterns is shared by exactly
// `contention` threads, padding words apart, all inside pattern_words(); random stays inside
// too and on padded words.
TEST(ScopePatterns, ContentionAndPaddingAsTheStudyDefinesThem) {
  const std::uint64_t n = 4096;
  for (std::uint64_t c = 1; c <= 1024; c *= 2)
    for (std::uint64_t p = 1; p <= 1024; p *= 4)
      for (const auto pat : {gs::Pattern::kContiguous, gs::Pattern::kBranched, gs::Pattern::kCrossWarp, gs::Pattern::kRandom}) {
        const std::uint64_t words = gs::pattern_words(n, c, p);
        std::map<std::uint64_t, std::uint64_t> hits;
        std::uint32_t state = gs::lcg_seed(7);
        for (std::uint64_t g = 0; g < n; ++g) {
          state = gs::lcg_next(state);
          const std::uint64_t i = gs::pattern_index(pat, g, n, c, p, state);
          ASSERT_LT(i, words);
          ASSERT_EQ(i % p, 0u);
          ++hits[i];
        }
        if (pat == gs::Pattern::kRandom) continue;
        EXPECT_EQ(hits.size(), n / c) << gs::pattern_name(pat) << " c=" << c << " p=" << p;
        for (const auto& [w, k] : hits) ASSERT_EQ(k, c) << gs::pattern_name(pat) << " word " << w;
      }
  // Contiguous neighbours share a word; cross-warp neighbours never do (contention < n).
  EXPECT_EQ(gs::pattern_index(gs::Pattern::kContiguous, 0, n, 32, 1, 0), gs::pattern_index(gs::Pattern::kContiguous, 31, n, 32, 1, 0));
  EXPECT_NE(gs::pattern_index(gs::Pattern::kCrossWarp, 0, n, 32, 1, 0), gs::pattern_index(gs::Pattern::kCrossWarp, 1, n, 32, 1, 0));
  EXPECT_EQ(gs::lcg_next(0), 1013904223u);
  EXPECT_EQ(gs::lcg_next(1), 1664525u + 1013904223u);
}

// The host reference accepts what a correct run leaves and names the first wrong word.
TEST(ScopePatterns, HostReferenceCatchesAWrongWord) {
  const std::uint64_t n = 2048, c = 4, p = 2;
  const std::uint32_t iters = 3;
  for (int oi = 0; oi < gs::kOps; ++oi)
    for (const auto pat : {gs::Pattern::kContiguous, gs::Pattern::kCrossWarp, gs::Pattern::kRandom}) {
      const auto o = static_cast<gs::Op>(oi);
      std::vector<std::uint32_t> w(gs::pattern_words(n, c, p), gs::rmw_init(o));
      for (std::uint64_t g = 0; g < n; ++g) {  // the kernel's effect, serially
        std::uint32_t state = gs::lcg_seed(g);
        for (std::uint32_t it = 0; it < iters; ++it) {
          if (pat == gs::Pattern::kRandom) state = gs::lcg_next(state);
          std::uint32_t& x = w[gs::pattern_index(pat, g, n, c, p, state)];
          const std::uint32_t v = gs::rmw_value(g, it, iters);
          if (o == gs::Op::kExch) x = v;
          else if (o == gs::Op::kMin) x = std::min(x, v);
          else if (o == gs::Op::kMax) x = std::max(x, v);
          else ++x;
        }
      }
      EXPECT_EQ(gs::check_rmw(o, pat, w.data(), n, c, p, iters, gs::rmw_init(o)), -1) << gs::op_name(o);
      w[p * 5] += 7;
      EXPECT_EQ(gs::check_rmw(o, pat, w.data(), n, c, p, iters, gs::rmw_init(o)), static_cast<long long>(p * 5))
          << gs::op_name(o) << " " << gs::pattern_name(pat);
      w[p * 5] -= 7;
      w[1] = 9;  // a padding word: never touched by a correct run
      EXPECT_EQ(gs::check_rmw(o, pat, w.data(), n, c, p, iters, gs::rmw_init(o)), 1) << gs::op_name(o);
    }
}

TEST(ScopeRounds, BesideItsPlainRowAMethodMedianIsOverAnOddCountOfAtLeastThePlainRuns) {
  // Two long rounds: sorted[1] would be the slower one; 11 rounds, like the plain row's median.
  EXPECT_EQ(gs::median_rounds(2, true), 11u);
  EXPECT_EQ(gs::median_rounds(1, true), 11u);
  EXPECT_EQ(gs::median_rounds(11, true), 11u);
  EXPECT_EQ(gs::median_rounds(12, true), 13u);
  EXPECT_EQ(gs::median_rounds(67, true), 67u);
  static_assert(gs::kPlainRuns % 2 == 1, "the plain row's median is a true median");
  // Rows without a plain row keep what Google Benchmark ran.
  EXPECT_EQ(gs::median_rounds(2, false), 2u);
  EXPECT_EQ(gs::median_rounds(0, false), 0u);
}

TEST(ScopeFlush, EveryLineOfAnUnalignedRangeAndTheDataKept) {
  std::vector<unsigned char> b(10000);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(i * 31);
  const auto* p = b.data() + 3;
  const auto lo = reinterpret_cast<std::uintptr_t>(p) / gs::kCacheLine;
  const auto hi = (reinterpret_cast<std::uintptr_t>(p) + 9000 - 1) / gs::kCacheLine;
  EXPECT_EQ(gs::flush_cache(p, 9000), hi - lo + 1);
  EXPECT_EQ(gs::flush_cache(p, 0), 0u);
  EXPECT_EQ(gs::flush_cache(b.data() + 64 - reinterpret_cast<std::uintptr_t>(b.data()) % 64, 1), 1u);
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], static_cast<unsigned char>(i * 31));
}

// gv_scope binds its host memory with libnuma: pages first touched inside a NumaScope live on
// that node (move_pages says so).
TEST(ScopeNuma, PagesTouchedInsideABindingLiveOnItsNode) {
  const std::vector<bool> nodes = gs::numa_nodes_present();
  ASSERT_FALSE(nodes.empty());
  int count = 0;
  for (const bool b : nodes) count += b ? 1 : 0;
  EXPECT_EQ(count, gv::detail::numa_node_count());
  std::cout << "this machine has " << count << (count == 1 ? " NUMA node" : " NUMA nodes") << "\n";
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    if (!nodes[n]) continue;
    gs::NumaScope bind(static_cast<int>(n));
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = std::aligned_alloc(page, 16 * page);
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, 16 * page);
    std::string why;
    EXPECT_EQ(gv::detail::page_node(p, &why), static_cast<int>(n)) << why;
    std::free(p);
  }
}

// host_setup's placement helper: the GPU's node read from its PCI device's sysfs entry.
TEST(ScopeNuma, PciNodeFromSysfs) {
  const auto root = std::filesystem::temp_directory_path() / ("gv_sysfs_" + std::to_string(getpid()));
  const auto dev = root / "bus/pci/devices/0000:1b:00.0";
  std::filesystem::create_directories(dev);
  std::ofstream(dev / "numa_node") << "1\n";
  EXPECT_EQ(gv::detail::pci_numa_node("0000:1B:00.0", root.string()), 1);  // cudaDeviceGetPCIBusId's case
  std::ofstream(dev / "numa_node") << "-1\n";
  EXPECT_EQ(gv::detail::pci_numa_node("0000:1b:00.0", root.string()), -1);
  EXPECT_EQ(gv::detail::pci_numa_node("0000:99:00.0", root.string()), -1);
  std::filesystem::remove_all(root);
  EXPECT_NE(gv::detail::numa_placement_text(0, 0, 1).find("one NUMA node"), std::string::npos);
  EXPECT_NE(gv::detail::numa_placement_text(1, 1, 2).find("NUMA node 1 (the GPU's)"), std::string::npos);
  EXPECT_NE(gv::detail::numa_placement_text(0, -1, 2).find("unknown"), std::string::npos);
}

// bind_to_node moves a range to a node; where the machine has one node it refuses with that
// reason and leaves the range alone.
TEST(ScopeNuma, BindRangeToANode) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), bytes = 8 * page;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::string why;
  EXPECT_FALSE(gv::detail::bind_to_node(p, bytes, -1, &why));
  EXPECT_NE(why.find("unknown"), std::string::npos);
  const int nodes = gv::detail::numa_node_count();
  if (nodes == 1) {
    EXPECT_FALSE(gv::detail::bind_to_node(p, bytes, 0, &why));
    EXPECT_EQ(why, "this machine has one NUMA node");
    munmap(p, bytes);
    GTEST_SKIP() << "this machine has one NUMA node: placement on another node cannot be shown here";
  }
  const std::vector<bool> present = gs::numa_nodes_present();
  const int last = static_cast<int>(present.size()) - 1;
  ASSERT_TRUE(gv::detail::bind_to_node(p, bytes, last, &why)) << why;
  std::memset(p, 1, bytes);
  for (std::size_t i = 0; i < bytes; i += page)
    EXPECT_EQ(gv::detail::page_node(static_cast<char*>(p) + i, &why), last) << why;
  munmap(p, bytes);
}

// Device::describe() says where a soft device's queues live; unmapped, plain host memory.
TEST(ScopeNuma, SoftDeviceDescribesItsPlacement) {
  const auto d = gv::Device::open("soft");
  EXPECT_EQ(d->describe(), "soft (CPU engine): queues, doorbell records and alloc() memory in host memory (not mapped into the GPUs)");
}
