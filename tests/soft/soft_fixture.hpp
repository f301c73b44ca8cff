// Shared fixture for software-HCA tests: device-API code runs on host threads against QPs of
// the soft provider's CPU engine.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "expect_error.hpp"

namespace gvt {

using gv::Status;
using gv::ib::Completion;
using gv::ib::Ownership;
using gv::ib::Sge;
using gv::ib::SendWr;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;

/// One connectable endpoint: a QP with its own CQ (send and receive) on `dev`.
struct Endpoint {
  gv::Device* dev = nullptr;
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq;
  std::unique_ptr<gv::QueuePair> qp;
  gv::ib::QpHandle h{};
  gv::ib::CqHandle ch{};

  Endpoint(gv::Device& d, const gv::QpCaps& caps = {}, std::uint32_t cq_depth = 256)
      : dev(&d), pd(d.alloc_pd()), cq(d.create_cq(cq_depth)), qp(pd->create_qp(*cq, *cq, caps)) {}

  /// Take handles once the QP is in its final shape (after connect).
  void take_handles() {
    h = qp->device_handle();
    ch = cq->device_handle();
  }
};

inline void connect_pair(Endpoint& a, Endpoint& b, const gv::ConnectAttr& attr = {}) {
  a.qp->connect(b.qp->info(), attr);
  b.qp->connect(a.qp->info(), attr);
  a.take_handles();
  b.take_handles();
}

/// Seeded random bytes, 8 per draw.
inline void fill_random(std::uint8_t* p, std::size_t len, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(p + i, &v, std::min<std::size_t>(8, len - i));
  }
}

/// A registered buffer allocated from the device's shareable memory, filled with seeded
/// random bytes.
struct Buffer {
  gv::Device* dev;
  std::uint8_t* p;
  std::size_t n;
  std::unique_ptr<gv::MemoryRegion> mr;

  Buffer(gv::Device& d, gv::ProtectionDomain& pd, std::size_t bytes, std::uint32_t access,
         std::uint64_t seed)
      : dev(&d), p(static_cast<std::uint8_t*>(d.alloc(bytes))), n(bytes),
        mr(pd.reg_mr(p, bytes, access)) {
    fill(seed);
  }
  ~Buffer() {
    mr.reset();
    dev->free(p);
  }
  void fill(std::uint64_t seed) { fill_random(p, n, seed); }
  void fill(std::uint64_t seed, std::size_t off, std::size_t len) { fill_random(p + off, len, seed); }
  std::uint64_t addr(std::size_t off = 0) const { return reinterpret_cast<std::uint64_t>(p + off); }
  Sge sge(std::size_t off, std::uint32_t len) const { return Sge{addr(off), len, mr->lkey()}; }
};

using gv::kAllAccess;

/// Wait (bounded: 20 s, generous for sanitizer builds on a loaded 2-core machine) for one
/// completion on the endpoint's CQ.
inline Completion wait_cqe(const Endpoint& e) {
  Completion c;
  const Status st = gv::ib::poll_cq<Ownership::kExclusive>(e.ch, c, gv::Budget{20'000'000'000ull});
  EXPECT_TRUE(st == Status::kOk || st == Status::kCompletionError)
      << "poll_cq: " << gv::to_string(st) << " on CQ " << e.ch.cqn;
  return c;
}

/// Nothing more arrives within `ns`.
inline void expect_no_cqe(const Endpoint& e, std::uint64_t ns = 20'000'000) {
  Completion c;
  const Status st = gv::ib::poll_cq<Ownership::kExclusive>(e.ch, c, gv::Budget{ns});
  EXPECT_EQ(st, Status::kTimeout) << "unexpected completion: " << gv::describe(c);
}

inline SendWr make_wr(WrOpcode op, const Sge* sgl, std::uint32_t n, std::uint32_t flags,
                      std::uint64_t raddr = 0, std::uint32_t rkey = 0) {
  SendWr wr;
  wr.opcode = op;
  wr.sg_list = sgl;
  wr.num_sge = n;
  wr.flags = flags;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return wr;
}

inline void post_ok(const Endpoint& e, const SendWr& wr) {
  ASSERT_EQ(gv::ib::post_send<Ownership::kExclusive>(e.h, wr), Status::kOk);
}

inline void post_recv_ok(const Endpoint& e, const Sge* sgl, std::uint32_t n) {
  ASSERT_EQ(gv::ib::post_recv<Ownership::kExclusive>(e.h, sgl, n), Status::kOk);
}

}  // namespace gvt
