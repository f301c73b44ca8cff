// gv_scope's own command line, read before Google Benchmark sees the rest: --cuda ID and
// --numa ID (repeatable, as Comm|Scope), --sizes LO:HI[:STEP] (log2 bytes of the transfer sweeps) and
// --atomic-sweep default|full. Pure C++ so CPU tests pin it.
#pragma once
#include <string>
#include <vector>

namespace gv::scope {

inline constexpr int kMinLog2 = 8;    ///< 256 B: below this a copy is launch cost only
inline constexpr int kMaxLog2 = 33;   ///< 8 GiB, Comm|Scope's largest peer size

struct Options {
  std::vector<int> cuda;  ///< empty: every visible GPU
  std::vector<int> numa;  ///< empty: the GPU's own node (or node 0)
  int log2_lo = 10, log2_hi = 28, log2_step = 2;  ///< transfer sizes 2^lo, 2^(lo+step) .. 2^hi bytes
  bool atomic_full = false;        ///< every op × scope × memory over the whole 11×11 sweep
  bool help = false;
  std::vector<std::string> rest;   ///< argv[0] and what Google Benchmark reads
};

/// Parses argv; throws gv::Error (message names the argument and what is allowed) on a bad one.
Options parse_options(int argc, char** argv);

/// Checks the chosen ids against the machine (`gpus` visible, NUMA nodes 0..numa_max with
/// `numa_present[i]` saying whether node i exists); throws gv::Error naming the bad id.
void validate_options(const Options& o, int gpus, const std::vector<bool>& numa_present);

std::string usage();

}  // namespace gv::scope
