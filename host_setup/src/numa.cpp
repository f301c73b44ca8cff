#include "numa.hpp"

#include <numa.h>
#include <numaif.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#if GPUVERBS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace gv::detail {

int pci_numa_node(const std::string& bdf, const std::string& sysfs) {
  std::string id = bdf;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::ifstream f(sysfs + "/bus/pci/devices/" + id + "/numa_node");
  int node = -1;
  if (!(f >> node)) return -1;
  return node < 0 ? -1 : node;
}

int numa_node_count() {
  if (numa_available() < 0) return 1;
  return std::max(1, numa_num_configured_nodes());
}

bool bind_to_node(void* p, std::size_t bytes, int node, std::string* why) {
  const auto say = [&](const std::string& s) {
    if (why) *why = s;
    return false;
  };
  if (node < 0) return say("the GPU's NUMA node is unknown");
  if (numa_available() < 0) return say("libnuma reports no NUMA support");
  if (node > numa_max_node()) return say("node " + std::to_string(node) + " does not exist");
  if (numa_node_count() == 1) return say("this machine has one NUMA node");
  const auto page = static_cast<std::uintptr_t>(numa_pagesize());
  const auto lo = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  const auto hi = reinterpret_cast<std::uintptr_t>(p) + bytes;
  struct bitmask* mask = numa_allocate_nodemask();
  numa_bitmask_setbit(mask, static_cast<unsigned>(node));
  const long rc = mbind(reinterpret_cast<void*>(lo), hi - lo, MPOL_BIND, mask->maskp, mask->size + 1, MPOL_MF_MOVE);
  const int err = errno;
  numa_bitmask_free(mask);
  if (rc != 0) return say(std::string("mbind: ") + std::strerror(err));
  return true;
}

int page_node(const void* p, std::string* why) {
  void* pages[1] = {const_cast<void*>(p)};
  int status[1] = {-1};
  if (move_pages(0, 1, pages, nullptr, status, 0) != 0) {
    if (why) *why = std::string("move_pages: ") + std::strerror(errno);
    return -1;
  }
  if (status[0] < 0) {
    if (why) *why = std::string("move_pages: page status ") + std::strerror(-status[0]);
    return -1;
  }
  return status[0];
}

std::string numa_placement_text(int node, int gpu_node, int nodes) {
  if (nodes <= 1) return "host memory on the machine's one NUMA node";
  if (gpu_node < 0) return "host memory unplaced (the GPU's NUMA node is unknown)";
  if (node != gpu_node) return "host memory NOT on the GPU's NUMA node " + std::to_string(gpu_node);
  return "host memory on NUMA node " + std::to_string(node) + " (the GPU's)";
}

int gpu_numa_node(int gpu) {
#if GPUVERBS_HAVE_CUDA
  char bdf[32] = {};
  if (cudaDeviceGetPCIBusId(bdf, sizeof(bdf), gpu) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return pci_numa_node(bdf);
#else
  (void)gpu;
  return -1;
#endif
}

std::string place_near_gpu(void* p, std::size_t bytes, int gpu) {
  const int nodes = numa_node_count();
  const int node = gpu_numa_node(gpu);
  if (nodes <= 1) return numa_placement_text(0, node, nodes);
  std::string why;
  if (!bind_to_node(p, bytes, node, &why))
    return "host memory unplaced for GPU " + std::to_string(gpu) + " (" + why + ")";
  return numa_placement_text(node, node, nodes);
}

}  // namespace gv::detail
