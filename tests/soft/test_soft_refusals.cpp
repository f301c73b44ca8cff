// The software HCA refuses what a ConnectX refuses, before anything is touched: sizes that wrap,
// ranges that wrap or leave their allocation, memory that is not mapped (ibv_reg_mr: EFAULT),
// queues that do not fit; and a remote WRITE never lands outside the range its rkey registered.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "soft_fixture.hpp"

namespace gvt {
namespace {

class SoftRefusals : public ::testing::Test {
 protected:
  std::unique_ptr<gv::Device> dev = gv::Device::open("soft");
  std::unique_ptr<gv::ProtectionDomain> pd = dev->alloc_pd();
};

/// [p, p + n) and [q, q + m) share no byte.
bool disjoint(const void* p, std::size_t n, const void* q, std::size_t m) {
  const auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(q);
  return a + n <= b || b + m <= a;
}

TEST_F(SoftRefusals, AllocOfASizeThatWrapsWhenRoundedIsRefusedAndTheNextDoesNotAlias) {
  void* before = dev->alloc(4096);
  for (const std::size_t n : {SIZE_MAX, SIZE_MAX - 63, SIZE_MAX - 64, SIZE_MAX / 2 + 1, (std::size_t{1} << 62) + 1}) {
    SCOPED_TRACE(n);
    expect_error([&] { dev->alloc(n); }, "do not fit");
  }
  void* p = dev->alloc(4096);
  void* q = dev->alloc(4096);
  EXPECT_TRUE(disjoint(before, 4096, p, 4096));
  EXPECT_TRUE(disjoint(before, 4096, q, 4096));
  EXPECT_TRUE(disjoint(p, 4096, q, 4096));
  dev->free(q);
  dev->free(p);
  dev->free(before);
}

TEST_F(SoftRefusals, AFailedAllocSaysHowLargeTheArenaIsAndWhatToSet) {
  expect_error([&] { dev->alloc(std::size_t{100} << 20); }, "(64 MiB, largest free range ");
  expect_error([&] { dev->alloc(std::size_t{100} << 20); }, "DeviceOptions::arena_bytes of at least 165 MiB");
}

TEST_F(SoftRefusals, RegMrOfARangeThatWrapsIsRefused) {
  void* p = dev->alloc(4096);
  expect_error([&] { pd->reg_mr(p, SIZE_MAX, gv::kLocalWrite); }, "wraps around");
  expect_error([&] { pd->reg_mr(reinterpret_cast<void*>(~std::uintptr_t{0xfff}), 8192, gv::kLocalWrite); },
               "wraps around");
  // The longest range that does not wrap: it leaves the block (the heap compares by
  // subtraction, so no sum wraps back into it).
  const std::size_t to_end = UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(p);
  expect_error([&] { pd->reg_mr(p, to_end, gv::kLocalWrite); }, "not inside one live Device::alloc");
  expect_error([&] { pd->reg_mr(p, 4097, gv::kLocalWrite); }, "not inside one live Device::alloc");
  dev->free(p);
}

TEST_F(SoftRefusals, RegMrOfUnmappedHostMemoryIsRefusedAsIbvRegMrFailsWithEfault) {
  expect_error([&] { pd->reg_mr(reinterpret_cast<void*>(0x1000), 4096, gv::kLocalWrite); }, "is not mapped");
  expect_error([&] { pd->reg_mr(reinterpret_cast<void*>(0x1000), 4096, 0); }, "is not mapped");

  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto* m = static_cast<std::byte*>(mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  EXPECT_NO_THROW(pd->reg_mr(m, 3 * page, kAllAccess));
  // A hole in the middle, then a page with no access, then a read-only one.
  ASSERT_EQ(munmap(m + page, page), 0);
  expect_error([&] { pd->reg_mr(m, 3 * page, gv::kLocalWrite); }, "is not mapped in this process from");
  EXPECT_NO_THROW(pd->reg_mr(m + 2 * page, page, kAllAccess));
  ASSERT_EQ(mprotect(m + 2 * page, page, PROT_NONE), 0);
  expect_error([&] { pd->reg_mr(m + 2 * page, page, 0); }, "not readable");
  ASSERT_EQ(mprotect(m + 2 * page, page, PROT_READ), 0);
  expect_error([&] { pd->reg_mr(m + 2 * page, page, gv::kLocalWrite); }, "not readable and writable");
  expect_error([&] { pd->reg_mr(m + 2 * page, 8, gv::kLocalWrite | gv::kRemoteWrite); }, "not readable and writable");
  EXPECT_NO_THROW(pd->reg_mr(m + 2 * page, page, gv::kRemoteRead));  // read rights on read-only memory
  munmap(m, page);
  munmap(m + 2 * page, page);
}

TEST_F(SoftRefusals, ACqThatDoesNotFitIsRefusedWithItsSizeAndWhatToSet) {
  // 2^20 CQEs take 64 MiB, the whole default arena. The failure names the ring and the fix,
  // and leaves the device usable.
  expect_error([&] { dev->create_cq(1u << 20); }, "create_cq: the ring of 1048576 CQEs of 64 bytes: 67108864 bytes do not fit");
  expect_error([&] { dev->create_cq(1u << 20); }, "arena_bytes of at least");
  auto cq = dev->create_cq(1u << 16);
  auto qp = pd->create_qp(*cq, *cq);
  EXPECT_EQ(cq->entries(), 1u << 16);
}

/// Fill the arena with 16 KiB blocks (then 64-byte ones, to the last byte), and free one block:
/// the heap's only free range is that 16 KiB hole.
std::vector<void*> leave_one_hole(gv::Device& dev) {
  std::vector<void*> held;
  for (;;) {
    try {
      held.push_back(dev.alloc(16384));
    } catch (const gv::Error&) {
      break;
    }
  }
  for (;;) {
    try {
      held.push_back(dev.alloc(64));
    } catch (const gv::Error&) {
      break;
    }
  }
  dev.free(held.front());
  held.erase(held.begin());
  return held;
}

TEST_F(SoftRefusals, AQueueThatFailsPartWayGivesBackWhatItTook) {
  gv::DeviceOptions o;
  o.arena_bytes = std::size_t{8} << 20;
  auto small = gv::Device::open("soft", o);
  auto spd = small->alloc_pd();
  auto cq = small->create_cq(16);
  const std::vector<void*> held = leave_one_hole(*small);
  // A CQ of 256 entries: its 16 KiB ring takes the hole, its doorbell record finds no room. A QP
  // (default caps): its 16 KiB send queue takes the hole, its receive queue finds no room. Each
  // failure, repeated, gives the hole back every time.
  for (int i = 0; i < 3; ++i) {
    expect_error([&] { small->create_cq(256); }, "create_cq: the doorbell record: 64 bytes do not fit");
    expect_error([&] { spd->create_qp(*cq, *cq); }, "create_qp: the receive queue");
  }
  void* hole = small->alloc(16384);
  EXPECT_NE(hole, nullptr);
  small->free(hole);
  for (void* p : held) small->free(p);
}

TEST_F(SoftRefusals, ARemoteWriteNeverLeavesTheRangeItsRkeyRegistered) {
  auto* src = static_cast<std::uint8_t*>(dev->alloc(4096));
  fill_random(src, 4096, 1);
  // Two blocks of b's: `reg` registered, `other` never; both poisoned. (The reported attack
  // registered `reg` with length SIZE_MAX and wrote into `other` through its rkey.)
  auto* reg = static_cast<std::uint8_t*>(dev->alloc(4096));
  auto* other = static_cast<std::uint8_t*>(dev->alloc(4096));
  std::memset(reg, 0x5a, 4096);
  std::memset(other, 0xa5, 4096);
  expect_error([&] { pd->reg_mr(reg, SIZE_MAX, kAllAccess); }, "wraps around");
  expect_error([&] { pd->reg_mr(reg, std::size_t{1} << 40, kAllAccess); }, "not inside one live Device::alloc");
  const auto raddr = [](const void* p, std::int64_t off) {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p) + off);
  };
  struct Try {
    std::uint64_t raddr;
    std::uint32_t len;
  };
  const Try tries[] = {
      {raddr(other, 0), 64},       // another block
      {raddr(reg, 4096 - 32), 64},  // straddles the end
      {raddr(reg, -64), 128},       // starts before the start
      {raddr(reg, 4096), 8},        // just past the end
  };
  for (const Try& t : tries) {
    SCOPED_TRACE(t.raddr - raddr(reg, 0));
    Endpoint x(*dev), y(*dev);  // a fresh pair: the error moves the QP to ERR
    connect_pair(x, y);
    auto lmr = x.pd->reg_mr(src, 4096, kAllAccess);
    const Sge ls{reinterpret_cast<std::uint64_t>(src), t.len, lmr->lkey()};
    auto ymr = y.pd->reg_mr(reg, 4096, kAllAccess);
    post_ok(x, make_wr(WrOpcode::kRdmaWrite, &ls, 1, gv::ib::kWrSignaled, t.raddr, ymr->rkey()));
    const Completion c = wait_cqe(x);
    EXPECT_EQ(c.status, Status::kCompletionError) << gv::describe(c);
    EXPECT_EQ(c.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(c);
  }
  for (int i = 0; i < 4096; ++i) {
    ASSERT_EQ(reg[i], 0x5a) << "registered byte " << i << " was written";
    ASSERT_EQ(other[i], 0xa5) << "unregistered byte " << i << " was written";
  }
  dev->free(other);
  dev->free(reg);
  dev->free(src);
}

}  // namespace
}  // namespace gvt
