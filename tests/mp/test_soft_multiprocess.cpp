// QPs connected between two processes: the child owns the responder, the parent the
// requester; QpInfo and buffer coordinates travel through pipes, as they would through any
// bootstrap. Device memory is shared through the arena file; private memory is not.
#include <sys/wait.h>
#include <unistd.h>

#include "processes.hpp"
#include "soft_fixture.hpp"

namespace gvt {
namespace {

struct Coords {
  gv::QpInfo qp;
  std::uint64_t addr = 0, private_addr = 0;
  std::uint32_t rkey = 0, private_rkey = 0;
};

template <class T>
bool send_all(int fd, const T& v) {
  return write(fd, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v));
}
template <class T>
bool recv_all(int fd, T& v) {
  return read(fd, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v));
}

constexpr std::size_t kBytes = 1 << 20;

/// The child: responder. Returns the process exit code (0 = all checks passed).
int child_main(int to_parent, int from_parent) {
  auto dev = gv::Device::open("soft");
  Endpoint b(*dev);
  Buffer buf(*dev, *b.pd, kBytes, kAllAccess, 77);
  std::vector<std::uint8_t> priv(4096, 1);
  auto priv_mr = b.pd->reg_mr(priv.data(), priv.size(), kAllAccess);
  Coords mine{b.qp->info(), buf.addr(), reinterpret_cast<std::uint64_t>(priv.data()), buf.mr->rkey(),
              priv_mr->rkey()};
  if (!send_all(to_parent, mine)) return 10;
  Coords peer;
  if (!recv_all(from_parent, peer)) return 11;
  b.qp->connect(peer.qp);
  b.take_handles();
  const Sge r = buf.sge(kBytes - 4096, 4096);
  if (gv::ib::post_recv<Ownership::kExclusive>(b.h, &r, 1) != Status::kOk) return 12;
  if (!send_all(to_parent, std::uint8_t{1})) return 13;  // ready
  Completion c;
  if (gv::ib::poll_cq<Ownership::kExclusive>(b.ch, c) != Status::kOk) return 14;
  if (c.cqe_opcode != m5::kCqeRespSendImm || c.imm != 0x1234 || c.byte_len != 4096) return 15;
  // Report what arrived so the parent can compare with what it sent.
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kBytes; ++i) sum = sum * 1099511628211ull + buf.p[i];
  if (!send_all(to_parent, sum)) return 16;
  std::uint8_t done;
  if (!recv_all(from_parent, done)) return 17;
  return 0;
}

TEST(SoftMultiProcess, AllOpcodesBetweenTwoProcesses) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    int rc;
    try {
      rc = child_main(up[1], down[0]);
    } catch (const std::exception&) {
      rc = 20;
    }
    _exit(rc);
  }
  close(up[1]);
  close(down[0]);

  Coords peer;
  {
    auto dev = gv::Device::open("soft");
    Endpoint a(*dev);
    Buffer buf(*dev, *a.pd, kBytes, kAllAccess, 5);
    ASSERT_TRUE(recv_all(up[0], peer));
    ASSERT_NE(peer.qp.pid, getpid());
    ASSERT_TRUE(send_all(down[1], Coords{a.qp->info(), 0, 0, 0, 0}));
    a.qp->connect(peer.qp);
    a.take_handles();
    std::uint8_t ready;
    ASSERT_TRUE(recv_all(up[0], ready));

    // WRITE the first half, READ it back elsewhere, compare.
    const Sge w = buf.sge(0, kBytes / 2);
    post_ok(a, make_wr(WrOpcode::kRdmaWrite, &w, 1, gv::ib::kWrSignaled, peer.addr, peer.rkey));
    ASSERT_TRUE(wait_cqe(a).ok());
    std::memset(buf.p + kBytes / 2, 0, kBytes / 2 - 4096);
    const Sge rd = buf.sge(kBytes / 2, kBytes / 2 - 4096);
    post_ok(a, make_wr(WrOpcode::kRdmaRead, &rd, 1, gv::ib::kWrSignaled, peer.addr, peer.rkey));
    ASSERT_TRUE(wait_cqe(a).ok());
    ASSERT_EQ(std::memcmp(buf.p, buf.p + kBytes / 2, kBytes / 2 - 4096), 0);

    // Atomics on the child's memory.
    const Sge at = buf.sge(kBytes - 8, 8);
    SendWr fa = make_wr(WrOpcode::kAtomicFetchAdd, &at, 1, gv::ib::kWrSignaled, peer.addr + kBytes / 2, peer.rkey);
    fa.compare_add = 5;
    std::vector<std::uint8_t> expect(kBytes);  // the child's memory as it filled it
    fill_random(expect.data(), kBytes, 77);
    std::uint64_t before;
    std::memcpy(&before, expect.data() + kBytes / 2, 8);
    post_ok(a, fa);
    ASSERT_TRUE(wait_cqe(a).ok());
    std::uint64_t got;
    std::memcpy(&got, buf.p + kBytes - 8, 8);
    EXPECT_EQ(got, before);
    SendWr cs = make_wr(WrOpcode::kAtomicCmpSwp, &at, 1, gv::ib::kWrSignaled, peer.addr + kBytes / 2, peer.rkey);
    cs.compare_add = before + 5;
    cs.swap = 0x0123456789abcdefull;
    post_ok(a, cs);
    ASSERT_TRUE(wait_cqe(a).ok());
    std::memcpy(&got, buf.p + kBytes - 8, 8);
    EXPECT_EQ(got, before + 5);

    // SEND_WITH_IMM into the child's posted receive.
    const Sge sd = buf.sge(12345, 4096);
    SendWr send = make_wr(WrOpcode::kSendImm, &sd, 1, gv::ib::kWrSignaled);
    send.imm = 0x1234;
    post_ok(a, send);
    ASSERT_TRUE(wait_cqe(a).ok());

    // The child's memory now: our first half, the swapped word, its own bytes, and the sent
    // message in the last 4 KiB.
    std::memcpy(expect.data(), buf.p, kBytes / 2);
    const std::uint64_t swapped = 0x0123456789abcdefull;
    std::memcpy(expect.data() + kBytes / 2, &swapped, 8);
    std::memcpy(expect.data() + kBytes - 4096, buf.p + 12345, 4096);
    std::uint64_t want = 0, sum = 0;
    for (std::size_t i = 0; i < kBytes; ++i) want = want * 1099511628211ull + expect[i];
    ASSERT_TRUE(recv_all(up[0], sum));
    EXPECT_EQ(sum, want) << "the child's memory differs from what was written";

    // Private (non-arena) memory of another process is unreachable: remote access error.
    const Sge pw = buf.sge(0, 64);
    post_ok(a, make_wr(WrOpcode::kRdmaWrite, &pw, 1, gv::ib::kWrSignaled, peer.private_addr, peer.private_rkey));
    const Completion e = wait_cqe(a);
    EXPECT_EQ(e.syndrome, m5::kSyndRemoteAccessErr) << gv::describe(e);
    ASSERT_TRUE(send_all(down[1], std::uint8_t{1}));
  }
  const ChildEnd end = wait_child(pid, std::chrono::seconds(60));
  EXPECT_TRUE(end.ok()) << "the child " << end.text() << " (exit code = the step whose check failed)";
  close(up[0]);
  close(down[1]);
}

}  // namespace
}  // namespace gvt
