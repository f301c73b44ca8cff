// Ranks as processes: gvrun and the TCP rendezvous, host ranks over p2p (shared memory) and ib
// (the CPU engine across processes); setup errors and dead ranks reported by name, in bounded
// time.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "processes.hpp"

namespace {

using gvt::Outcome;
Outcome run(const std::string& cmd) { return gvt::run_command(cmd); }

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t c = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++c;
  return c;
}

const std::string kGvrun = GV_GVRUN_PATH;
const std::string kRank = GV_RMA_RANK_PATH;

TEST(RmaProcesses, RingOverSharedMemory) {
  const Outcome r = run("GV_BOOTSTRAP_TIMEOUT=30 " + kGvrun + " -n 3 " + kRank + " ring p2p");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count(r.out, " ok (p2p, 3 ranks, bootstrap tcp)"), 3u) << r.out;
}

TEST(RmaProcesses, RingOverTheCpuEngine) {
  const Outcome r = run("GV_BOOTSTRAP_TIMEOUT=30 " + kGvrun + " -n 2 " + kRank + " ring ib");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count(r.out, " ok (ib, 2 ranks, bootstrap tcp)"), 2u) << r.out;
}

TEST(RmaProcesses, MismatchedHeapsFailAtInitNamingRanks) {
  const Outcome r = run("GV_BOOTSTRAP_TIMEOUT=30 " + kGvrun + " -n 2 " + kRank + " mismatch");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ranks disagree on the heap size"), std::string::npos) << r.out;
}

TEST(RmaProcesses, AKilledRankIsReportedByNameWithinSeconds) {
  const Outcome r = run("GV_BOOTSTRAP_TIMEOUT=30 " + kGvrun + " -n 3 --kill-after 20 " + kRank + " killed");
  EXPECT_NE(r.out.find("rank 2 was killed by signal 9"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "wait aborted after"), 2u) << r.out;
  EXPECT_EQ(count(r.out, "rank 2 died"), 2u) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 15.0);
}

TEST(RmaProcesses, ARankThatNeverComesIsNamed) {
  // GV_SIZE=3 but only ranks 0 and 1 start: both fail within the bootstrap timeout.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  const std::string env = "GV_BOOTSTRAP_TIMEOUT=2 GV_SIZE=3 GV_ROOT=127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const Outcome r = run("(" + env + " GV_RANK=0 " + kRank + " late & " + env + " GV_RANK=1 " + kRank + " late & wait)");
  EXPECT_NE(r.out.find("rank 0: World (tcp): rank(s) 2 did not connect"), std::string::npos) << r.out;
  // Rank 1 hears it from rank 0 (naming rank 2), or gives up waiting for admission itself,
  // whichever comes first.
  EXPECT_TRUE(r.out.find("rank 1: World (tcp): rank(s) 2 did not connect") != std::string::npos ||
              r.out.find("rank 1: World (tcp): rank 0 did not admit rank 1") != std::string::npos)
      << r.out;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(RmaProcesses, GvrunRejectsBadArgumentsAndReportsFailures) {
  EXPECT_EQ(run(kGvrun + " -h").code, 0);
  EXPECT_EQ(run(kGvrun + " -n 0 true").code, 2);
  EXPECT_EQ(run(kGvrun + " -n abc true").code, 2);
  EXPECT_EQ(run(kGvrun + " --bogus -n 2 true").code, 2);
  EXPECT_EQ(run(kGvrun + " -n 3 true").code, 0);
  const Outcome f = run(kGvrun + " -n 2 --kill-after 1 sh -c 'exit $((GV_RANK == 0 ? 3 : 0))'");
  EXPECT_EQ(f.code, 3) << f.out;
  EXPECT_NE(f.out.find("exited with code"), std::string::npos) << f.out;
  const Outcome e = run(kGvrun + " -n 2 sh -c 'echo $GV_RANK/$GV_SIZE/${GV_ROOT%%:*}'");
  EXPECT_NE(e.out.find("0/2/127.0.0.1"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("1/2/127.0.0.1"), std::string::npos) << e.out;
}

}  // namespace
