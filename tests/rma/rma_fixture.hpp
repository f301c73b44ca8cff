// Host-thread ranks of one process for the rma tests: a World per rank (create_local), one
// thread per rank running the test body, and symmetric blocks allocated on every rank.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gpuverbs/host/world.hpp>
#include <gpuverbs/rma.hpp>

#include "pattern.hpp"

namespace gvt {

using gv::Status;
using gv::World;
using gv::WorldOptions;
using gv::rma::Cmp;
using gv::rma::Endpoint;
using gv::rma::SignalOp;
using gv::rma::Transport;

/// n bytes of seeded stream `seed` at p.
inline void fill(std::byte* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(pattern_byte(seed, i));
}
/// Index of the first byte of [p, p + n) that is not stream `seed`, or n.
inline std::size_t first_wrong(const std::byte* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != static_cast<std::byte>(pattern_byte(seed, i))) return i;
  return n;
}
/// Index of the first byte of [p, p + n) that is not v, or n.
inline std::size_t first_not(const std::byte* p, std::size_t n, std::uint8_t v) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != static_cast<std::byte>(v)) return i;
  return n;
}

struct RmaParam {
  Transport transport;
  int ranks;
};

inline std::string rma_param_name(const ::testing::TestParamInfo<RmaParam>& i) {
  return std::string(gv::rma::to_string(i.param.transport)) + "_" + std::to_string(i.param.ranks) + "ranks";
}

class RmaHost : public ::testing::TestWithParam<RmaParam> {
 protected:
  void SetUp() override { make(options()); }

  WorldOptions options() const {
    WorldOptions o;
    o.memory = WorldOptions::Memory::kHost;
    o.transport = GetParam().transport;
    o.heap_bytes = std::size_t{8} << 20;
    o.ib_lanes = 2;
    return o;
  }
  void make(const WorldOptions& o) {
    worlds_.clear();
    worlds_ = World::create_local(GetParam().ranks, o);
  }
  int n() const { return static_cast<int>(worlds_.size()); }
  World& world(int r) { return *worlds_[static_cast<std::size_t>(r)]; }
  const Endpoint& ep(int r) { return world(r).endpoint(); }

  /// Run body(rank) on one thread per rank.
  void on_ranks(const std::function<void(int)>& body) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n(); ++r) ts.emplace_back(body, r);
    for (auto& t : ts) t.join();
  }

  /// A symmetric block of `count` T on every rank: blocks[r] is rank r's copy (same offset).
  template <class T>
  std::vector<T*> alloc(std::size_t count) {
    std::vector<T*> out;
    for (int r = 0; r < n(); ++r) out.push_back(static_cast<T*>(world(r).alloc(count * sizeof(T))));
    for (int r = 1; r < n(); ++r)
      EXPECT_EQ(reinterpret_cast<std::byte*>(out[static_cast<std::size_t>(r)]) - ep(r).heap,
                reinterpret_cast<std::byte*>(out[0]) - ep(0).heap);
    return out;
  }

  std::vector<std::unique_ptr<World>> worlds_;
};

}  // namespace gvt
