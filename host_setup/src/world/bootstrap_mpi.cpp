// MPI_COMM_WORLD as a bootstrap (built when CMake finds MPI). Used when the process was started
// by an MPI launcher or MPI is already initialised; a rank that dies is MPI's to report (the
// launcher ends the job).
#include <mpi.h>

#include <cstdlib>
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
  }
  ~MpiBootstrap() override {
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (we_initialised_ && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  void allgather(const void* mine, void* all, std::size_t bytes) override {
    // Every rank must pass the same size: check it first, so a mismatch is an error, not a hang.
    long long n = static_cast<long long>(bytes), lo = 0, hi = 0;
    mpi_check(MPI_Allreduce(&n, &lo, 1, MPI_LONG_LONG, MPI_MIN, comm_), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(&n, &hi, 1, MPI_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce");
    if (lo != hi)
      throw Error("World (mpi): ranks passed between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  " bytes to one collective");
    mpi_check(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE, comm_),
              "MPI_Allgather");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool we_initialised_ = false;
  std::string name_ = "mpi";
};

}  // namespace

std::unique_ptr<Bootstrap> mpi_bootstrap_if_launched() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited && !launched_by_mpi()) return nullptr;
  return std::make_unique<MpiBootstrap>();
}

}  // namespace gv::detail
