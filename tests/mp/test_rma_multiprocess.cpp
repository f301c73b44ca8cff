// Ranks as processes: gvrun and the TCP rendezvous, host ranks over p2p (shared memory) and ib
// (the CPU engine across processes); setup errors and dead ranks reported by name, in bounded
// time.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

/// Whether process `pid` still runs (a zombie waiting for its reaper does not).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  if (!(stat >> pid_s >> comm >> state)) return false;
  return state != "Z" && state != "X";
}

pid_t read_pid(const std::string& path) {
  std::ifstream f(path);
  long p = 0;
  return (f >> p) ? static_cast<pid_t>(p) : 0;
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

// A rank that calls World::abort() has left: its World ends without the last collective (which
// would wait out GV_BOOTSTRAP_TIMEOUT for a peer busy elsewhere), and the peer's wait ends with
// kAborted once it is gone. The NVSHMEM face ends a PE that exits without nvshmem_finalize so.
TEST(RmaProcesses, ARankThatAbortsLeavesAtOnce) {
  const Outcome r = run("GV_BOOTSTRAP_TIMEOUT=30 " + kGvrun + " -n 2 --kill-after 20 " + kRank + " leaves");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count(r.out, "rank 0: left in"), 1u) << r.out;
  EXPECT_EQ(count(r.out, "rank 1: wait aborted after"), 1u) << r.out;
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

// A rank started through a wrapper that forks (sh -c, valgrind, nsys): gvrun ends the rank's
// whole process group, so no grandchild outlives it holding the output pipe (popen would then
// wait for it) — after a failure and after a clean exit alike.
TEST(RmaProcesses, GvrunEndsEachRanksWholeProcessGroup) {
  char tmpl[] = "/tmp/gv_gvrun_pgXXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const Outcome f = run("timeout 60 " + kGvrun + " -n 2 --kill-after 1 sh -c 'sleep 300 & echo $! > " + dir +
                        "/fail$GV_RANK; [ $GV_RANK = 1 ] && exit 3; wait'");
  EXPECT_EQ(f.code, 3) << f.out;
  EXPECT_LT(f.seconds, 20.0) << "a grandchild held the output: " << f.out;
  const Outcome ok = run("timeout 60 " + kGvrun + " -n 2 sh -c 'sleep 300 & echo $! > " + dir + "/ok$GV_RANK; exit 0'");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_LT(ok.seconds, 20.0) << "a grandchild held the output: " << ok.out;
  for (const char* name : {"fail0", "fail1", "ok0", "ok1"}) {
    const pid_t p = read_pid(dir + "/" + name);
    ASSERT_GT(p, 0) << name;
    for (int i = 0; i < 50 && alive(p); ++i) usleep(20000);  // SIGKILL lands asynchronously
    EXPECT_FALSE(alive(p)) << "the grandchild of rank " << name << " survived gvrun";
    if (alive(p)) kill(p, SIGKILL);
    std::remove((dir + "/" + name).c_str());
  }
  rmdir(dir.c_str());
}

// Messages for what is missing on the command line.
TEST(RmaProcesses, GvrunSaysWhatIsMissing) {
  Outcome r = run(kGvrun + " -n");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("-n needs a value"), std::string::npos) << r.out;
  r = run(kGvrun + " -n 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("no program"), std::string::npos) << r.out;
  r = run(kGvrun + " true");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("-n RANKS"), std::string::npos) << r.out;
  r = run(kGvrun + " -n 99999999999999999999 true");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("out of range"), std::string::npos) << r.out;
}

}  // namespace
