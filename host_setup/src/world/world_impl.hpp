// What a World holds (world_setup.cpp builds it, world.cpp serves the calls).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gpuverbs/host/world.hpp>

#include "../soft/heap.hpp"
#include "bootstrap.hpp"
#include "placement.hpp"

namespace gv {

struct World::Impl {
  std::unique_ptr<detail::Bootstrap> boot;
  WorldOptions opt;
  int rank = 0, size = 1, local_rank = 0, local_size = 1, gpu = -1;
  std::vector<rma::Transport> transports;

  // Memory: the tables' space (a GPU's for GPU ranks), the heap, the peers' heaps mapped here.
  std::unique_ptr<detail::Space> gpu_memory;     ///< GPU ranks
  detail::Space* space = &detail::host_space();  ///< where the tables live
  std::unique_ptr<detail::HeapPlacement> heap;
  std::size_t user_offset = 0;
  std::unique_ptr<detail::PeerHeaps> peer_heaps;
  std::vector<std::byte*> peer_base;             ///< kSelf / kP2p heaps in this address space
  detail::Heap blocks;                           ///< the symmetric allocator (user part of the heap)

  // ib (the software HCA).
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<MemoryRegion> heap_mr, results_mr;
  std::vector<std::unique_ptr<CompletionQueue>> cqs;
  std::vector<std::unique_ptr<QueuePair>> qps;  ///< [peer * lanes + lane], null for non-ib peers
  std::uint64_t* results = nullptr;             ///< Device::alloc memory, one slot per SQ position
  std::uint32_t sq_bbs = 0;
  static constexpr std::uint32_t kIbInline = 64;

  // Tables the endpoint points to (in `space`).
  rma::Peer* peers = nullptr;
  rma::IbLane* lanes = nullptr;
  rma::LaneState* lane_states = nullptr;
  std::uint32_t* abort_flag = nullptr;
  rma::Endpoint ep;

  mutable std::mutex fail_mu;
  std::string failure;
  /// World::abort() was called: this rank has left, and ~World does not wait for the others.
  std::atomic<bool> left{false};

  ~Impl();
  void setup(const WorldOptions& o);
  void raise_abort();
  void on_failure(const std::string& why);
  void take_device_events();
  bool gpu_mode() const { return gpu >= 0; }
  /// The software HCA's engine for ib peers: the GPU engine only for GPU heaps.
  bool gpu_engine() const { return gpu_mode() && opt.ib_engine != WorldOptions::Engine::kCpu; }
};

}  // namespace gv
