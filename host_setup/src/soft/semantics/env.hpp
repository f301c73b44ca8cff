// What an engine gives the software HCA's semantics (soft::Hca): where the arenas are, how bytes
// move, and its clocks and fences. Two engines model it: the CPU engine's CpuEnv (a host
// thread, cpu_engine.cpp) and the GPU engine's GpuEnv (a persistent kernel,
// gpu_engine_kernel.cu); each static_asserts EngineEnv, and Hca requires it.
#pragma once
#include <concepts>
#include <cstdint>

#include <gpuverbs/sync.hpp>

#include "arena.hpp"
#include "qp_visit.hpp"

namespace gv::soft {

template <class E>
concept EngineEnv = requires(E& env, const QpVisit& visit, const Arena& arena, void* dst, const void* src,
                             std::uint64_t* target, std::uint64_t u64, std::uint32_t u32, bool flag) {
  // This engine's arena.
  { env.own() } -> std::same_as<const Arena&>;
  // The peer QP's arena (base null if unreachable); by value, so that the GPU engine keeps its
  // Env in registers.
  { env.peer(visit) } -> std::same_as<Arena>;
  // Move u64 bytes; with `flag` (publish) the last byte is stored last, with release, so a
  // receiver polling the last byte sees the whole message (PCIe write order).
  { env.copy(dst, src, u64, flag) } -> std::same_as<void>;
  // Store the u32 <= 8 low bytes of a value (little-endian), as copy() would.
  { env.put(dst, u64, u32, flag) } -> std::same_as<void>;
  // The responder's 8-byte atomics on a resolved target; both return the value found. Atomic
  // with respect to every other verbs atomic of this process's engines (IBV_ATOMIC_HCA), not
  // necessarily with respect to other stores to the target.
  { env.fetch_add(target, u64) } -> std::same_as<std::uint64_t>;
  { env.compare_swap(target, u64, u64) } -> std::same_as<std::uint64_t>;
  // 0, or the syndrome of a data movement that failed since the last call (a CPU engine's CUDA
  // copy); Hca::finish() fails the WQE with it.
  { env.take_fault() } -> std::same_as<std::uint8_t>;
  // Whether this visit executes a (well-formed) WQE whose payload is u64 bytes; false ends the
  // visit before it, the WQE untouched at sq_head (the GPU engine's lanes leave large payloads
  // to their converged warp). The engine must then visit the QP again with an Env that says true.
  { env.may_move(u64) } -> std::same_as<bool>;
  { env.now_ns() } -> std::same_as<std::uint64_t>;
  // The process whose private (non-arena) memory this engine reaches.
  { env.self_pid() } -> std::same_as<std::int32_t>;
  // The scope whose observers must see this engine's stores to that arena: its own GPU for a GPU
  // engine's own arena, the system otherwise.
  { env.scope(arena) } -> std::same_as<sync::Scope>;
  // Order every byte copy() and put() stored before what the engine stores next; called before
  // a CQE and at the end of a burst. With publish, put() and copy() may leave a message that fits
  // in one store unsettled: its receiver need not wait for a fence.
  { env.settle() } -> std::same_as<void>;
  // Before a WQE moves data: order the earlier messages' bytes before this WQE's (RC order). May
  // be lazier than settle(): a message's released last byte needs no fence before data whose own
  // publication is a release (the GPU engine fences only before a single relaxed store or an atomic).
  { env.order_messages() } -> std::same_as<void>;
  // After the u32-th round of an idle check's loads: whether to load again at once rather than
  // end the visit (`flag`: the QP is idle and its visit kept on chip).
  { env.poll_again(flag, u32) } -> std::same_as<bool>;
};

}  // namespace gv::soft
