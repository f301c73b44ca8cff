// A soft device mapped into the GPUs keeps its host rings, doorbell records and alloc() memory
// on the GPU's NUMA node (read from the GPU's PCI device), and describe() says so; a one-node
// machine says it has one node. Needs a GPU (map_to_gpus); skips with the reason without one.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "numa.hpp"

TEST(NumaPlacement, MappedSoftDeviceOnTheGpusNode) {
  gv::DeviceOptions o;
  o.map_to_gpus = true;
  o.gpu = 0;
  std::unique_ptr<gv::Device> d;
  try {
    d = gv::Device::open("soft", o);
  } catch (const gv::Error& e) {
    const std::string w = e.what();
    if (w.find("needs a GPU") != std::string::npos || w.find("built with CUDA") != std::string::npos) GTEST_SKIP() << w;
    throw;
  }
  const std::string text = d->describe();
  std::cout << text << "\n";
  const int nodes = gv::detail::numa_node_count();
  const int gpu_node = gv::detail::gpu_numa_node(0);
  void* p = d->alloc(std::size_t{4} << 20);
  std::memset(p, 0x5a, std::size_t{4} << 20);
  std::string why;
  const int at = gv::detail::page_node(p, &why);
  ASSERT_GE(at, 0) << why;
  if (nodes == 1) {
    EXPECT_NE(text.find("the machine's one NUMA node"), std::string::npos) << text;
  } else if (gpu_node < 0) {
    EXPECT_NE(text.find("unknown"), std::string::npos) << text;
  } else {
    EXPECT_NE(text.find("NUMA node " + std::to_string(gpu_node) + " (the GPU's)"), std::string::npos) << text;
    EXPECT_EQ(at, gpu_node) << "alloc() memory is not on GPU 0's NUMA node";
  }
  d->free(p);
}
