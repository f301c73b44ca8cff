// Compile-and-link check for kernels written against an installed gpuverbs: a kernel that
// posts one RDMA WRITE and waits for its completion through the device API, next to the host
// header in the same translation unit. Built by scripts/test.sh wherever nvcc exists; not run.
#include <cstdio>

#include <cuda_runtime.h>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

namespace {

__global__ void write_once(const __grid_constant__ gv::ib::QpHandle qp,
                           const __grid_constant__ gv::ib::CqHandle cq, gv::ib::Sge sge,
                           std::uint64_t remote_addr, std::uint32_t rkey, gv::Status* result) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;  // one thread owns the QP: kExclusive
  gv::ib::SendWr wr;
  wr.opcode = gv::ib::WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  gv::Status st = gv::ib::post_send<gv::ib::Ownership::kExclusive>(qp, wr);
  if (st == gv::Status::kOk) {
    gv::ib::Completion c;
    st = gv::ib::poll_cq<gv::ib::Ownership::kExclusive>(cq, c);
    if (st == gv::Status::kOk && !c.ok()) st = gv::Status::kCompletionError;
  }
  *result = st;
}

}  // namespace

int main() {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, write_once);
  if (e != cudaSuccess) {
    std::printf("consumer_kernel: built; no GPU to inspect it (%s)\n", cudaGetErrorString(e));
    return 0;
  }
  std::printf("consumer_kernel: write_once uses %d registers, %zu B local memory\n", attr.numRegs,
              attr.localSizeBytes);
  return 0;
}
