// Where one rank's World memory lives, as objects rather than branches:
// - a Space: the memory of its tables (peer table, lanes, lane states) and how the host writes
//   and reads there: host memory (host ranks) or one GPU's memory (GPU ranks: copies and clears on
//   the World's own non-blocking stream);
// - a HeapPlacement: the symmetric heap, one of three: a shared file (host ranks, shared_file.hpp:
//   the software HCA's arenas are shared the same way), a cudaMalloc (GPU ranks; CUDA IPC for peers of other processes),
//   or the software HCA's memory (Device::alloc, when any peer is reached over ib: the HCA reaches
//   only its own arenas across processes);
// - PeerHeaps: the peers' heaps mapped into this process (shared files, CUDA IPC).
// The CUDA implementations live in placement_cuda.cpp (CUDA builds); without CUDA asking for
// them throws.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

#include "../shared_file.hpp"

namespace gv::detail {

/// What a peer in another process needs to map a rank's heap.
struct HeapExport {
  enum Kind : std::uint32_t { kNone = 0, kShared = 1, kCudaIpc = 2 };
  std::uint32_t kind = kNone;
  std::uint32_t pad = 0;
  std::uint64_t offset = 0;        ///< of the heap inside the exported allocation
  std::uint64_t bytes = 0;         ///< of the heap
  char path[64] = {};              ///< kShared: SharedFile::path()
  unsigned char ipc[64] = {};      ///< kCudaIpc: the allocation's handle
};

class Space {
 public:
  virtual ~Space() = default;
  /// `bytes` zeroed, 64-byte aligned.
  virtual void* alloc(std::size_t bytes, const char* what) = 0;
  virtual void free(void* p) = 0;
  /// Host bytes into this space, complete on return.
  virtual void copy_in(void* dst, const void* src, std::size_t bytes, const char* what) = 0;
  virtual void clear(void* p, std::size_t bytes, const char* what) = 0;
  /// A snapshot of words that kernels may be changing (diagnosis only; zeros if it fails).
  virtual void snapshot(void* dst, const void* src, std::size_t bytes) = 0;
  /// The abort flag: host memory the host raises and this space's readers poll.
  virtual std::uint32_t* alloc_flag() = 0;
  virtual void free_flag(std::uint32_t* flag) = 0;
  /// `*word = *flag` (a 4-byte word of this space), not waited for: the flag stays raised.
  virtual void raise(std::uint32_t* word, const std::uint32_t* flag) = 0;
  /// [p, p + bytes) of this space exported through CUDA IPC, for peers in other processes.
  virtual HeapExport export_ipc(void* p, std::size_t bytes) = 0;
  /// A peer's GPU heap exported through CUDA IPC, opened here until this space ends.
  virtual std::byte* open_ipc(const HeapExport& e) = 0;
};

/// Host memory (one instance, stateless).
Space& host_space();
/// GPU `gpu`'s memory, with a non-blocking stream of its own.
std::unique_ptr<Space> gpu_space(int gpu);

class HeapPlacement {
 public:
  HeapPlacement(std::byte* base, std::size_t bytes, Space& memory) : base_(base), bytes_(bytes), memory_(memory) {}
  virtual ~HeapPlacement() = default;
  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  /// The space whose writes reach the heap's memory (clears, the abort word).
  Space& memory() const { return memory_; }
  /// What a peer in another process needs to map the heap; kNone when it maps nothing.
  virtual HeapExport exported() const { return {}; }

 protected:
  std::byte* base_;
  std::size_t bytes_;
  Space& memory_;
};

/// A shared file (zeroed): host ranks; p2p peers in other processes map it.
std::unique_ptr<HeapPlacement> shared_heap(std::size_t bytes);
/// GPU memory (a cudaMalloc in `memory`, a GPU's space, zeroed); `exported` through CUDA IPC
/// when `ipc` (a p2p peer in another process).
std::unique_ptr<HeapPlacement> cuda_heap(std::size_t bytes, Space& memory, bool ipc);
/// What cuda_heap allocates for a heap of `bytes`: whole 2 MiB pages (the GPU's large page) when
/// other processes map it. A CUDA IPC mapping of an allocation that ends inside a large page took
/// small pages in the importing process: on an H200, scattered 64-byte puts into a peer's heap of
/// 256 MiB + 4 KiB ran at 6.7 Gmsg/s, into the same heap allocated in whole pages at 15.0 (the
/// owner's own rate).
std::size_t gpu_heap_allocation(std::size_t bytes, bool ipc);
/// The software HCA's memory (Device::alloc; the Device frees it), zeroed through `memory`: the
/// GPU's space under the GPU engine (then `exported` through CUDA IPC when `ipc`), host_space()
/// under the CPU engine (whose memory p2p peers in other processes cannot map).
std::unique_ptr<HeapPlacement> device_heap(Device& dev, std::size_t bytes, Space& memory, bool ipc);

/// Peers' heaps mapped into this process; unmapped when destroyed.
class PeerHeaps {
 public:
  explicit PeerHeaps(Space& space) : space_(space) {}
  ~PeerHeaps();
  PeerHeaps(const PeerHeaps&) = delete;
  PeerHeaps& operator=(const PeerHeaps&) = delete;
  /// The heap a peer exported, mapped here; null when it exported nothing.
  std::byte* map(const HeapExport& e);

 private:
  Space& space_;
  std::vector<Mapping> shared_;
};

// ---- GPUs (CUDA builds; without CUDA there are none) --------------------------------------------

/// CUDA devices this process sees (0 without a driver or a GPU).
int gpu_count();
/// Make `gpu` this thread's device; `uuid` gets its UUID.
void use_gpu(int gpu, unsigned char uuid[16]);
/// Whether GPU `gpu` reaches the memory of the GPU with `uuid` (itself, or peer access),
/// enabling peer access in this process when `same_process`.
bool gpu_reaches(int gpu, const unsigned char uuid[16], bool same_process);

}  // namespace gv::detail
