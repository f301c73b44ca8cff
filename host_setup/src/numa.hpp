// Host memory on the GPU's NUMA node: which node a PCI device hangs off (sysfs), binding a
// range's pages to a node (libnuma's mbind), and asking the kernel where pages live
// (move_pages), for the host rings, doorbell records and heaps the GPU reads across PCIe.
#pragma once
#include <cstddef>
#include <string>

namespace gv::detail {

/// The NUMA node of PCI device `bdf` ("0000:1b:00.0", any case), read from
/// <sysfs>/bus/pci/devices/<bdf>/numa_node; -1 where the kernel does not know (one-node
/// machines report -1) or the device does not exist.
int pci_numa_node(const std::string& bdf, const std::string& sysfs = "/sys");

/// NUMA nodes the kernel reports (1 where libnuma is unavailable).
int numa_node_count();

/// Binds the pages of [p, p + bytes) to `node` before they are first touched (mbind,
/// MPOL_BIND + MPOL_MF_MOVE for pages already touched). Returns false, leaving the range as it
/// was, where node < 0, the machine has one node, or the kernel refuses; `why` then says so.
bool bind_to_node(void* p, std::size_t bytes, int node, std::string* why = nullptr);

/// The node of the page holding `p` (touched pages only), or -1 with errno's text in `why`.
int page_node(const void* p, std::string* why = nullptr);

/// What describe() says of host memory on `node` for a GPU on `gpu_node`, on a machine of
/// `nodes` NUMA nodes.
std::string numa_placement_text(int node, int gpu_node, int nodes);

/// The NUMA node of CUDA device `gpu` (its PCI device's); -1 where unknown, and in builds
/// without CUDA.
int gpu_numa_node(int gpu);

/// Binds [p, p + bytes) to GPU `gpu`'s NUMA node before its pages are first touched (host
/// rings, doorbell records and heaps a GPU reads across PCIe); returns what describe() says of
/// the placement, the reason included where it could not be made.
std::string place_near_gpu(void* p, std::size_t bytes, int gpu);

}  // namespace gv::detail
