// The software HCA's memory translation: a key and a range checked against the MR table of an
// arena (key, protection domain, bounds, access) and turned into an address the engine reaches.
#pragma once
#include <cstdint>

#include <gpuverbs/sync.hpp>

#include "arena.hpp"

namespace gv::soft {

enum class MemCheck : std::uint8_t { kOk, kNoKey, kPd, kBounds, kAccess, kUnreachable };

/// A table field another agent may rewrite (an MR entry's, a peer QP's): ld.cg on the GPU
/// (from L2, or from the peer over NVLink; never a stale L1 line), so the loads of one entry
/// are all in flight together and a peer GPU's entry costs one round trip; a relaxed atomic
/// load on the host (some fields, a QP's state, change while we read).
template <class T>
GV_HD GV_INLINE T load_field(const T* p) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 8) return static_cast<T>(__ldcg(reinterpret_cast<const unsigned long long*>(p)));
  else return static_cast<T>(__ldcg(reinterpret_cast<const unsigned int*>(p)));
#else
  return sync::load_relaxed(p);
#endif
}

/// The field an entry's writer stores last (an MR's key, a QP's qpn): load_field() on the GPU,
/// an acquire load on the host, issued before the entry's other loads.
GV_HD GV_INLINE std::uint32_t load_key(const std::uint32_t* p) {
#if GV_DEVICE_PASS
  return load_field(p);
#else
  return sync::load_acquire(p);
#endif
}

/// The MR entry a key names in arena `a` (one round of loads), or an empty entry for a key
/// outside the table. len == 0 needs no key (IB), so no load is made for it.
GV_HD GV_INLINE MrEntry load_mr(const Arena& a, std::uint32_t key, std::uint64_t len) {
  MrEntry e{};
  if (len == 0 || mr_slot(key) >= kMaxMrs) return e;
  const MrEntry* m = a.mrs() + mr_slot(key);
  e.key = load_key(&m->key);
  e.access = load_field(&m->access);
  e.pdn = load_field(&m->pdn);
  e.in_arena = load_field(&m->in_arena);
  e.addr = load_field(&m->addr);
  e.length = load_field(&m->length);
  e.arena_off = load_field(&m->arena_off);
  return e;
}

/// Check [addr, addr+len) under `key` against the MR entry `mr` of arena `a` (from load_mr):
/// key, protection domain, bounds and access rights; on success `out` is the range's address
/// in this engine. `owner_pid` is the process owning `a`: memory outside an arena is
/// reachable only in our own process.
GV_HD GV_INLINE MemCheck check_mr(const Arena& a, const MrEntry& mr, std::int32_t owner_pid,
                                  std::int32_t self_pid, std::uint32_t key, std::uint64_t addr,
                                  std::uint64_t len, std::uint32_t pdn, std::uint32_t need,
                                  std::byte*& out) {
  out = nullptr;
  if (len == 0) return MemCheck::kOk;
  if (mr.key != key || key == 0) return MemCheck::kNoKey;
  if (mr.pdn != pdn) return MemCheck::kPd;
  if (addr < mr.addr || len > mr.length || addr - mr.addr > mr.length - len)
    return MemCheck::kBounds;
  if ((mr.access & need) != need) return MemCheck::kAccess;
  if (mr.in_arena) {
    out = a.base + mr.arena_off + (addr - mr.addr);
  } else if (owner_pid == self_pid) {
    out = reinterpret_cast<std::byte*>(addr);
  } else {
    return MemCheck::kUnreachable;  // private memory of another process
  }
  return MemCheck::kOk;
}

/// load_mr and check_mr in one step.
GV_HD GV_INLINE MemCheck resolve(const Arena& a, std::int32_t owner_pid, std::int32_t self_pid,
                                 std::uint32_t key, std::uint64_t addr, std::uint64_t len,
                                 std::uint32_t pdn, std::uint32_t need, std::byte*& out) {
  return check_mr(a, load_mr(a, key, len), owner_pid, self_pid, key, addr, len, pdn, need, out);
}

}  // namespace gv::soft
