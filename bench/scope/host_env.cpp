#include "host_env.hpp"

#include <numa.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <gpuverbs/host/verbs.hpp>

namespace gv::scope {

std::size_t flush_cache(const void* p, std::size_t bytes) {
  if (bytes == 0) return 0;
  const auto lo = reinterpret_cast<std::uintptr_t>(p) & ~(kCacheLine - 1);
  const auto hi = reinterpret_cast<std::uintptr_t>(p) + bytes;
  std::size_t lines = 0;
#if defined(__x86_64__)
  __builtin_ia32_mfence();
  for (std::uintptr_t a = lo; a < hi; a += kCacheLine, ++lines) __builtin_ia32_clflush(reinterpret_cast<const void*>(a));
  __builtin_ia32_mfence();
#elif defined(__aarch64__)
  asm volatile("dsb ish" ::: "memory");
  for (std::uintptr_t a = lo; a < hi; a += kCacheLine, ++lines) asm volatile("dc civac, %0" ::"r"(a) : "memory");
  asm volatile("dsb ish" ::: "memory");
#else
#error "flush_cache: no cache-line flush for this architecture"
#endif
  return lines;
}

std::vector<bool> numa_nodes_present() {
  if (numa_available() < 0) return {true};
  std::vector<bool> v(static_cast<std::size_t>(numa_max_node()) + 1, false);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(i));
  return v;
}

NumaScope::NumaScope(int node) {
  if (numa_available() < 0) return;
  numa_set_strict(1);
  numa_set_bind_policy(1);
  struct bitmask* m = numa_allocate_nodemask();
  numa_bitmask_setbit(m, static_cast<unsigned>(node));
  numa_set_membind(m);
  numa_bitmask_free(m);
  if (numa_run_on_node(node) != 0) {
    const int err = errno;
    numa_set_membind(numa_all_nodes_ptr);
    throw Error("numa_run_on_node(" + std::to_string(node) + "): " + std::strerror(err));
  }
  bound_ = true;
}

NumaScope::~NumaScope() {
  if (!bound_) return;
  numa_set_membind(numa_all_nodes_ptr);
  (void)numa_run_on_node(-1);
}

}  // namespace gv::scope
