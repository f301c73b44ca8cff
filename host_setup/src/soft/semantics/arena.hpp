// The software HCA: one arena as an engine sees it, and the table updates every part of the
// engine makes (QP errors, asynchronous events).
#pragma once
#include <cstddef>
#include <cstdint>

#include <gpuverbs/sync.hpp>

#include "contexts.hpp"

namespace gv::soft {

/// One arena as mapped into the executing engine's address space.
struct Arena {
  std::byte* base = nullptr;
  GV_HD ArenaHeader* hdr() const { return reinterpret_cast<ArenaHeader*>(base); }
  template <class T>
  GV_HD T* at(std::uint64_t off) const { return reinterpret_cast<T*>(base + off); }
  GV_HD MrEntry* mrs() const { return at<MrEntry>(ArenaLayout::kMrs); }
  GV_HD QpCtx* qps() const { return at<QpCtx>(ArenaLayout::kQps); }
  GV_HD CqCtx* cqs() const { return at<CqCtx>(ArenaLayout::kCqs); }
};

/// Minimum qpn-to-slot and key-to-slot mappings, shared with the host library.
GV_HD GV_INLINE constexpr std::uint32_t mr_slot(std::uint32_t key) { return key >> 8; }

GV_HD GV_INLINE void set_qp_error(QpCtx& q) {
  sync::store_release(&q.state, static_cast<std::uint32_t>(QpState::kError));
}

GV_HD GV_INLINE void raise_async(const Arena& a, AsyncEventType type, std::uint32_t number,
                                 std::uint64_t detail) {
  ArenaHeader* h = a.hdr();
  const std::uint64_t i = sync::fetch_add(&h->events_head, std::uint64_t{1});
  AsyncEvent* e = &h->events[i % kAsyncEventSlots];
  sync::store_relaxed(&e->number, number);
  sync::store_relaxed(&e->detail, detail);
  sync::store_release(reinterpret_cast<std::uint32_t*>(&e->type), static_cast<std::uint32_t>(type));
}

/// IB encoding of the minimal RNR NAK timer (IBA table 45), in nanoseconds.
GV_HD GV_INLINE constexpr std::uint64_t rnr_timer_ns(std::uint32_t code) {
  constexpr std::uint32_t us[32] = {655360, 10,    20,    30,    40,    60,    80,    120,
                                    160,    240,   320,   480,   640,   960,   1280,  1920,
                                    2560,   3840,  5120,  7680,  10240, 15360, 20480, 30720,
                                    40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::uint64_t{us[code & 31]} * 1000;
}

}  // namespace gv::soft
