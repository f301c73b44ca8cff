// Synthetic queues and the floors, for postpoll and anchors: a QP's send ring, doorbell record
// and doorbell and the CQ of its send queue, in GPU memory or in pinned host memory mapped into
// the GPU, with no executor (the cost kernels retire their own WQEs); the post and poll floors
// (the bare memory operations a post and a poll need, no verbs logic) measured on them; and the
// per-call timing and the rows the two subcommands print.
//
// No GPU engine may be open while synthetic queues exist: they allocate and free CUDA memory.
#pragma once
#include <string>
#include <vector>

#include "harness.hpp"

namespace gv::bench {

/// Memory on the GPU or pinned, mapped host memory, zeroed on `s`; freed with the object.
struct Placed {
  bool gpu;
  cudaStream_t s;
  std::vector<void*> ptrs;
  template <class T>
  T* alloc(std::size_t bytes) {
    return static_cast<T*>(alloc_bytes(bytes));
  }
  void* alloc_bytes(std::size_t bytes);
  void upload(void* dst, const void* src, std::size_t n) { GV_BENCH_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s)); }
  ~Placed();
};

/// A QP of kBbs WQEBBs and the CQ of its send queue (kBbs CQEs), both kExclusive, no executor.
/// Ring, records and doorbell lie where an executor would read them (GPU memory, or pinned
/// host memory); the queues' counters always in GPU memory (their users are this GPU's
/// threads). The QP publishes in the NIC's order (record_polled 0) unless told otherwise.
class SyntheticQueues {
 public:
  static constexpr std::uint32_t kBbs = 4096;
  SyntheticQueues(bool gpu, cudaStream_t s);
  bool gpu() const { return mem_.gpu; }
  /// Before a run that posts: zeroed counters (a queue keeps one ownership mode for life).
  void fresh(cudaStream_t s);
  /// Before a run that polls: kBbs NOP WQEs posted, each with its ready CQE, none taken. The
  /// uploads are ordered before the next kernel on `s`.
  void ready(cudaStream_t s);

  gv::ib::QpHandle qp;
  gv::ib::CqHandle cq;

 private:
  Placed mem_;      ///< where the executor would read
  Placed gpu_mem_;  ///< the counters
  std::vector<std::byte> nops_;
  std::vector<m5::Cqe> cqes_;
  gv::ib::QpCounters posted_{};
};

/// What the cost kernels and the post floor post: a WRITE of *sge to raddr/rkey.
GV_HD inline SendWr write_wr(const Sge* sge, std::uint64_t raddr, std::uint32_t rkey, std::uint32_t flags) {
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = flags;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return wr;
}
/// Where the WRITEs on synthetic queues go (nothing executes them).
constexpr std::uint64_t kSyntheticRaddr = 0x1000;
constexpr std::uint32_t kSyntheticRkey = 0x55;

/// Launches a cost kernel `reps` + 1 times on the harness's GPU 0 stream (the first launch
/// warms up) and returns the times it reported (Harness::samples[0]) divided by `per_launch`:
/// ns per WQE or CQE. `what` names the run in errors.
template <class Launch>
std::vector<double> per_call_ns(Harness& h, int reps, double per_launch, const std::string& what, Launch&& launch) {
  GV_BENCH_CUDA(cudaSetDevice(0));
  std::vector<double> v;
  for (int r = 0; r <= reps; ++r) {
    h.status[0] = kNotReported;
    launch(h.streams[0]);
    GV_BENCH_CUDA(cudaGetLastError());
    GV_BENCH_CUDA(cudaStreamSynchronize(h.streams[0]));
    if (h.status[0] != Status::kOk)
      throw gv::Error(what + ": " +
                      (h.status[0] == kNotReported ? std::string("the kernel did not report") : gv::to_string(h.status[0])));
    if (r > 0) v.push_back(static_cast<double>(h.samples[0]) / per_launch);
  }
  return v;
}

/// The median of a sample (taken by value: sorted here).
double median(std::vector<double> v);

/// The floors on one placement, ns per post or per poll (one sample per launch).
struct Floors {
  std::vector<double> post_nic;     ///< post floor, the NIC's publish order (two releases)
  std::vector<double> post_record;  ///< post floor, a record-polling executor's (one fence)
  std::vector<double> poll;         ///< poll floor
  std::uint64_t posts = 0;          ///< posts per launch
  std::uint64_t polls = 0;          ///< polls per launch
};

/// The post floor: per post the stores of one 8-byte inline WRITE's WQE (encoded once; only
/// the control segment's index changes), then the queue's publish step (sq_ring_doorbell: the
/// release, the doorbell record, the doorbell), with the ring position in a register. The
/// poll floor: per CQE one 16-byte volatile load of the CQE's last octoword, the owner check,
/// and a relaxed store of the consumer index. Both on `q` (its counters untouched).
Floors measure_floors(Harness& h, int reps, SyntheticQueues& q);

/// One cost row, text and JSON (`bench` names the JSON row's subcommand), with the median's
/// ratio to `floor` (ns; none when 0).
void report_cost(const char* bench, const char* mode, const char* executor, const char* op, std::uint64_t iters,
                 std::vector<double> v, double floor = 0);
/// The text header of report_cost's rows.
void print_cost_header();
/// The three floor rows of `f` for placement `mode`.
void report_floors(const char* bench, const char* mode, const Floors& f);

}  // namespace gv::bench
