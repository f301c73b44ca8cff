// One rank of the multi-process rma tests (started by gvrun, by the tests themselves, or by
// mpirun). Host-thread rank; the scenario is argv[1]:
//   ring [p2p|ib]   every operation around the ring, checked; prints "rank R ok"
//   mismatch        asks for a heap that differs on every rank: init must fail, naming ranks
//   killed          rank 2 dies (SIGKILL) after init; ranks 0 and 1 wait for a word it would
//                   set: the wait must end with kAborted and check() must name rank 2, soon
//   late            init with a rank that never comes (the test starts GV_SIZE - 1 ranks)
//   leaves          rank 0 calls World::abort() and ends its World while rank 1 waits (not in a
//                   collective) for a word rank 0 would set: rank 0's World must end at once,
//                   not wait out the bootstrap's limit, and rank 1's wait must end with kAborted
// Exit code 0 when the scenario's expectation held; the reason is printed either way.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <string>

#include <gpuverbs/host/world.hpp>
#include <gpuverbs/rma.hpp>

#include "pattern.hpp"

namespace rma = gv::rma;
using gv::Status;

namespace {

int fail(int rank, const std::string& why) {
  std::printf("rank %d FAILED: %s\n", rank, why.c_str());
  std::fflush(stdout);
  return 1;
}

int ring(rma::Transport t) {
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kHost;
  o.transport = t;
  o.heap_bytes = std::size_t{4} << 20;
  auto w = gv::World::init(o);
  const rma::Endpoint& ep = w->endpoint();
  const int me = w->rank(), n = w->size(), next = (me + 1) % n, prev = (me + n - 1) % n;
  if (w->transport_to(next) != (n == 1 ? rma::Transport::kSelf : t)) return fail(me, "unexpected transport");
  constexpr std::size_t kBytes = 100003;
  auto* src = static_cast<std::byte*>(w->alloc(kBytes));
  auto* dst = static_cast<std::byte*>(w->alloc(kBytes));
  auto* sig = static_cast<std::uint64_t*>(w->alloc(64));
  auto* counter = static_cast<std::uint64_t*>(w->alloc(8));
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<std::byte>(gvt::pattern_byte(static_cast<std::uint64_t>(me), i));
  w->barrier();
  for (int round = 1; round <= 20; ++round) {
    if (rma::put_signal(ep, dst, src, kBytes, sig, 1, rma::SignalOp::kAdd, next) != Status::kOk) return fail(me, "put_signal");
    if (rma::wait_until(ep, sig, rma::Cmp::kGe, static_cast<std::uint64_t>(round)) != Status::kOk) return fail(me, "wait_until");
    for (std::size_t i = 0; i < kBytes; ++i)
      if (dst[i] != static_cast<std::byte>(gvt::pattern_byte(static_cast<std::uint64_t>(prev), i)))
        return fail(me, "wrong byte " + std::to_string(i) + " in round " + std::to_string(round));
    if (rma::barrier(ep) != Status::kOk) return fail(me, "barrier");
  }
  std::uint64_t old = 0;
  for (int i = 0; i < 100; ++i)
    if (rma::fetch_add(ep, counter, std::uint64_t{1}, 0, old) != Status::kOk) return fail(me, "fetch_add");
  if (rma::barrier(ep) != Status::kOk) return fail(me, "barrier");
  std::uint64_t total = 0;
  if (rma::g(ep, counter, 0, total) != Status::kOk || total != 100u * static_cast<std::uint64_t>(n))
    return fail(me, "counter at rank 0 is " + std::to_string(total));
  if (rma::get(ep, dst, src, kBytes, next) != Status::kOk) return fail(me, "get");
  for (std::size_t i = 0; i < kBytes; ++i)
    if (dst[i] != static_cast<std::byte>(gvt::pattern_byte(static_cast<std::uint64_t>(next), i)))
      return fail(me, "get: wrong byte " + std::to_string(i));
  w->barrier();
  std::printf("rank %d ok (%s, %d ranks, bootstrap %s)\n", me, rma::to_string(t), n, w->bootstrap_name().c_str());
  return 0;
}

/// This process's rank before a World exists: gvrun's variable, or Open MPI's under mpirun.
int rank_from_env() {
  for (const char* v : {"GV_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
    if (const char* r = std::getenv(v)) return std::atoi(r);
  return 0;
}

int mismatch() {
  const int me = rank_from_env();
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kHost;
  o.heap_bytes = (std::size_t{1} << 20) + 4096 * static_cast<std::size_t>(me);
  try {
    auto w = gv::World::init(o);
    return fail(me, "init accepted different heap sizes");
  } catch (const gv::Error& e) {
    const std::string m = e.what();
    std::printf("rank %d: %s\n", me, m.c_str());
    return m.find("heap size") != std::string::npos && m.find("rank") != std::string::npos ? 0 : 1;
  }
}

/// A host rank whose waits may last a minute (far longer than noticing a peer's end takes) and a
/// word of its heap that nobody sets, after a barrier: for the scenarios where a peer goes away.
struct Watcher {
  std::unique_ptr<gv::World> w;
  std::uint64_t* word;
};
Watcher watcher() {
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kHost;
  o.heap_bytes = 1 << 20;
  o.budget = gv::Budget{60'000'000'000ull};
  auto w = gv::World::init(o);
  auto* word = static_cast<std::uint64_t*>(w->alloc(8));
  w->barrier();
  return {std::move(w), word};
}

int killed() {
  auto [w, word] = watcher();
  if (w->rank() == 2) {
    std::printf("rank 2: dying\n");
    std::fflush(stdout);
    raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = rma::wait_until(w->endpoint(), word, rma::Cmp::kEq, std::uint64_t{1});
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s != Status::kAborted) return fail(w->rank(), std::string("the wait ended with ") + gv::to_string(s));
  try {
    w->check();
    return fail(w->rank(), "check() did not report the dead rank");
  } catch (const gv::Error& e) {
    std::printf("rank %d: wait aborted after %.2f s: %s\n", w->rank(), sec, e.what());
    if (std::string(e.what()).find("rank 2") == std::string::npos) return 1;
  }
  try {
    w->barrier();
    return fail(w->rank(), "barrier passed with a dead rank");
  } catch (const gv::Error&) {
  }
  return sec < 10 ? 0 : 1;
}

int leaves() {
  auto [w, word] = watcher();
  const int me = w->rank();
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (me == 0) {
    w->abort();
    w.reset();
    const double sec = seconds();
    std::printf("rank 0: left in %.2f s\n", sec);
    std::fflush(stdout);
    return sec < 10 ? 0 : fail(0, "its World waited for the others");
  }
  const Status s = rma::wait_until(w->endpoint(), word, rma::Cmp::kEq, std::uint64_t{1});
  if (s != Status::kAborted) return fail(me, std::string("the wait ended with ") + gv::to_string(s));
  std::printf("rank %d: wait aborted after %.2f s\n", me, seconds());
  std::fflush(stdout);
  return 0;
}

int late() {
  const int me = rank_from_env();
  gv::WorldOptions o;
  o.memory = gv::WorldOptions::Memory::kHost;
  try {
    auto w = gv::World::init(o);
    return fail(me, "init succeeded without all ranks");
  } catch (const gv::Error& e) {
    std::printf("rank %d: %s\n", me, e.what());
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string s = argc > 1 ? argv[1] : "";
  try {
    if (s == "ring") return ring(argc > 2 && std::strcmp(argv[2], "ib") == 0 ? rma::Transport::kIb : rma::Transport::kP2p);
    if (s == "mismatch") return mismatch();
    if (s == "killed") return killed();
    if (s == "late") return late();
    if (s == "leaves") return leaves();
  } catch (const std::exception& e) {
    std::printf("rank %d FAILED: %s\n", rank_from_env(), e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: rma_rank ring [p2p|ib] | mismatch | killed | late | leaves\n");
  return 2;
}
