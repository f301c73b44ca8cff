// The host side of a measurement, as Comm|Scope controls it: CPU caches flushed over a buffer
// before a copy (the `_flush` families), and host threads and memory pinned to a NUMA node.
// Plain C++ (libnuma), so CPU tests check both.
#pragma once
#include <cstddef>
#include <vector>

namespace gv::scope {

inline constexpr std::size_t kCacheLine = 64;

/// Writes back and evicts every cache line of [p, p + bytes) (x86 clflush / Arm dc civac,
/// fenced on both sides, as Comm|Scope's flush). Returns the lines flushed.
std::size_t flush_cache(const void* p, std::size_t bytes);

/// Which NUMA node ids exist (index = id); {true} where libnuma is unavailable.
std::vector<bool> numa_nodes_present();

/// Binds this thread's CPU and future allocations to `node` (numa_run_on_node +
/// numa_set_membind, strict) for the scope; restores every node afterwards. Does nothing where
/// libnuma is unavailable. Throws gv::Error if the kernel refuses.
class NumaScope {
 public:
  explicit NumaScope(int node);
  ~NumaScope();
  NumaScope(const NumaScope&) = delete;
  NumaScope& operator=(const NumaScope&) = delete;

 private:
  bool bound_ = false;
};

}  // namespace gv::scope
