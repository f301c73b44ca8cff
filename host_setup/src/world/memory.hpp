// How peers in other processes map a World's heap: what one exports (a shared-memory file for
// host ranks, a CUDA IPC handle for GPU ranks: placement_cuda.cpp), and the shared-memory files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace gv::detail {

/// What a peer needs to map this rank's heap into its address space.
struct HeapExport {
  enum Kind : std::uint32_t { kNone = 0, kShm = 1, kCudaIpc = 2 };
  std::uint32_t kind = kNone;
  std::uint32_t pad = 0;
  std::uint64_t offset = 0;        ///< of the heap inside the exported allocation
  std::uint64_t bytes = 0;         ///< of the heap
  char shm_name[64] = {};
  unsigned char ipc[64] = {};
};

/// A shared-memory file of `bytes` (zeroed), mapped here; `name` gets its name.
std::byte* create_shared_heap(std::size_t bytes, std::string& name);
/// Another process's shared heap mapped here.
std::byte* map_shared_heap(const HeapExport& e);
void unmap_heap(void* p, std::size_t bytes);
/// Remove the name (mappings stay): nothing is left behind if a process dies later.
void unlink_shared_heap(const std::string& name);

}  // namespace gv::detail
