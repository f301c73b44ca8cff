// Registration-time probe of host pages (host_pages.hpp).
#include "host_pages.hpp"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "../provider.hpp"

namespace gv::detail {

void require_host_pages(const char* who, const void* addr, std::size_t len, bool writable) {
  const auto lo = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t hi = lo + len;  // the caller refused ranges that wrap
  const std::string range = std::string(who) + ": [" + hex(lo) + ", +" + std::to_string(len) + ") ";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> maps(std::fopen("/proc/self/maps", "re"), &std::fclose);
  if (!maps)
    throw Error(std::string(who) + ": cannot read /proc/self/maps to check that the memory is mapped; "
                "mount /proc");
  std::uintptr_t covered = lo;  // [lo, covered) is mapped with the rights needed
  char line[512];
  while (covered < hi && std::fgets(line, sizeof(line), maps.get()) != nullptr) {
    std::uintmax_t start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%" SCNxMAX "-%" SCNxMAX " %4s", &start, &end, perms) != 3) continue;
    if (end <= covered) continue;
    if (start > covered) break;  // a hole (the mappings are listed in address order)
    if (perms[0] != 'r' || (writable && perms[1] != 'w'))
      throw Error(range + "includes a page at " + hex(static_cast<std::uint64_t>(covered)) + " mapped " +
                  perms + (writable ? ", not readable and writable" : ", not readable") +
                  ": ibv_reg_mr fails there with EFAULT; register memory this process can " +
                  (writable ? "write, or grant no write access" : "read"));
    covered = static_cast<std::uintptr_t>(end);
  }
  if (covered < hi)
    throw Error(range + "is not mapped in this process from " + hex(static_cast<std::uint64_t>(covered)) +
                ": ibv_reg_mr fails there with EFAULT; register memory this process has allocated");
}

}  // namespace gv::detail
