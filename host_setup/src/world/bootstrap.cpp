// Bootstraps that need no network: a job of one, threads of one process; and the choice from
// the environment.
#include "bootstrap.hpp"

#include "../parse.hpp"

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail {
namespace {

class SingleBootstrap final : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  void allgather(const void* mine, void* all, std::size_t bytes) override {
    if (bytes != 0) std::memcpy(all, mine, bytes);
  }

 private:
  std::string name_ = "single";
};

/// What the threads of one process share. A collective fills the slots (every rank stores its
/// part), then drains them (every rank copies all parts out); a rank entering the next
/// collective waits while the last one drains.
struct LocalShared {
  LocalShared(int n, std::chrono::milliseconds t) : slots(static_cast<std::size_t>(n)), entered(static_cast<std::size_t>(n), 0), timeout(t) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<char>> slots;
  std::vector<std::uint64_t> entered;  ///< collectives each rank has entered
  std::size_t arrived = 0, departed = 0;
  bool draining = false;
  std::size_t bytes = 0;
  std::string failure;
  std::chrono::milliseconds timeout;
};

class LocalBootstrap final : public Bootstrap {
 public:
  LocalBootstrap(std::shared_ptr<LocalShared> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(s_->slots.size()); }
  const std::string& name() const override { return name_; }

  void finalize() override {}

  void abandon(const std::string& why) override {
    std::unique_lock lk(s_->mu);
    if (s_->failure.empty()) s_->failure = "World (local): rank " + std::to_string(rank_) + " failed: " + why;
    s_->cv.notify_all();
  }

  void allgather(const void* mine, void* all, std::size_t bytes) override {
    LocalShared& s = *s_;
    const std::size_t n = s.slots.size();
    std::unique_lock lk(s.mu);
    const std::uint64_t gen = ++s.entered[static_cast<std::size_t>(rank_)];
    wait(lk, gen, [&] { return !s.draining; });
    if (s.arrived == 0) s.bytes = bytes;
    if (bytes != s.bytes)
      fail(lk, "World (local): rank " + std::to_string(rank_) + " passed " + std::to_string(bytes) +
                   " bytes to collective #" + std::to_string(gen) + ", another rank " + std::to_string(s.bytes));
    s.slots[static_cast<std::size_t>(rank_)].assign(static_cast<const char*>(mine), static_cast<const char*>(mine) + bytes);
    if (++s.arrived == n) {
      s.draining = true;
      s.cv.notify_all();
    }
    wait(lk, gen, [&] { return s.draining; });
    for (std::size_t r = 0; r < n; ++r)
      if (bytes != 0) std::memcpy(static_cast<char*>(all) + r * bytes, s.slots[r].data(), bytes);
    if (++s.departed == n) {
      s.arrived = s.departed = 0;
      s.draining = false;
      s.cv.notify_all();
    }
  }

 private:
  template <class Pred>
  void wait(std::unique_lock<std::mutex>& lk, std::uint64_t gen, Pred pred) {
    LocalShared& s = *s_;
    if (!s.cv.wait_for(lk, s.timeout, [&] { return pred() || !s.failure.empty(); })) {
      std::string missing;
      for (std::size_t r = 0; r < s.entered.size(); ++r)
        if (s.entered[r] < gen) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail(lk, "World (local): rank(s) " + (missing.empty() ? std::string("?") : missing) +
                   " did not reach collective #" + std::to_string(gen) + " within " +
                   std::to_string(s.timeout.count() / 1000.0) + " s");
    }
    if (!s.failure.empty()) throw Error(s.failure);
  }
  [[noreturn]] void fail(std::unique_lock<std::mutex>&, const std::string& why) {
    if (s_->failure.empty()) s_->failure = why;
    s_->cv.notify_all();
    throw Error(s_->failure);
  }

  std::shared_ptr<LocalShared> s_;
  int rank_;
  std::string name_ = "local";
};

}  // namespace

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  std::uint64_t x = 0;
  std::string why;
  if (!parse_uint(v, 0, 1'000'000, x, why)) throw Error(std::string("World: ") + name + "='" + v + "' " + why);
  return static_cast<int>(x);
}

std::chrono::milliseconds bootstrap_timeout() {
  const char* v = std::getenv("GV_BOOTSTRAP_TIMEOUT");
  if (v == nullptr || *v == '\0') return std::chrono::seconds(60);
  double s = 0;
  std::string why;
  if (!parse_seconds(v, 86400, s, why)) throw Error(std::string("World: GV_BOOTSTRAP_TIMEOUT='") + v + "' " + why);
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

std::unique_ptr<Bootstrap> single_bootstrap() { return std::make_unique<SingleBootstrap>(); }

std::vector<std::unique_ptr<Bootstrap>> local_bootstraps(int n, std::chrono::milliseconds timeout) {
  auto shared = std::make_shared<LocalShared>(n, timeout);
  std::vector<std::unique_ptr<Bootstrap>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<LocalBootstrap>(shared, r));
  return out;
}

std::unique_ptr<Bootstrap> bootstrap_from_env() {
  if (auto mpi = mpi_bootstrap_if_launched()) return mpi;
  int rank = env_int("GV_RANK"), size = env_int("GV_SIZE");
  const char* root = std::getenv("GV_ROOT");
  // Started by mpirun without MPI in this build: Open MPI's rank variables with GV_ROOT work.
  const int ompi_rank = env_int("OMPI_COMM_WORLD_RANK"), ompi_size = env_int("OMPI_COMM_WORLD_SIZE");
  if (rank < 0 && size < 0 && ompi_size > 1) {
    if (root == nullptr || *root == '\0')
      throw Error("World: started by mpirun, but gpuverbs was built without MPI: rebuild with MPI found by CMake, "
                  "or set GV_ROOT=host:port for the built-in rendezvous (or launch with gvrun)");
    rank = ompi_rank;
    size = ompi_size;
  }
  if (rank < 0 && size < 0) return single_bootstrap();
  if (rank < 0 || size < 1 || rank >= size)
    throw Error("World: GV_RANK and GV_SIZE must both be set, with 0 <= GV_RANK < GV_SIZE (have GV_RANK=" +
                std::to_string(rank) + ", GV_SIZE=" + std::to_string(size) + ")");
  if (size == 1) return single_bootstrap();
  if (root == nullptr || *root == '\0')
    throw Error("World: GV_RANK/GV_SIZE are set but GV_ROOT is not: set GV_ROOT=host:port, where rank 0 listens "
                "(gvrun -n N sets all three)");
  return tcp_bootstrap(rank, size, root, bootstrap_timeout());
}

}  // namespace gv::detail

#if !GPUVERBS_HAVE_MPI
namespace gv::detail {
/// Built without MPI: an MPI launch is not recognised (GV_* variables still work).
std::unique_ptr<Bootstrap> mpi_bootstrap_if_launched() { return nullptr; }
}  // namespace gv::detail
#endif
