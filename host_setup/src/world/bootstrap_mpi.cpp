// MPI_COMM_WORLD as a bootstrap (built when CMake finds MPI). Used when the process was started
// by an MPI launcher or MPI is already initialised.
//
// MPI finds the ranks and tells them where rank 0 listens; from then on the World's collectives
// and its liveness go over the built-in TCP rendezvous beside MPI: every step bounded, a rank
// that dies named by the others within about a second (their World aborts, check() says which
// rank), whatever the launcher then does about the job. MPI's own collectives would wait for a
// dead rank without bound, and so may MPI_Finalize: when a peer died, the bootstrap does not
// finalize an MPI it initialised (the process ends without it, saying so on stderr).
#include <mpi.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "bootstrap.hpp"

namespace gv::detail {
namespace {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("World (mpi): ") + what + ": " + std::string(text, static_cast<std::size_t>(len)));
}

class MpiBootstrap final : public Bootstrap {
 public:
  MpiBootstrap() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      mpi_check(MPI_Init(nullptr, nullptr), "MPI_Init");
      we_initialised_ = true;
    }
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Rank 0 listens first, then MPI carries its address (host name and port) to the others; a
    // rank on rank 0's host dials the loopback address.
    int port = 0, fd = -1;
    char root[320] = {};
    if (rank_ == 0) {
      fd = tcp_listen_any(size_, port);
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      std::snprintf(root, sizeof(root), "%s:%d", host, port);
    }
    const int rc = MPI_Bcast(root, sizeof(root), MPI_CHAR, 0, comm_);
    if (rc != MPI_SUCCESS && fd >= 0) close(fd);
    mpi_check(rc, "MPI_Bcast (where rank 0 listens)");
    std::string where = root;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const auto colon = where.rfind(':');
    if (where.compare(0, colon, host) == 0) where = "127.0.0.1" + where.substr(colon);
    tcp_ = tcp_bootstrap(rank_, size_, where, bootstrap_timeout(), fd);
  }
  ~MpiBootstrap() override {
    const bool dead_peer = tcp_->failed();
    tcp_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (dead_peer || left_) {
      if (we_initialised_)
        std::fprintf(stderr, "gpuverbs World (mpi): rank %d: %s, so MPI_Finalize (which would wait for %s) is skipped\n",
                     rank_, left_ ? "this rank left (World::abort())" : "a peer died", left_ ? "the others" : "it");
      return;
    }
    MPI_Comm_free(&comm_);
    if (we_initialised_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  void allgather(const void* mine, void* all, std::size_t bytes) override { tcp_->allgather(mine, all, bytes); }
  void finalize() override { tcp_->finalize(); }
  void watch(std::function<void(const std::string&)> on_failure) override { tcp_->watch(std::move(on_failure)); }
  void unwatch() override { tcp_->unwatch(); }
  void abandon(const std::string& why) override { tcp_->abandon(why); }
  void leave(const std::string& why) override {
    left_ = true;
    tcp_->abandon(why);
  }
  bool failed() const override { return tcp_->failed(); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool we_initialised_ = false;
  bool left_ = false;  ///< leave(): World::abort() was called on this rank
  std::string name_ = "mpi";
  std::unique_ptr<Bootstrap> tcp_;
};

}  // namespace

std::unique_ptr<Bootstrap> mpi_bootstrap_if_launched() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited && !launched_by_mpi()) return nullptr;
  return std::make_unique<MpiBootstrap>();
}

}  // namespace gv::detail
