// A first-fit allocator of offsets: the arena's heap (used only by the arena's owner process),
// and a World's symmetric heap (every rank making the same calls gets the same offsets).
#pragma once
#include <cstdint>
#include <map>

namespace gv::detail {

/// First-fit allocator over the arena's heap range. Offsets only; owner process only.
class Heap {
 public:
  void init(std::uint64_t begin, std::uint64_t end) { free_[begin] = end - begin; }

  /// An offset aligned to `align` (a power of two, at most 4096) of at least `bytes` (rounded
  /// up to 64), or 0 when no free range holds it. Sizes near 2^64 fit nowhere: every bound is
  /// checked by subtraction, so no rounding or sum can wrap into a small block.
  std::uint64_t alloc(std::uint64_t bytes, std::uint64_t align) {
    if (bytes > kMaxBytes) return 0;
    bytes = (bytes + 63) & ~std::uint64_t{63};
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const std::uint64_t start = (it->first + align - 1) & ~(align - 1);
      const std::uint64_t end = it->first + it->second;
      if (start > end || bytes > end - start) continue;
      const std::uint64_t lead = start - it->first;
      free_.erase(it);
      if (lead) free_[start - lead] = lead;
      if (end > start + bytes) free_[start + bytes] = end - (start + bytes);
      used_[start] = bytes;
      return start;
    }
    return 0;
  }

  /// Size of the live allocation starting at off, or 0.
  std::uint64_t size_of(std::uint64_t off) const {
    auto it = used_.find(off);
    return it == used_.end() ? 0 : it->second;
  }

  /// True if [off, off+len) lies inside one live allocation (checked by subtraction: no length
  /// wraps around to pass).
  bool inside_live(std::uint64_t off, std::uint64_t len) const {
    auto it = used_.upper_bound(off);
    if (it == used_.begin()) return false;
    --it;
    return off >= it->first && off - it->first <= it->second && len <= it->second - (off - it->first);
  }

  /// The largest free range, in bytes (what one alloc() can still get, before alignment).
  std::uint64_t largest_free() const {
    std::uint64_t m = 0;
    for (const auto& [start, size] : free_) m = size > m ? size : m;
    return m;
  }

  /// Bytes not allocated (in however many pieces).
  std::uint64_t free_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [off, len] : free_) n += len;
    return n;
  }

  void release(std::uint64_t off) {
    auto it = used_.find(off);
    std::uint64_t start = off, size = it->second;
    used_.erase(it);
    auto next = free_.lower_bound(start);
    if (next != free_.end() && start + size == next->first) {
      size += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(start);
    if (prev != free_.begin()) {
      --prev;
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = size;
  }

 private:
  /// No arena is larger; anything above would wrap when rounded up to 64.
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;
  std::map<std::uint64_t, std::uint64_t> free_, used_;
};

}  // namespace gv::detail
