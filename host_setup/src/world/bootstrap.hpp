// How the ranks of a World find each other and exchange setup data: MPI, the built-in TCP
// rendezvous, or threads of one process. Every collective step is bounded in time and fails
// with a message naming the ranks that died or did not arrive.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gv::detail {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  /// Every rank contributes `bytes` (the same number on every rank); `all` gets size() * bytes
  /// in rank order. Throws gv::Error naming the rank(s) when one died, disagreed on `bytes` or
  /// did not arrive within the time limit.
  virtual void allgather(const void* mine, void* all, std::size_t bytes) = 0;
  /// The last collective before a rank frees what peers may still touch. Ranks that are
  /// threads of one process tear down one after the other from one thread: nothing to wait for.
  virtual void finalize() { barrier(); }
  void barrier() {
    std::vector<char> all(static_cast<std::size_t>(size()));
    const char c = 0;
    allgather(&c, all.data(), 1);
  }
  /// From now on, a peer that dies outside a collective is reported through `on_failure`
  /// (called once, from a thread of the bootstrap) within about a second.
  virtual void watch(std::function<void(const std::string&)> on_failure) { (void)on_failure; }
  /// Stop watching (before a clean shutdown, so that peers leaving is not a failure).
  virtual void unwatch() {}
  /// This rank gives up (its setup failed): peers waiting in a collective fail at once with
  /// `why` where the bootstrap can tell them (threads of one process; a TCP or MPI peer sees
  /// the connection close or the job end).
  virtual void abandon(const std::string& why) { (void)why; }
  /// This rank leaves for good (World::abort()): as abandon, and the launcher's own last
  /// collective (MPI_Finalize), which would wait for the others, is skipped too.
  virtual void leave(const std::string& why) { abandon(why); }
  /// Whether a peer died or a collective failed: then the last collective (finalize) and a
  /// launcher's own teardown with that peer (MPI_Finalize) may not be waited for.
  virtual bool failed() const { return false; }
};

using Clock = std::chrono::steady_clock;

/// A non-negative integer environment variable (at most 1e6), or -1 when unset; anything else
/// throws gv::Error naming the variable and its value.
int env_int(const char* name);

/// GV_BOOTSTRAP_TIMEOUT (seconds), default 60: the limit of each collective step.
std::chrono::milliseconds bootstrap_timeout();

/// TCP rendezvous at `root` ("host:port"; rank 0 listens there, on `listen_fd` when it is
/// already listening: see tcp_listen_any).
std::unique_ptr<Bootstrap> tcp_bootstrap(int rank, int size, const std::string& root, std::chrono::milliseconds timeout,
                                         int listen_fd = -1);
/// A socket listening on every interface at a port the system picks (`port`), for rank 0 of a
/// TCP rendezvous whose address travels some other way (MPI).
int tcp_listen_any(int backlog, int& port);
/// `n` bootstraps of one process, for n threads.
std::vector<std::unique_ptr<Bootstrap>> local_bootstraps(int n, std::chrono::milliseconds timeout);
/// A job of one.
std::unique_ptr<Bootstrap> single_bootstrap();
/// MPI_COMM_WORLD, when built with MPI and MPI is (or can be) initialised; null otherwise.
std::unique_ptr<Bootstrap> mpi_bootstrap_if_launched();

/// What the environment says: MPI, then GV_RANK/GV_SIZE/GV_ROOT, then a job of one. Throws
/// with the variable to fix when they are inconsistent.
std::unique_ptr<Bootstrap> bootstrap_from_env();

}  // namespace gv::detail
