// Host memory a memory region may cover: probed at registration, as ibv_reg_mr probes it by
// pinning the pages (and fails with EFAULT where that fails).
#pragma once
#include <cstddef>

namespace gv::detail {

/// Throws gv::Error (`who` first) unless every page of [addr, addr + len) is mapped in this
/// process, readable, and writable too when `writable` (a registration that grants local or
/// remote write). Reads /proc/self/maps once: a slow-path cost, as pinning is for an HCA. What
/// is unmapped after the registration stays the caller's error (the soft HCA pins nothing).
void require_host_pages(const char* who, const void* addr, std::size_t len, bool writable);

}  // namespace gv::detail
