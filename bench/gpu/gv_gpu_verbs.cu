// gv_gpu_verbs: the verbs path measured in the dissertation's four control modes, and what the
// device API costs on the GPU.
//
// Modes (--mode, a comma list, default all four). Each drives the soft provider through the
// same device-API calls (gv::ib::post_send, poll_cq, post_recv), compiled for the GPU or the host:
//   gpu-qgpu       GPU-controlled, queues on the GPU: kernels post and poll; the soft HCA's GPU
//                  engine (a persistent kernel) executes; queues and buffers in GPU memory. With
//                  two GPUs, one device (and engine) per GPU and QPs connected across them.
//   gpu-qhost      GPU-controlled, queues in pinned host memory mapped into the GPUs: kernels
//                  post and poll; the CPU engine (a host thread) executes.
//   host           host-controlled: host threads post and poll; the CPU engine executes.
//   host-assisted  a kernel raises request counts in mapped host memory (system-scope release);
//                  a host proxy thread per QP posts those work requests through the device API on
//                  the host, polls their completions (CPU engine) and raises done counts the
//                  kernel waits on (system-scope acquire). Buffers are pinned host memory that
//                  the kernel reads and writes itself: a ping-pong's receiver polls the last byte.
//
// Subcommands:
//   pingpong   RDMA WRITE ping-pong between two QPs, one block (GPU) or thread (host) a side;
//              with two GPUs one side on each. Half round trip in perftest's latency columns.
//              Variants: last_byte (the receiver polls the last byte of its buffer, as perftest
//              and the dissertation do) and completion (WRITE_WITH_IMM consumed by receives
//              posted ahead in batches, polled on the receive CQ).
//   bw         WRITEs from one QP, 64 in flight, one CQE per 16: perftest's bandwidth columns.
//   msgrate    8 B and 64 B inline WRITEs on 1..32 QPs: one block per QP in the GPU modes, one
//              host thread (host) or proxy thread (host-assisted) per QP, capped at one per
//              core besides the CPU engine's (rows beyond are skipped, with a note).
//   atomics    FETCH_ADD and CMP_SWP latency, each waited for: perftest's latency columns.
//   postpoll   cost on the GPU of post_send (one thread exclusive/shared, a warp writing one
//              WQE, a warp posting 32 WQEs with one doorbell) and of poll_cq on a ready CQE (one
//              thread, or a warp taking up to 32 with poll_cq_warp): on
//              synthetic rings in GPU or pinned host memory with no executor (the
//              dissertation's Table 5.2), and, for gpu-qgpu, on a real QP whose WQEs the GPU
//              engine executes (exclusive, warp and warp-batch posting: a queue keeps one
//              ownership mode for life). --no-engine leaves the real QP out, e.g. under ncu,
//              which serialises kernel launches and so would stall behind the resident engine.
//   anchors    what the hardware gives without any verbs: a flag ping-pong between two blocks
//              through GPU memory and through pinned host memory, and between two GPUs by peer
//              stores when two are present; cudaMemcpyPeerAsync latency.
//   drain      gpu-qgpu only: the GPU engine's time per WQE apart from its posters. With the
//              engine stopped, 1 or 16 QPs get up to 128 inline WRITEs each; the engine resumes
//              under blocks that wait for the CQEs, and a QP's first-to-last CQE time gives it.
//              --hold-ms MS runs the engine MS ms alone instead (for ncu; no timing).
// Options: --mode LIST, -a (8 B .. 4 MiB) or -s BYTES, -n ITERS, --gpus 1|2 (default 2 when two
// GPUs reach each other), --json (one object per row: bench, mode, variant, bytes, iters, the
// columns), --no-engine (postpoll), --hold-ms (drain).
//
// Time is read by whoever runs the experiment through gv::sync::now_ns(): %globaltimer in
// kernels, CLOCK_MONOTONIC on host threads. Payloads are seeded; after every run the received
// bytes (and the poisoned byte after them) are checked before its row is printed. Every wait is
// bounded; a run that times out or fails reports it, and the program prints the error and exits 1.
//
// While a gpu-qgpu device is open its engine kernel is resident, so a device-wide synchronising
// CUDA call would wait forever: the CUDA memory the experiments use is allocated before any such
// device opens and released after the last closes (Harness), kernels run on non-blocking
// streams, only those streams are synchronised, and kernels are loaded eagerly (main).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "../common/args.hpp"
#include "../common/stats.hpp"

namespace {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;
namespace m5 = gv::ib::mlx5;
constexpr auto kSys = gv::sync::Scope::kSystem;

/// What a failed CUDA call means, in the words host_setup uses: a machine without a GPU is
/// named as such (the runtime blames the driver version there).
std::string cuda_text(cudaError_t e) {
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    return std::string("no NVIDIA GPU or driver found (") + cudaGetErrorName(e) + ")";
  return cudaGetErrorString(e);
}

#define CK(expr)                                                                                 \
  do {                                                                                           \
    const cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#expr) + ": " + cuda_text(e_));  \
  } while (0)

bool g_json = false;

constexpr int kMaxRoles = 32;               ///< QPs one run drives (msgrate's largest count)
constexpr std::uint64_t kWindow = 64;       ///< WRs in flight per QP at most
constexpr std::uint32_t kSignalEvery = 16;  ///< one signaled WR (one CQE) per this many
constexpr std::uint32_t kRecvAhead = 64;    ///< receives kept posted for WRITE_WITH_IMM
constexpr std::uint32_t kRecvBatch = 32;    ///< ... topped up after this many are consumed
constexpr std::uint32_t kMaxInline = 64;    ///< messages up to this size go inline
constexpr std::uint8_t kPoison = 0xff;      ///< incoming regions before a run (never a tag)
constexpr auto kNotReported = static_cast<Status>(0xffffffffu);
constexpr std::uint32_t kAllAccess = gv::kLocalWrite | gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic;

std::uint32_t g_engine_warps = 4;           ///< gpu-qgpu: the GPU engine's warps (--engine-warps)

enum class Mode { kGpuQGpu, kGpuQHost, kHost, kHostAssisted };
constexpr Mode kAllModes[] = {Mode::kGpuQGpu, Mode::kGpuQHost, Mode::kHost, Mode::kHostAssisted};

const char* name(Mode m) {
  switch (m) {
    case Mode::kGpuQGpu: return "gpu-qgpu";
    case Mode::kGpuQHost: return "gpu-qhost";
    case Mode::kHost: return "host";
    case Mode::kHostAssisted: return "host-assisted";
  }
  return "?";
}

/// Modes whose posters are host threads: one per QP, plus the CPU engine's.
bool host_threads_post(Mode m) { return m == Mode::kHost || m == Mode::kHostAssisted; }

// ---- payloads -------------------------------------------------------------------------------

/// The last byte of ping-pong message k: never 0 and never the poison, and it differs from
/// message k - 1's, so the receiver cannot mistake the previous message for this one.
GV_HD inline std::uint8_t tag(std::uint64_t k) { return static_cast<std::uint8_t>(1 + k % 254); }

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
std::uint64_t seed_of(int endpoint, std::uint64_t bytes) {
  return mix64(0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(endpoint + 1) + bytes);
}
/// Byte i of the payload seeded by `seed`.
std::uint8_t pattern(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>(mix64(seed + (i >> 3)) >> (8 * (i & 7)));
}

// ---- what a poster runs: endpoints, work-request plans, transports, experiments ------------
// The experiments are written once, for the GPU and the host (GV_HD), over a transport:
// DirectTx posts and polls through the device API itself (gpu-qgpu, gpu-qhost, host, and the
// host-assisted proxies); ProxyTx hands each post to a proxy thread (host-assisted kernels).

/// One end of a connected QP pair as its poster sees it: the handles, its registered buffer
/// ([0, region): where the peer writes; [region, 2 region): outgoing data) and the peer's.
struct Endpoint {
  gv::ib::QpHandle qp;
  gv::ib::CqHandle scq, rcq;  ///< send completions; receive completions
  std::uint8_t* in = nullptr;
  std::uint8_t* out = nullptr;
  std::uint8_t* peer_in = nullptr;
  std::uint32_t lkey = 0, peer_rkey = 0;
};

/// The work requests of one run. WR k differs from WR 0 only in its immediate (k) and atomic
/// operands (CMP_SWP k -> k + 1, which succeeds every time; FETCH_ADD 1), so a poster and a
/// proxy build the same WR from k alone, and agree on which WRs are signaled.
struct WrPlan {
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  std::uint32_t flags = 0;  ///< kWrInline or 0 (signaling follows signal_every)
  Sge sge;                  ///< the local data (atomics: the word the old value lands in)
  std::uint64_t remote = 0;
  std::uint32_t rkey = 0;
  std::uint64_t n = 0;                        ///< WRs in the run
  std::uint32_t signal_every = kSignalEvery;  ///< one CQE per this many WRs, and one for the last
  bool receives = false;                      ///< the peer's WRs consume our receives

  GV_HD bool signaled(std::uint64_t k) const { return k % signal_every == signal_every - 1 || k + 1 == n; }
  /// WRs [0, done(c)) have completed once c send CQEs were polled (CQEs arrive in order).
  GV_HD std::uint64_t done(std::uint64_t cqes) const {
    const std::uint64_t d = cqes * signal_every;
    return d < n ? d : n;
  }
  /// WR k; it points at this plan's SGE.
  GV_HD SendWr wr(std::uint64_t k) const {
    SendWr w;
    w.opcode = opcode;
    w.flags = flags | (signaled(k) ? gv::ib::kWrSignaled : 0u);
    w.sg_list = &sge;
    w.num_sge = 1;
    w.imm = static_cast<std::uint32_t>(k);
    w.remote_addr = remote;
    w.rkey = rkey;
    w.compare_add = opcode == WrOpcode::kAtomicCmpSwp ? k : 1;
    w.swap = k + 1;
    return w;
  }
};

/// host-assisted: one kernel's requests to its proxy thread and the proxy's answers, in pinned
/// host memory mapped into the GPUs. Kernel and proxy write separate cache lines; the counts
/// only grow during a run and are reset between runs.
struct alignas(64) ProxyChannel {
  std::uint64_t requested = 0;  ///< kernel: WRs [0, requested) of the plan may be posted
  std::uint8_t pad[56] = {};
  std::uint64_t done = 0;       ///< proxy: WRs [0, done) have completed
  std::uint64_t received = 0;   ///< proxy: receive completions taken
  std::uint32_t failed = 0;     ///< proxy: nonzero after an error; ends every wait of the kernel
};

/// Posting through the device API: WR k of the plan, exclusive ownership of the QP and CQs.
/// Receives (for plans that take them) are kept kRecvAhead ahead, topped up in batches.
class DirectTx {
 public:
  GV_HD DirectTx(const Endpoint& ep, const WrPlan& plan) : ep_(&ep), plan_(plan) {}

  GV_HD Status start() { return plan_.receives ? top_up_receives() : Status::kOk; }
  GV_HD Status post(std::uint64_t k) {
    const SendWr wr = plan_.wr(k);
    return gv::ib::post_send<Ownership::kExclusive>(ep_->qp, wr);
  }
  /// WRs known to have completed.
  GV_HD std::uint64_t done() const { return plan_.done(cqes_); }
  GV_HD Status wait_sent(std::uint64_t min) {
    while (done() < min)
      if (const Status st = reap(true); st != Status::kOk) return st;
    return Status::kOk;
  }
  /// Wait for the receive completion of the peer's WR k.
  GV_HD Status wait_recv(std::uint64_t k) {
    while (received_ <= k)
      if (const Status st = receive(true); st != Status::kOk) return st;
    return Status::kOk;
  }
  GV_HD const std::uint32_t* abort() const { return ep_->qp.abort; }

  // One step at a time (the proxy's loop): kEmpty when nothing was ready.
  GV_HD std::uint64_t received() const { return received_; }
  GV_HD Status reap(bool wait) {
    gv::ib::Completion c;
    const Status st = wait ? gv::ib::poll_cq<Ownership::kExclusive>(ep_->scq, c)
                           : gv::ib::try_poll_cq<Ownership::kExclusive>(ep_->scq, c);
    if (st == Status::kOk) ++cqes_;
    return st;
  }
  GV_HD Status receive(bool wait) {
    gv::ib::Completion c;
    const Status st = wait ? gv::ib::poll_cq<Ownership::kExclusive>(ep_->rcq, c)
                           : gv::ib::try_poll_cq<Ownership::kExclusive>(ep_->rcq, c);
    if (st != Status::kOk) return st;
    ++received_;
    return received_ % kRecvBatch == 0 ? top_up_receives() : Status::kOk;
  }

 private:
  /// Post receives until kRecvAhead are outstanding. Counted from the QP's own counters, so
  /// the count carries over from one run to the next.
  GV_HD Status top_up_receives() {
    gv::ib::WqCounters* rq = &ep_->qp.state->rq;
    const std::uint64_t outstanding = gv::sync::load_relaxed(&rq->reserved) - gv::sync::load_acquire(&rq->completed);
    const Sge none{reinterpret_cast<std::uint64_t>(ep_->in), 0, ep_->lkey};  // WRITE_WITH_IMM scatters nothing
    for (std::uint64_t i = outstanding; i < kRecvAhead; ++i)
      if (const Status st = gv::ib::post_recv<Ownership::kExclusive>(ep_->qp, &none, 1); st != Status::kOk) return st;
    return Status::kOk;
  }

  const Endpoint* ep_;
  WrPlan plan_;
  std::uint64_t cqes_ = 0;      ///< send CQEs polled
  std::uint64_t received_ = 0;  ///< receive CQEs polled
};

/// host-assisted, the kernel's side. post() raises the request count with a system-scope
/// release, so the payload the kernel stored before it is visible to the proxy (and through the
/// proxy's doorbell to the CPU engine). The waits acquire the proxy's counts at system scope
/// and end early when the proxy reports a failure.
class ProxyTx {
 public:
  GV_HD explicit ProxyTx(ProxyChannel* ch) : ch_(ch) {}

  GV_HD Status start() { return Status::kOk; }  // the proxy keeps the receives posted
  GV_HD Status post(std::uint64_t k) {
    gv::sync::store_release(&ch_->requested, k + 1, kSys);
    return Status::kOk;
  }
  /// WRs known to have completed, as of the last wait (reading the count costs a PCIe round trip).
  GV_HD std::uint64_t done() const { return done_; }
  GV_HD Status wait_sent(std::uint64_t min) {
    if (done_ >= min) return Status::kOk;
    return gv::sync::bounded_wait([&] { return (done_ = gv::sync::load_acquire(&ch_->done, kSys)) >= min; },
                                  gv::Budget{}, abort());
  }
  GV_HD Status wait_recv(std::uint64_t k) {
    return gv::sync::bounded_wait([&] { return gv::sync::load_acquire(&ch_->received, kSys) > k; }, gv::Budget{},
                                  abort());
  }
  GV_HD const std::uint32_t* abort() const { return &ch_->failed; }

 private:
  ProxyChannel* ch_;
  std::uint64_t done_ = 0;
};

/// pingpong: roles 0 and 1 on endpoints 0 and 1. Role 0 starts every exchange and times it
/// (rtt_ns[k]); each side's message k ends with tag(k).
struct PingPong {
  std::uint32_t bytes;
  std::uint64_t n;  ///< exchanges, warm-up included
  bool completion;  ///< WRITE_WITH_IMM awaited on the receive CQ; otherwise the last byte

  GV_HD int endpoint(int role) const { return role; }
  GV_HD WrPlan plan(const Endpoint& ep) const {
    WrPlan p;
    p.opcode = completion ? WrOpcode::kRdmaWriteImm : WrOpcode::kRdmaWrite;
    p.flags = bytes <= kMaxInline ? gv::ib::kWrInline : 0u;
    p.sge = Sge{reinterpret_cast<std::uint64_t>(ep.out), bytes, ep.lkey};
    p.remote = reinterpret_cast<std::uint64_t>(ep.peer_in);
    p.rkey = ep.peer_rkey;
    p.n = n;
    p.receives = completion;
    return p;
  }
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint& ep, int role, std::uint64_t* rtt_ns) const {
    Status st = tx.start();
    for (std::uint64_t k = 0; k < n && st == Status::kOk; ++k) {
      const std::uint64_t t0 = gv::sync::now_ns();
      if (role == 0) {
        st = send(tx, ep, k);
        if (st == Status::kOk) st = receive(tx, ep, k);
        rtt_ns[k] = gv::sync::now_ns() - t0;
      } else {
        st = receive(tx, ep, k);
        if (st == Status::kOk) st = send(tx, ep, k);
      }
    }
    return st == Status::kOk ? tx.wait_sent(n) : st;  // leave no completion behind for the next run
  }
  template <class Tx>
  GV_HD Status send(Tx& tx, const Endpoint& ep, std::uint64_t k) const {
    ep.out[bytes - 1] = tag(k);  // the peer has taken message k - 1: the buffer is ours again
    if (k >= kWindow)
      if (const Status st = tx.wait_sent(k + 1 - kWindow); st != Status::kOk) return st;
    return tx.post(k);
  }
  template <class Tx>
  GV_HD Status receive(Tx& tx, const Endpoint& ep, std::uint64_t k) const {
    if (completion) return tx.wait_recv(k);
    // The executor of the peer's WRITEs stores the last byte last, with release at the scope
    // our QP records for it (rq_executor: the GPU for an engine on this GPU, else the system).
    const std::uint8_t want = tag(k);
    const std::uint8_t* last = ep.in + bytes - 1;
    return gv::sync::bounded_wait([&] { return gv::sync::load_acquire(last, ep.qp.rq_executor) == want; },
                                  gv::Budget{}, tx.abort());
  }
};

/// bw and msgrate: role r streams n WRITEs from endpoint 2r into endpoint 2r + 1, at most
/// kWindow in flight. t[2g] is when group g (the WRs one CQE covers) was first posted,
/// t[2g + 1] when its completion was seen.
struct Stream {
  std::uint32_t bytes;
  std::uint64_t n;

  GV_HD int endpoint(int role) const { return 2 * role; }
  GV_HD WrPlan plan(const Endpoint& ep) const {
    WrPlan p;
    p.flags = bytes <= kMaxInline ? gv::ib::kWrInline : 0u;
    p.sge = Sge{reinterpret_cast<std::uint64_t>(ep.out), bytes, ep.lkey};
    p.remote = reinterpret_cast<std::uint64_t>(ep.peer_in);
    p.rkey = ep.peer_rkey;
    p.n = n;
    return p;
  }
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t* t) const {
    Status st = tx.start();
    std::uint64_t timed = 0;  // groups whose completion time is recorded
    const auto settle = [&](std::uint64_t min) {
      st = tx.wait_sent(min);
      const std::uint64_t now = gv::sync::now_ns();
      for (; timed * kSignalEvery < tx.done(); ++timed) t[2 * timed + 1] = now;
    };
    for (std::uint64_t k = 0; k < n && st == Status::kOk; ++k) {
      if (k >= tx.done() + kWindow) {
        settle(k + 1 - kWindow);
        if (st != Status::kOk) break;
      }
      if (k % kSignalEvery == 0) t[2 * (k / kSignalEvery)] = gv::sync::now_ns();
      st = tx.post(k);
    }
    if (st == Status::kOk) settle(n);
    return st;
  }
};

/// atomics: role 0 (endpoint 0) applies n atomics to the first word of endpoint 1's buffer, one
/// at a time; lat_ns[k] is atomic k's post-to-completion time. The old value lands in the
/// first word of endpoint 0's outgoing region.
struct Atomic {
  bool cas;
  std::uint64_t n;

  GV_HD int endpoint(int) const { return 0; }
  GV_HD WrPlan plan(const Endpoint& ep) const {
    WrPlan p;
    p.opcode = cas ? WrOpcode::kAtomicCmpSwp : WrOpcode::kAtomicFetchAdd;
    p.sge = Sge{reinterpret_cast<std::uint64_t>(ep.out), 8, ep.lkey};
    p.remote = reinterpret_cast<std::uint64_t>(ep.peer_in);
    p.rkey = ep.peer_rkey;
    p.n = n;
    p.signal_every = 1;
    return p;
  }
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t* lat_ns) const {
    Status st = tx.start();
    for (std::uint64_t k = 0; k < n && st == Status::kOk; ++k) {
      const std::uint64_t t0 = gv::sync::now_ns();
      st = tx.post(k);
      if (st == Status::kOk) st = tx.wait_sent(k + 1);
      lat_ns[k] = gv::sync::now_ns() - t0;
    }
    return st;
  }
};

/// drain's two steps work on Stream's endpoints and plan.
struct OnStream {
  Stream stream;
  GV_HD int endpoint(int role) const { return stream.endpoint(role); }
  GV_HD WrPlan plan(const Endpoint& ep) const { return stream.plan(ep); }
};

/// drain, step 1: role r posts n WRITEs on a QP whose executor is stopped.
struct Prepost : OnStream {
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t*) const {
    Status st = tx.start();
    for (std::uint64_t k = 0; k < stream.n && st == Status::kOk; ++k) st = tx.post(k);
    return st;
  }
};

/// drain, step 2: role r takes the CQEs of the n pre-posted WRITEs; t[0] is when the first
/// was seen, t[1] the last.
struct DrainWait : OnStream {
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t* t) const {
    Status st = tx.wait_sent(1);  // the first CQE
    t[0] = gv::sync::now_ns();
    if (st == Status::kOk) st = tx.wait_sent(stream.n);
    t[1] = gv::sync::now_ns();
    return st;
  }
};

/// Where the roles of one launch find their endpoints and leave their results.
struct RoleArgs {
  int first = 0;                     ///< the role of block 0
  Endpoint ep[kMaxRoles];            ///< block b's endpoint
  ProxyChannel* chans = nullptr;     ///< host-assisted: role r's channel is chans[r]
  Status* status = nullptr;          ///< role r's result (mapped host memory)
  std::uint64_t* samples = nullptr;  ///< role r's samples: [r * cap, (r + 1) * cap)
  std::uint64_t cap = 0;
};

/// One single-thread block per role.
template <class Exp, bool kProxied>
__global__ void role_kernel(const __grid_constant__ Exp exp, const __grid_constant__ RoleArgs a) {
  const int role = a.first + static_cast<int>(blockIdx.x);
  const Endpoint& ep = a.ep[blockIdx.x];
  std::uint64_t* samples = a.samples + static_cast<std::uint64_t>(role) * a.cap;
  if constexpr (kProxied) {
    ProxyTx tx(a.chans + role);
    a.status[role] = exp.run(tx, ep, role, samples);
  } else {
    DirectTx tx(ep, exp.plan(ep));
    a.status[role] = exp.run(tx, ep, role, samples);
  }
}

/// host-assisted: one role's proxy thread. Posts the WRs its kernel requested (at most kWindow
/// ahead of their completions), polls the send and receive CQs, and publishes the counts. On an
/// error it raises `failed`, which ends the kernel's waits, and returns the error.
Status serve_proxy(const Endpoint& ep, const WrPlan& plan, ProxyChannel* ch, const std::atomic<bool>& stop) {
  DirectTx tx(ep, plan);
  const auto publish = [](Status st, std::uint64_t* count, std::uint64_t v) {
    if (st == Status::kOk) gv::sync::store_release(count, v);
    return st == Status::kEmpty ? Status::kOk : st;
  };
  Status st = tx.start();
  std::uint64_t posted = 0;
  while (st == Status::kOk && !stop.load(std::memory_order_acquire)) {
    const std::uint64_t requested = gv::sync::load_acquire(&ch->requested);
    while (st == Status::kOk && posted < requested && posted < tx.done() + kWindow) st = tx.post(posted++);
    if (st == Status::kOk) {
      const Status r = tx.reap(false);
      st = publish(r, &ch->done, tx.done());
    }
    if (st == Status::kOk && plan.receives) {
      const Status r = tx.receive(false);
      st = publish(r, &ch->received, tx.received());
    }
    gv::sync::spin_pause();
  }
  if (st != Status::kOk) gv::sync::store_release(&ch->failed, std::uint32_t{1});
  return st;
}

// ---- host side: resources, test beds, and one runner per kind of poster ----------------------

template <class T>
T* alloc_mapped(std::size_t count) {
  void* p = nullptr;
  CK(cudaHostAlloc(&p, count * sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable));
  void* dp = nullptr;
  if (cudaHostGetDevicePointer(&dp, p, 0) != cudaSuccess || dp != p) {
    (void)cudaGetLastError();
    (void)cudaFreeHost(p);
    throw std::runtime_error("pinned host memory is not mapped at its host address in the GPU (no unified addressing)");
  }
  std::memset(p, 0, count * sizeof(T));
  return static_cast<T*>(p);
}

/// Lets GPU `from` access GPU `to`'s memory (already allowed is fine).
void enable_peer_access(int from, int to) {
  CK(cudaSetDevice(from));
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();
  else
    CK(e);
}

/// The CUDA resources the experiments share, made before any GPU engine starts and released
/// after the last one stopped: one non-blocking stream per GPU, and pinned host memory mapped
/// into the GPUs for the roles' results, the proxies' channels and staging copies.
struct Harness {
  static constexpr std::size_t kStaging = std::size_t{4} << 20;
  std::uint64_t cap = 0;             ///< samples per role
  std::vector<cudaStream_t> streams;  ///< streams[g]: GPU g's
  Status* status = nullptr;
  std::uint64_t* samples = nullptr;
  ProxyChannel* chans = nullptr;
  std::uint8_t* staging = nullptr;

  Harness(int gpus, std::uint64_t samples_per_role) : cap(samples_per_role) {
    try {
      for (int g = 0; g < gpus; ++g) {
        CK(cudaSetDevice(g));
        cudaStream_t s = nullptr;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        streams.push_back(s);
      }
      CK(cudaSetDevice(0));
      status = alloc_mapped<Status>(kMaxRoles);
      samples = alloc_mapped<std::uint64_t>(kMaxRoles * cap);
      chans = alloc_mapped<ProxyChannel>(kMaxRoles);
      staging = alloc_mapped<std::uint8_t>(kStaging);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Harness() { release(); }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  std::uint64_t* samples_of(int role) const { return samples + static_cast<std::uint64_t>(role) * cap; }

 private:
  void release() {
    for (void* p : {static_cast<void*>(status), static_cast<void*>(samples), static_cast<void*>(chans),
                    static_cast<void*>(staging)})
      if (p) (void)cudaFreeHost(p);
    for (std::size_t g = 0; g < streams.size(); ++g) {
      (void)cudaSetDevice(static_cast<int>(g));
      (void)cudaStreamDestroy(streams[g]);
    }
    (void)cudaSetDevice(0);
  }
};

/// What a test bed holds: `pairs` connected QP pairs; each endpoint a send CQ, a receive CQ and
/// a buffer of 2 * region bytes.
struct Shape {
  int pairs = 1;
  std::size_t region = 4096;
  std::uint32_t sq_depth = 128, rq_depth = 128, cq_depth = 256;
};

/// Incoming regions hold the largest message and the poisoned byte after it.
std::size_t region_for(std::uint64_t max_bytes) { return (max_bytes + 1 + 4095) & ~std::size_t{4095}; }

/// Joins its threads however the scope ends; `stop` first tells them to finish.
struct Threads {
  std::vector<std::thread> t;
  std::atomic<bool> stop{false};
  ~Threads() {
    stop.store(true, std::memory_order_release);
    for (auto& x : t)
      if (x.joinable()) x.join();
  }
};

/// The endpoints of one mode: devices, QP pairs (endpoints 2p and 2p + 1 are connected), their
/// buffers, and the runner that drives roles through them. With two GPUs, endpoint e is on
/// GPU e % 2: its queues and buffers for gpu-qgpu, its kernel for the GPU-controlled and
/// host-assisted modes.
class Testbed {
 public:
  Testbed(Mode mode, int gpus, const Shape& shape, Harness& h)
      : mode_(mode), gpus_(mode == Mode::kHost ? 1 : gpus), shape_(shape), h_(h) {
    try {
      open(shape);
    } catch (...) {
      teardown();
      throw;
    }
  }
  ~Testbed() { teardown(); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  Mode mode() const { return mode_; }
  /// GPUs the roles run on (0: host threads).
  int gpus() const { return mode_ == Mode::kHost ? 0 : gpus_; }
  int gpu_of(int e) const { return gpus_ == 2 ? e % 2 : 0; }
  std::size_t region() const { return shape_.region; }
  const Endpoint& ep(int e) const { return eps_[static_cast<std::size_t>(e)]; }

  /// Copy into / out of endpoint e's buffer at `off` (GPU memory through the staging buffer).
  void put(int e, std::size_t off, const std::uint8_t* src, std::size_t n) {
    std::uint8_t* dst = buf_[static_cast<std::size_t>(e)] + off;
    if (mode_ != Mode::kGpuQGpu) {
      std::memcpy(dst, src, n);
      return;
    }
    const int g = gpu_of(e);
    CK(cudaSetDevice(g));
    for (std::size_t i = 0; i < n; i += Harness::kStaging) {
      const std::size_t c = std::min(Harness::kStaging, n - i);
      std::memcpy(h_.staging, src + i, c);
      CK(cudaMemcpyAsync(dst + i, h_.staging, c, cudaMemcpyHostToDevice, h_.streams[static_cast<std::size_t>(g)]));
      CK(cudaStreamSynchronize(h_.streams[static_cast<std::size_t>(g)]));
    }
  }
  std::vector<std::uint8_t> get(int e, std::size_t off, std::size_t n) {
    const std::uint8_t* src = buf_[static_cast<std::size_t>(e)] + off;
    std::vector<std::uint8_t> v(n);
    if (mode_ != Mode::kGpuQGpu) {
      std::memcpy(v.data(), src, n);
      return v;
    }
    const int g = gpu_of(e);
    CK(cudaSetDevice(g));
    for (std::size_t i = 0; i < n; i += Harness::kStaging) {
      const std::size_t c = std::min(Harness::kStaging, n - i);
      CK(cudaMemcpyAsync(h_.staging, src + i, c, cudaMemcpyDeviceToHost, h_.streams[static_cast<std::size_t>(g)]));
      CK(cudaStreamSynchronize(h_.streams[static_cast<std::size_t>(g)]));
      std::memcpy(v.data() + i, h_.staging, c);
    }
    return v;
  }

  /// gpu-qgpu: stop / restart every device's GPU engine (queues keep their state).
  void quiesce() {
    for (auto& d : dev_) d->quiesce();
  }
  void resume() {
    for (auto& d : dev_) d->resume();
  }

  /// Run roles [0, roles) of `exp` and check that each reported success; `what` names the run
  /// in errors.
  template <class Exp>
  void run(const Exp& exp, int roles, const std::string& what) {
    if (roles < 1 || roles > kMaxRoles) throw std::logic_error(what + ": bad role count");
    for (int r = 0; r < roles; ++r) h_.status[r] = kNotReported;
    switch (mode_) {
      case Mode::kGpuQGpu:
      case Mode::kGpuQHost: launch<Exp, false>(exp, roles, what); break;
      case Mode::kHost: run_host_threads(exp, roles); break;
      case Mode::kHostAssisted: run_host_assisted(exp, roles, what); break;
    }
    for (int r = 0; r < roles; ++r) {
      const Status st = h_.status[r];
      if (st == Status::kOk) continue;
      throw gv::Error(what + ": role " + std::to_string(r) +
                      (st == kNotReported ? " did not report (its kernel or thread did not run)"
                                          : std::string(" ended with ") + gv::to_string(st)) +
                      async_events());
    }
  }

 private:
  int dev_of(int e) const { return dev_.size() == 2 ? e % 2 : 0; }

  void open(const Shape& s) {
    const int ends = 2 * s.pairs;
    const int ndev = mode_ == Mode::kGpuQGpu ? gpus_ : 1;
    // host-assisted kernels use the buffers, but the proxies use the handles on the host: the
    // device stays unmapped (its queue counters in host memory), the buffers are mapped
    // pinned memory of ours, registered from outside the device's arena.
    const bool pinned_buffers = mode_ == Mode::kHostAssisted;
    for (int d = 0; d < ndev; ++d) {
      gv::DeviceOptions o;
      o.arena_bytes = arena_bytes(s, ends / ndev, !pinned_buffers);
      if (mode_ == Mode::kGpuQGpu) {
        o.engine = gv::DeviceOptions::Engine::kGpu;
        o.gpu = d;
        o.engine_warps = g_engine_warps;
      }
      o.map_to_gpus = mode_ == Mode::kGpuQHost;
      dev_.push_back(gv::Device::open("soft", o));
      pd_.push_back(dev_.back()->alloc_pd());
    }
    gv::QpCaps caps;
    caps.sq_depth = s.sq_depth;
    caps.rq_depth = s.rq_depth;
    caps.max_inline = kMaxInline;
    for (int e = 0; e < ends; ++e) {
      const std::size_t d = static_cast<std::size_t>(dev_of(e));
      // gpu-qhost: the provider places a queue's poster/poller counters in memory of the
      // current GPU; make that the GPU whose kernel posts and polls.
      if (mode_ == Mode::kGpuQHost) CK(cudaSetDevice(gpu_of(e)));
      scq_.push_back(dev_[d]->create_cq(s.cq_depth));
      rcq_.push_back(dev_[d]->create_cq(s.cq_depth));
      qp_.push_back(pd_[d]->create_qp(*scq_.back(), *rcq_.back(), caps));
      if (pinned_buffers) {
        buf_.push_back(alloc_mapped<std::uint8_t>(2 * s.region));
      } else {
        buf_.push_back(static_cast<std::uint8_t*>(dev_[d]->alloc(2 * s.region)));
      }
      mr_.push_back(pd_[d]->reg_mr(buf_.back(), 2 * s.region, kAllAccess));
    }
    CK(cudaSetDevice(0));
    for (int p = 0; p < s.pairs; ++p) {
      qp_[2 * p]->connect(qp_[2 * p + 1]->info());
      qp_[2 * p + 1]->connect(qp_[2 * p]->info());
    }
    // Handles after connecting: a QP's handle records who delivers into it (rq_executor).
    for (std::size_t e = 0; e < static_cast<std::size_t>(ends); ++e) {
      Endpoint x;
      x.qp = qp_[e]->device_handle();
      x.scq = scq_[e]->device_handle();
      x.rcq = rcq_[e]->device_handle();
      x.in = buf_[e];
      x.out = buf_[e] + s.region;
      x.peer_in = buf_[e ^ 1];
      x.lkey = mr_[e]->lkey();
      x.peer_rkey = mr_[e ^ 1]->rkey();
      eps_.push_back(x);
    }
  }

  static std::size_t arena_bytes(const Shape& s, int ends, bool buffers) {
    // Rings of the largest WQEs (two WQEBBs with 64 B inline), receive WQEs, two CQs, padding.
    const std::size_t queues = std::size_t{s.sq_depth} * 128 + std::size_t{s.rq_depth} * 64 +
                               2 * std::size_t{s.cq_depth} * 64 + 8 * 4096;
    const std::size_t per_end = queues + (buffers ? 2 * s.region + 4096 : 0);
    return std::max(std::size_t{64} << 20, (std::size_t{16} << 20) + static_cast<std::size_t>(ends) * per_end);
  }

  /// Stops the GPU engines first (so that nothing below waits on a resident kernel), then
  /// releases in dependency order. Never throws.
  void teardown() noexcept {
    if (mode_ == Mode::kGpuQGpu) {
      for (auto& d : dev_) {
        try {
          d->quiesce();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "gv_gpu_verbs: warning: %s\n", e.what());
        }
      }
    }
    mr_.clear();
    for (std::size_t e = 0; e < buf_.size(); ++e) {
      if (mode_ == Mode::kHostAssisted) {
        (void)cudaFreeHost(buf_[e]);
        continue;
      }
      try {
        dev_[static_cast<std::size_t>(dev_of(static_cast<int>(e)))]->free(buf_[e]);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "gv_gpu_verbs: warning: %s\n", ex.what());
      }
    }
    buf_.clear();
    qp_.clear();
    scq_.clear();
    rcq_.clear();
    pd_.clear();
    dev_.clear();
  }

  std::string async_events() {
    std::string s;
    for (auto& d : dev_)
      while (auto e = d->poll_async_event()) s += "; " + e->message;
    return s;
  }

  /// GPU-controlled and host-assisted kernels: one launch per GPU holding that GPU's roles
  /// (contiguous), one single-thread block per role, all resident together.
  template <class Exp, bool kProxied>
  void launch(const Exp& exp, int roles, const std::string& what) {
    std::vector<int> launched;
    std::string error;  // the first
    const auto check = [&](cudaError_t e, const char* doing, int g) {
      if (e != cudaSuccess && error.empty())
        error = what + ": " + doing + " GPU " + std::to_string(g) + ": " + cudaGetErrorString(e);
      return e == cudaSuccess;
    };
    for (int lo = 0; lo < roles && error.empty();) {
      const int g = gpu_of(exp.endpoint(lo));
      int hi = lo + 1;
      while (hi < roles && gpu_of(exp.endpoint(hi)) == g) ++hi;
      if (std::find(launched.begin(), launched.end(), g) != launched.end()) {
        error = what + ": the roles of GPU " + std::to_string(g) + " are not contiguous";
        break;
      }
      RoleArgs a;
      a.first = lo;
      for (int r = lo; r < hi; ++r) a.ep[r - lo] = ep(exp.endpoint(r));
      a.chans = h_.chans;
      a.status = h_.status;
      a.samples = h_.samples;
      a.cap = h_.cap;
      if (check(cudaSetDevice(g), "selecting", g)) {
        role_kernel<Exp, kProxied><<<static_cast<unsigned>(hi - lo), 1, 0, h_.streams[static_cast<std::size_t>(g)]>>>(exp, a);
        if (check(cudaGetLastError(), "launching on", g)) launched.push_back(g);
      }
      lo = hi;
    }
    // Wait for whatever was launched before reporting: a kernel left running would outlive its
    // queues. Its waits are bounded, so this ends.
    for (const int g : launched)
      if (check(cudaSetDevice(g), "selecting", g))
        check(cudaStreamSynchronize(h_.streams[static_cast<std::size_t>(g)]), "the kernel on", g);
    CK(cudaSetDevice(0));
    if (!error.empty()) throw std::runtime_error(error);
  }

  /// host: one host thread per role, posting and polling through the device API.
  template <class Exp>
  void run_host_threads(const Exp& exp, int roles) {
    Threads th;
    for (int r = 0; r < roles; ++r)
      th.t.emplace_back([this, &exp, r] {
        const Endpoint& e = ep(exp.endpoint(r));
        DirectTx tx(e, exp.plan(e));
        h_.status[r] = exp.run(tx, e, r, h_.samples_of(r));
      });
  }

  /// host-assisted: one proxy thread per role serves the roles' kernel; a failed proxy is
  /// reported before the kernel's resulting kAborted.
  template <class Exp>
  void run_host_assisted(const Exp& exp, int roles, const std::string& what) {
    std::vector<Status> proxy(static_cast<std::size_t>(roles), kNotReported);
    {
      Threads th;
      for (int r = 0; r < roles; ++r) {
        h_.chans[r] = ProxyChannel{};
        th.t.emplace_back([this, &exp, &proxy, &th, r] {
          const Endpoint& e = ep(exp.endpoint(r));
          proxy[static_cast<std::size_t>(r)] = serve_proxy(e, exp.plan(e), &h_.chans[r], th.stop);
        });
      }
      launch<Exp, true>(exp, roles, what);
    }
    for (int r = 0; r < roles; ++r)
      if (proxy[static_cast<std::size_t>(r)] != Status::kOk)
        throw gv::Error(what + ": the proxy of role " + std::to_string(r) + " ended with " +
                        gv::to_string(proxy[static_cast<std::size_t>(r)]) + async_events());
  }

  Mode mode_;
  int gpus_;
  Shape shape_;
  Harness& h_;
  std::vector<std::unique_ptr<gv::Device>> dev_;
  std::vector<std::unique_ptr<gv::ProtectionDomain>> pd_;
  std::vector<std::unique_ptr<gv::CompletionQueue>> scq_, rcq_;
  std::vector<std::unique_ptr<gv::QueuePair>> qp_;
  std::vector<std::uint8_t*> buf_;
  std::vector<std::unique_ptr<gv::MemoryRegion>> mr_;
  std::vector<Endpoint> eps_;
};

// ---- the experiments' drivers -----------------------------------------------------------------

struct Options {
  std::string cmd;
  std::vector<Mode> modes{std::begin(kAllModes), std::end(kAllModes)};
  std::vector<std::uint64_t> sizes;  ///< empty: the subcommand's default
  std::uint64_t iters = 1000;
  int gpus = 0;  ///< 0: two when two GPUs reach each other, else one
  bool engine = true;  ///< postpoll: include the gpu-qgpu QP (a resident GPU engine)
  int hold_ms = 0;     ///< drain: run the engine this long alone instead of timing it (ncu)

  bool has(Mode m) const { return std::find(modes.begin(), modes.end(), m) != modes.end(); }
};

/// Where a test bed's posters run, for the text headers.
std::string where(const Testbed& tb) {
  return tb.gpus() == 0 ? "host threads" : tb.gpus() == 1 ? "1 GPU" : "2 GPUs (a side on each)";
}

/// The text rows' leading columns.
std::string lead(const char* mode, const char* variant) {
  char b[64];
  std::snprintf(b, sizeof(b), " %-13s %-10s", mode, variant);
  return b;
}

/// The JSON rows' leading keys.
std::string json_keys(Mode m, const char* variant, int gpus) {
  char b[128];
  std::snprintf(b, sizeof(b), "\"mode\":\"%s\",\"variant\":\"%s\",\"gpus\":%d,\"engine_warps\":%u,", name(m),
                variant, gpus, m == Mode::kGpuQGpu ? g_engine_warps : 0u);
  return b;
}

void print_latency(const char* bench, const Testbed& tb, const char* variant, std::uint64_t bytes,
                   std::uint64_t iters, const gv::bench::LatencyStats& s) {
  if (g_json)
    std::printf("%s\n", gv::bench::latency_json(bench, json_keys(tb.mode(), variant, tb.gpus()), bytes, iters, s).c_str());
  else
    gv::bench::print_latency_row(stdout, bytes, iters, s, lead(name(tb.mode()), variant));
}

/// ns[from, to) divided by `div`: microseconds (1000), or half round trips in microseconds (2000).
std::vector<double> microseconds(const std::uint64_t* ns, std::uint64_t from, std::uint64_t to, double div) {
  std::vector<double> v;
  for (std::uint64_t k = from; k < to; ++k) v.push_back(static_cast<double>(ns[k]) / div);
  return v;
}

/// Before a run: endpoints [0, ends) hold `bytes` of their seeded payloads in their outgoing
/// regions, and poison in their incoming ones (where the message and the byte after it go).
void load_payloads(Testbed& tb, int ends, std::uint32_t bytes) {
  std::vector<std::uint8_t> v(std::size_t{bytes} + 1);
  for (int e = 0; e < ends; ++e) {
    const std::uint64_t s = seed_of(e, bytes);
    for (std::uint32_t i = 0; i < bytes; ++i) v[i] = pattern(s, i);
    tb.put(e, tb.region(), v.data(), bytes);
    std::fill(v.begin(), v.end(), kPoison);
    tb.put(e, 0, v.data(), v.size());
  }
}

/// After a run: endpoint e's incoming region holds endpoint `from`'s payload, with `last` as
/// its last byte, and the poison after it.
void expect_payload(Testbed& tb, int e, int from, std::uint32_t bytes, std::uint8_t last, const std::string& what) {
  const std::vector<std::uint8_t> got = tb.get(e, 0, std::size_t{bytes} + 1);
  const std::uint64_t s = seed_of(from, bytes);
  for (std::uint32_t i = 0; i <= bytes; ++i) {
    const std::uint8_t want = i == bytes ? kPoison : i + 1 == bytes ? last : pattern(s, i);
    if (got[i] == want) continue;
    char b[160];
    std::snprintf(b, sizeof(b), ": endpoint %d byte %u is 0x%02x, expected 0x%02x (%s)", e, i, got[i], want,
                  i == bytes ? "the poison after the message" : "the peer's seeded payload");
    throw gv::Error(what + b);
  }
}

void bench_pingpong(const Options& o, Harness& h) {
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{8} : o.sizes;
  Shape shape;
  shape.region = region_for(*std::max_element(sizes.begin(), sizes.end()));
  for (const Mode m : o.modes) {
    Testbed tb(m, o.gpus, shape, h);
    for (const bool completion : {false, true}) {
      const char* variant = completion ? "completion" : "last_byte";
      if (!g_json) {
        std::printf("# pingpong, %s, %s: %s; half round trip; %s\n", name(m), variant,
                    completion ? "RDMA WRITE_WITH_IMM, the receiver polls its receive CQ"
                               : "RDMA WRITE, the receiver polls the last byte",
                    where(tb).c_str());
        gv::bench::print_latency_header(stdout, lead("mode", "variant"));
      }
      for (const std::uint64_t bytes : sizes) {
        const bool big = bytes > 65536;
        const std::uint64_t iters = big ? std::min<std::uint64_t>(o.iters, 100) : o.iters;
        const std::uint64_t warmup = big ? 10 : 100;
        const PingPong exp{static_cast<std::uint32_t>(bytes), warmup + iters, completion};
        const std::string what = std::string(name(m)) + " pingpong " + variant + " " + std::to_string(bytes) + " B";
        load_payloads(tb, 2, exp.bytes);
        tb.run(exp, 2, what);
        for (const int e : {0, 1}) expect_payload(tb, e, 1 - e, exp.bytes, tag(exp.n - 1), what);
        print_latency("pingpong", tb, variant, bytes, iters,
                      gv::bench::summarize(microseconds(h.samples_of(0), warmup, exp.n, 2000.0)));
      }
    }
  }
}

/// A stream role's message groups, from its samples (see Stream).
std::vector<gv::bench::MsgGroup> groups_of(const std::uint64_t* t, std::uint64_t n) {
  std::vector<gv::bench::MsgGroup> g;
  for (std::uint64_t i = 0; i * kSignalEvery < n; ++i)
    g.push_back({std::min<std::uint64_t>(kSignalEvery, n - i * kSignalEvery), t[2 * i], t[2 * i + 1]});
  return g;
}

void bench_bw(const Options& o, Harness& h) {
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{65536} : o.sizes;
  Shape shape;
  shape.region = region_for(*std::max_element(sizes.begin(), sizes.end()));
  for (const Mode m : o.modes) {
    Testbed tb(m, o.gpus, shape, h);
    if (!g_json) {
      std::printf("# bw, %s: RDMA WRITEs from one QP, %llu in flight, one CQE per %u, at most 512 MiB a size; "
                  "GB/s = 1e9 B/s; %s\n",
                  name(m), static_cast<unsigned long long>(kWindow), kSignalEvery, where(tb).c_str());
      gv::bench::print_bw_header(stdout, lead("mode", "variant"));
    }
    for (const std::uint64_t bytes : sizes) {
      // A CPU engine moves a few GB/s: bound the bytes a size costs, but keep two windows.
      const std::uint64_t n = std::min(o.iters, std::max<std::uint64_t>(2 * kWindow, (std::uint64_t{512} << 20) / bytes));
      const Stream exp{static_cast<std::uint32_t>(bytes), n};
      const std::string what = std::string(name(m)) + " bw " + std::to_string(bytes) + " B";
      load_payloads(tb, 2, exp.bytes);
      tb.run(exp, 1, what);
      expect_payload(tb, 1, 0, exp.bytes, pattern(seed_of(0, bytes), bytes - 1), what);
      const auto s = gv::bench::bandwidth(groups_of(h.samples_of(0), n), bytes, kWindow);
      if (g_json)
        std::printf("%s\n", gv::bench::bw_json("bw", json_keys(m, "write", tb.gpus()), bytes, n, s).c_str());
      else
        gv::bench::print_bw_row(stdout, bytes, n, s, lead(name(m), "write"));
    }
  }
}

void bench_msgrate(const Options& o, Harness& h) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  Shape shape;
  shape.pairs = kMaxRoles;
  for (const Mode m : o.modes) {
    Testbed tb(m, o.gpus, shape, h);
    if (!g_json) {
      std::printf("# msgrate, %s: inline RDMA WRITEs, %s per QP, %llu in flight, one CQE per %u, %llu per QP; %s\n",
                  name(m),
                  m == Mode::kHost ? "one host thread" : m == Mode::kHostAssisted ? "one block and one proxy thread" : "one block",
                  static_cast<unsigned long long>(kWindow), kSignalEvery, static_cast<unsigned long long>(o.iters),
                  where(tb).c_str());
      std::printf("%s %-6s %-8s %-12s %s\n", lead("mode", "variant").c_str(), "#QPs", "#bytes", "#messages", "MsgRate[Mmsg/s]");
    }
    for (const std::uint32_t bytes : {8u, 64u}) {
      for (const int qps : {1, 2, 4, 8, 16, 32}) {
        if (host_threads_post(m) && static_cast<unsigned>(qps) + 1 > cores) {
          std::fprintf(g_json ? stderr : stdout,
                       "# msgrate, %s: %d QPs skipped: %d posting threads and the CPU engine's exceed the %u cores\n",
                       name(m), qps, qps, cores);
          continue;
        }
        const Stream exp{bytes, o.iters};
        const std::string what = std::string(name(m)) + " msgrate " + std::to_string(qps) + " QPs " + std::to_string(bytes) + " B";
        load_payloads(tb, 2 * qps, bytes);
        tb.run(exp, qps, what);
        std::uint64_t first = ~std::uint64_t{0}, last = 0;
        for (int r = 0; r < qps; ++r) {
          expect_payload(tb, 2 * r + 1, 2 * r, bytes, pattern(seed_of(2 * r, bytes), bytes - 1), what);
          const auto g = groups_of(h.samples_of(r), exp.n);
          first = std::min(first, g.front().post_ns);
          last = std::max(last, g.back().done_ns);
        }
        // The roles share a clock (one GPU's %globaltimer, or the host's): first post to last completion.
        const double total = static_cast<double>(exp.n) * qps;
        const double rate = last > first ? total / static_cast<double>(last - first) * 1e3 : 0.0;
        if (g_json)
          std::printf("{\"bench\":\"msgrate\",%s\"bytes\":%u,\"iters\":%llu,\"qps\":%d,\"messages\":%.0f,\"mmsg_per_s\":%.4f}\n",
                      json_keys(m, "inline", tb.gpus()).c_str(), bytes, static_cast<unsigned long long>(exp.n), qps, total, rate);
        else
          std::printf("%s %-6d %-8u %-12.0f %.4f\n", lead(name(m), "inline").c_str(), qps, bytes, total, rate);
      }
    }
  }
}

std::uint64_t word_of(const std::vector<std::uint8_t>& b) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data(), sizeof(v));
  return v;
}

void bench_atomics(const Options& o, Harness& h) {
  constexpr std::uint64_t kWarmup = 100;
  for (const Mode m : o.modes) {
    Testbed tb(m, o.gpus, Shape{}, h);
    if (!g_json) {
      std::printf("# atomics, %s: one 8-byte atomic at a time on the peer's memory, post to completion; %s\n",
                  name(m), where(tb).c_str());
      gv::bench::print_latency_header(stdout, lead("mode", "variant"));
    }
    for (const bool cas : {false, true}) {
      const char* variant = cas ? "cmp_swp" : "fetch_add";
      const Atomic exp{cas, kWarmup + o.iters};
      const std::string what = std::string(name(m)) + " atomics " + variant;
      const std::uint8_t zero[8] = {};
      const std::uint8_t poison[8] = {kPoison, kPoison, kPoison, kPoison, kPoison, kPoison, kPoison, kPoison};
      tb.put(1, 0, zero, sizeof(zero));
      tb.put(0, tb.region(), poison, sizeof(poison));
      tb.run(exp, 1, what);
      // Every operation applied (CMP_SWP k -> k + 1 succeeds only on its turn); the last one fetched n - 1.
      const std::uint64_t target = word_of(tb.get(1, 0, 8)), old = word_of(tb.get(0, tb.region(), 8));
      if (target != exp.n || old != exp.n - 1)
        throw gv::Error(what + ": the remote word is " + std::to_string(target) + " (expected " + std::to_string(exp.n) +
                        ") and the last fetched value " + std::to_string(old) + " (expected " + std::to_string(exp.n - 1) + ")");
      print_latency("atomics", tb, variant, 8, o.iters,
                    gv::bench::summarize(microseconds(h.samples_of(0), kWarmup, exp.n, 1000.0)));
    }
  }
}

// ---- postpoll ---------------------------------------------------------------------------------

enum class PostMode : int { kThreadExclusive, kThreadShared, kWarp, kWarpBatch };
const char* name(PostMode m) {
  switch (m) {
    case PostMode::kThreadExclusive: return "thread-exclusive";
    case PostMode::kThreadShared: return "thread-shared";
    case PostMode::kWarp: return "warp-cooperative";
    case PostMode::kWarpBatch: return "warp-batch32";
  }
  return "?";
}
GV_HD bool warp_wide(PostMode m) { return m == PostMode::kWarp || m == PostMode::kWarpBatch; }

/// Synthetic rings: posts `n` calls of one-WQEBB WQEs. With no executor, the kernel retires its
/// own WQEs every quarter ring: the count lives in a register, so the harness adds one compare
/// per call and one load and store per quarter ring to what is measured.
__global__ void post_cost_kernel(const __grid_constant__ gv::ib::QpHandle qp, int n, PostMode mode,
                                 std::uint64_t* ns, Status* status) {
  std::uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const Sge sge{reinterpret_cast<std::uint64_t>(payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrInline;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = 0x1000;
  wr.rkey = 0x55;
  Status st = Status::kOk;
  const bool warp = warp_wide(mode);
  if (!warp && threadIdx.x != 0) return;
  const int per_call = mode == PostMode::kWarpBatch ? 32 : 1;  // WQEBBs per call
  const int retire_every = static_cast<int>(qp.sq_bbs / 4) / per_call;
  __syncwarp(warp ? 0xffffffffu : 1u);
  const std::uint64_t t0 = gv::sync::now_ns();
  for (int i = 1; i <= n && st == Status::kOk; ++i) {
    switch (mode) {
      case PostMode::kThreadExclusive: st = gv::ib::post_send<Ownership::kExclusive>(qp, wr); break;
      case PostMode::kThreadShared: st = gv::ib::post_send<Ownership::kShared>(qp, wr); break;
      case PostMode::kWarp: st = gv::ib::post_send_warp<Ownership::kExclusive>(qp, wr); break;
      case PostMode::kWarpBatch: st = gv::ib::post_send_warp_batch<Ownership::kExclusive>(qp, wr); break;
    }
    if (i % retire_every == 0) {
      if (threadIdx.x == 0) gv::sync::store_release(&qp.state->sq.completed, gv::sync::load_relaxed(&qp.state->sq.reserved));
      if (warp) __syncwarp();
    }
  }
  const std::uint64_t t1 = gv::sync::now_ns();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

/// Synthetic rings: polls `n` ready CQEs (each retiring one NOP WQE) with one thread.
__global__ void poll_cost_kernel(const __grid_constant__ gv::ib::CqHandle cq, int n, std::uint64_t* ns,
                                 Status* status) {
  gv::ib::Completion c;
  Status st = Status::kOk;
  const std::uint64_t t0 = gv::sync::now_ns();
  for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::try_poll_cq<Ownership::kExclusive>(cq, c);
  const std::uint64_t t1 = gv::sync::now_ns();
  *ns = t1 - t0;
  *status = st;
}

/// A warp takes n CQEs that were all ready beforehand with poll_cq_warp (an empty poll is an error).
__device__ Status take_ready_warp(const gv::ib::CqHandle& cq, int n) {
  gv::ib::Completion c;
  Status st = Status::kOk;
  for (int got = 0; got < n && st == Status::kOk;) {
    const int k = gv::ib::poll_cq_warp(cq, c, &st);
    if (k == 0 && st == Status::kEmpty) st = Status::kTimeout;
    got += k;
  }
  return st;
}

/// The same with a warp taking up to 32 ready CQEs per poll_cq_warp call (launched with 32 lanes).
__global__ void poll_warp_cost_kernel(const __grid_constant__ gv::ib::CqHandle cq, int n, std::uint64_t* ns,
                                      Status* status) {
  const std::uint64_t t0 = gv::sync::now_ns();
  const Status st = take_ready_warp(cq, n);
  const std::uint64_t t1 = gv::sync::now_ns();
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = st;
  }
}

/// WQEs posted between two waits for completion on the gpu-qgpu QP.
constexpr int kChunkWqes = 1024;

/// gpu-qgpu: posts `chunks` x kChunkWqes 8-byte inline WRITEs to the peer, timing only the
/// posting. The chunk's last WQE is signaled; after the chunk lane 0 waits (untimed) for its
/// completion, which frees the ring again. The GPU engine executes WQEs while they are being
/// posted, as it would in use. Exclusive ownership only: a queue keeps one mode for life.
__global__ void engine_post_cost_kernel(const __grid_constant__ Endpoint ep, PostMode mode, int chunks,
                                        std::uint64_t* ns, Status* status) {
  const bool warp = warp_wide(mode);
  if (!warp && threadIdx.x != 0) return;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t payload = 0x0807060504030201ull + lane;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(ep.peer_in);
  wr.rkey = ep.peer_rkey;
  const int calls = mode == PostMode::kWarpBatch ? kChunkWqes / 32 : kChunkWqes;
  std::uint64_t total = 0;
  Status st = Status::kOk;
  for (int c = 0; c < chunks && st == Status::kOk; ++c) {
    if (warp) __syncwarp();
    const std::uint64_t t0 = gv::sync::now_ns();
    for (int i = 0; i < calls && st == Status::kOk; ++i) {
      const bool last = i + 1 == calls && (mode != PostMode::kWarpBatch || lane == 31);
      wr.flags = gv::ib::kWrInline | (last ? gv::ib::kWrSignaled : 0u);
      if (mode == PostMode::kWarp) st = gv::ib::post_send_warp<Ownership::kExclusive>(ep.qp, wr);
      else if (mode == PostMode::kWarpBatch) st = gv::ib::post_send_warp_batch<Ownership::kExclusive>(ep.qp, wr);
      else st = gv::ib::post_send<Ownership::kExclusive>(ep.qp, wr);
    }
    total += gv::sync::now_ns() - t0;
    if (lane == 0 && st == Status::kOk) {
      gv::ib::Completion done;
      st = gv::ib::poll_cq<Ownership::kExclusive>(ep.scq, done);
    }
    if (warp) st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
  }
  if (lane == 0) {
    *ns = total;
    *status = st;
  }
}

/// gpu-qgpu: posts n signaled 8-byte inline WRITEs (untimed), waits until the GPU engine has
/// written the last one's CQE (CQEs are written in order, so all n are ready), then times n
/// poll_cq calls by one thread, or (`warp`, 32 lanes) poll_cq_warp calls until n are taken.
__global__ void engine_poll_cost_kernel(const __grid_constant__ Endpoint ep, int n, bool warp, std::uint64_t* ns,
                                        Status* status) {
  if (!warp && threadIdx.x != 0) return;
  const std::uint64_t payload = 0x0807060504030201ull;
  const Sge sge{reinterpret_cast<std::uint64_t>(&payload), 8, 0};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrInline | gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(ep.peer_in);
  wr.rkey = ep.peer_rkey;
  Status st = Status::kOk;
  const gv::ib::CqHandle& cq = ep.scq;
  if (threadIdx.x == 0) {
    for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::post_send<Ownership::kExclusive>(ep.qp, wr);
    const std::uint64_t last = gv::sync::load_relaxed(&cq.state->claimed) + static_cast<std::uint64_t>(n) - 1;
    const m5::Cqe* cqe = cq.ring + (last & ((std::uint64_t{1} << cq.log_cqes) - 1));
    if (st == Status::kOk)
      st = gv::sync::bounded_wait([&] { return gv::ib::cqe_ready(gv::ib::cqe_tail(cq, cqe), last, cq.log_cqes); },
                                  gv::Budget{}, cq.abort);
  }
  if (warp) st = static_cast<Status>(__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(st), 0));
  const std::uint64_t t0 = gv::sync::now_ns();
  if (warp) {
    if (st == Status::kOk) st = take_ready_warp(cq, n);
  } else {
    gv::ib::Completion c;
    for (int i = 0; i < n && st == Status::kOk; ++i) st = gv::ib::try_poll_cq<Ownership::kExclusive>(cq, c);
  }
  if (threadIdx.x == 0) {
    *ns = gv::sync::now_ns() - t0;
    *status = st;
  }
}

/// Launches a cost kernel `reps` + 1 times on the harness's GPU 0 stream (the first launch
/// warms up) and returns the times it reported divided by `per_launch`: ns per WQE or CQE.
template <class Launch>
std::vector<double> per_call_ns(Harness& h, int reps, double per_launch, const std::string& what, Launch&& launch) {
  CK(cudaSetDevice(0));
  std::vector<double> v;
  for (int r = 0; r <= reps; ++r) {
    h.status[0] = kNotReported;
    launch(h.streams[0]);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(h.streams[0]));
    if (h.status[0] != Status::kOk)
      throw gv::Error("postpoll " + what + ": " +
                      (h.status[0] == kNotReported ? std::string("the kernel did not report") : gv::to_string(h.status[0])));
    if (r > 0) v.push_back(static_cast<double>(h.samples[0]) / per_launch);
  }
  return v;
}

void report_cost(const char* mode, const char* executor, const char* op, std::uint64_t iters, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const double med = v[v.size() / 2];
  if (g_json)
    std::printf("{\"bench\":\"postpoll\",\"mode\":\"%s\",\"variant\":\"%s\",\"executor\":\"%s\",\"bytes\":8,\"iters\":%llu,"
                "\"ns_min\":%.2f,\"ns_median\":%.2f,\"ns_max\":%.2f}\n",
                mode, op, executor, static_cast<unsigned long long>(iters), v.front(), med, v.back());
  else
    std::printf(" %-13s %-11s %-18s %-10.2f %-10.2f %.2f\n", mode, executor, op, v.front(), med, v.back());
}

/// Synthetic queue memory on the GPU or in pinned, mapped host memory; filled on `s` (the cost
/// kernels run there). No GPU engine is open while it exists.
struct Placed {
  bool gpu;
  cudaStream_t s;
  std::vector<void*> ptrs;
  template <class T>
  T* alloc(std::size_t bytes) {
    void* p = nullptr;
    if (gpu) {
      CK(cudaMalloc(&p, bytes));
      ptrs.push_back(p);
      CK(cudaMemsetAsync(p, 0, bytes, s));
    } else {
      CK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
      ptrs.push_back(p);
      std::memset(p, 0, bytes);
    }
    return static_cast<T*>(p);
  }
  void upload(void* dst, const void* src, std::size_t n) { CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s)); }
  ~Placed() {
    for (void* p : ptrs) gpu ? (void)cudaFree(p) : (void)cudaFreeHost(p);
  }
};

/// The dissertation's Table 5.2 experiment: rings in GPU memory (gpu-qgpu) or in pinned host
/// memory (gpu-qhost), no executor (the kernel retires its own WQEs).
void postpoll_synthetic(Harness& h, int reps, bool gpu) {
  constexpr std::uint32_t kBbs = 4096;
  constexpr int kCalls = 100000;
  const char* mode = gpu ? "gpu-qgpu" : "gpu-qhost";
  CK(cudaSetDevice(0));
  Placed mem{gpu, h.streams[0], {}};      // rings, doorbell records, doorbell: where the executor reads
  Placed gpu_mem{true, h.streams[0], {}};  // counters: always where their users (this GPU's threads) are
  gv::ib::QpHandle qp;
  qp.qpn = 0x99;
  qp.sq = mem.alloc<std::byte>(kBbs * 64);
  qp.dbrec = mem.alloc<m5::QpDbrec>(64);
  qp.doorbell = mem.alloc<std::uint64_t>(64);
  qp.state = gpu_mem.alloc<gv::ib::QpState>(sizeof(gv::ib::QpState));  // posters' counters
  qp.executor = gpu ? gv::sync::Scope::kGpu : gv::sync::Scope::kSystem;
  qp.sq_bbs = kBbs;
  qp.max_send_sge = 1;
  qp.max_inline = 64;
  for (const PostMode m : {PostMode::kThreadExclusive, PostMode::kThreadShared, PostMode::kWarp, PostMode::kWarpBatch}) {
    const int calls = m == PostMode::kWarpBatch ? kCalls / 32 : kCalls;
    const double wqes = m == PostMode::kWarpBatch ? calls * 32.0 : calls;
    // Each launch starts from a fresh ring: a queue keeps one ownership mode for life.
    report_cost(mode, "none", name(m), static_cast<std::uint64_t>(wqes),
                per_call_ns(h, reps, wqes, std::string(mode) + " " + name(m), [&](cudaStream_t s) {
                  CK(cudaMemsetAsync(qp.state, 0, sizeof(gv::ib::QpState), s));
                  post_cost_kernel<<<1, warp_wide(m) ? 32 : 1, 0, s>>>(qp, calls, m, h.samples, h.status);
                }));
  }

  // poll: kBbs NOP WQEs in the ring, one ready CQE for each.
  constexpr std::uint32_t kCqes = kBbs;
  gv::ib::CqHandle cq;
  cq.cqn = 1;
  cq.ring = mem.alloc<m5::Cqe>(kCqes * 64);
  cq.dbrec = mem.alloc<m5::CqDbrec>(64);
  cq.state = gpu_mem.alloc<gv::ib::CqState>(sizeof(gv::ib::CqState));
  cq.executor = qp.executor;
  cq.log_cqes = gv::ib::log2_pow2(kCqes);
  cq.send_qp = qp.state;
  cq.send_sq = qp.sq;
  cq.send_sq_bbs = kBbs;
  cq.send_qpn = qp.qpn;
  std::vector<std::byte> sq(kBbs * 64);
  std::vector<m5::Cqe> cqes(kCqes);
  for (std::uint32_t i = 0; i < kBbs; ++i) {
    const auto c = gv::ib::make_ctrl_seg(static_cast<std::uint16_t>(i), m5::kOpNop, 0, qp.qpn, m5::kCtrlCqUpdate, 1, 0, {});
    std::memcpy(sq.data() + i * 64, &c, 16);
    cqes[i] = {};
    cqes[i].sop_drop_qpn = gv::be32::from((std::uint32_t{m5::kOpNop} << 24) | qp.qpn);
    cqes[i].wqe_counter = gv::be16::from(static_cast<std::uint16_t>(i));
    cqes[i].op_own = static_cast<std::uint8_t>(m5::kCqeReq << 4);  // owner 0: first lap
  }
  gv::ib::QpState qs{};
  gv::ib::wq_start_at(&qs.sq, 0);
  qs.sq.reserved = qs.sq.published = kBbs;  // kBbs NOPs posted, none completed
  const gv::ib::CqState cs{};
  report_cost(mode, "none", "poll_cq(ready)", kCqes,
              per_call_ns(h, reps, kCqes, std::string(mode) + " poll_cq", [&](cudaStream_t s) {
                // The uploads are ordered before the kernel on its stream (their sources outlive it).
                mem.upload(qp.sq, sq.data(), sq.size());
                mem.upload(cq.ring, cqes.data(), kCqes * 64);
                mem.upload(qp.state, &qs, sizeof(qs));
                mem.upload(cq.state, &cs, sizeof(cs));
                poll_cost_kernel<<<1, 1, 0, s>>>(cq, kCqes, h.samples, h.status);
              }));
  report_cost(mode, "none", "poll_cq_warp(ready)", kCqes,
              per_call_ns(h, reps, kCqes, std::string(mode) + " poll_cq_warp", [&](cudaStream_t s) {
                mem.upload(qp.sq, sq.data(), sq.size());
                mem.upload(cq.ring, cqes.data(), kCqes * 64);
                mem.upload(qp.state, &qs, sizeof(qs));
                mem.upload(cq.state, &cs, sizeof(cs));
                poll_warp_cost_kernel<<<1, 32, 0, s>>>(cq, kCqes, h.samples, h.status);
              }));
}

/// The same costs on a real gpu-qgpu QP (queues allocated by the soft provider, the GPU engine
/// executing): post_send by one thread, a warp cooperating on one WQE, a warp posting 32.
void postpoll_engine(Harness& h, int reps) {
  constexpr int kChunks = 100;
  constexpr int kPollCqes = 1024;
  Shape shape;
  shape.sq_depth = 2048;  // 4096 WQEBBs: a chunk of one-WQEBB WQEs fits four times
  shape.cq_depth = 2048;
  Testbed tb(Mode::kGpuQGpu, 1, shape, h);
  const Endpoint& ep = tb.ep(0);
  if (ep.qp.executor != gv::sync::Scope::kGpu || ep.scq.executor != gv::sync::Scope::kGpu)
    throw gv::Error("postpoll: the gpu-qgpu QP's handles do not name the GPU as executor");
  for (const PostMode m : {PostMode::kThreadExclusive, PostMode::kWarp, PostMode::kWarpBatch}) {
    const double wqes = double{kChunks} * kChunkWqes;
    report_cost("gpu-qgpu", "gpu-engine", name(m), static_cast<std::uint64_t>(wqes),
                per_call_ns(h, reps, wqes, std::string("gpu-qgpu engine ") + name(m), [&](cudaStream_t s) {
                  engine_post_cost_kernel<<<1, warp_wide(m) ? 32 : 1, 0, s>>>(ep, m, kChunks, h.samples, h.status);
                }));
  }
  report_cost("gpu-qgpu", "gpu-engine", "poll_cq(ready)", kPollCqes,
              per_call_ns(h, reps, kPollCqes, "gpu-qgpu engine poll_cq", [&](cudaStream_t s) {
                engine_poll_cost_kernel<<<1, 1, 0, s>>>(ep, kPollCqes, false, h.samples, h.status);
              }));
  report_cost("gpu-qgpu", "gpu-engine", "poll_cq_warp(ready)", kPollCqes,
              per_call_ns(h, reps, kPollCqes, "gpu-qgpu engine poll_cq_warp", [&](cudaStream_t s) {
                engine_poll_cost_kernel<<<1, 32, 0, s>>>(ep, kPollCqes, true, h.samples, h.status);
              }));
}

void bench_postpoll(const Options& o, Harness& h) {
  const int reps = static_cast<int>(std::max<std::uint64_t>(o.iters / 100, 5));
  if (!g_json)
    std::printf("# post_send / poll_cq cost on the GPU [ns per WQE or CQE], min/median/max of %d launches\n"
                "# executor none: synthetic rings the kernel retires itself; gpu-engine: a gpu-qgpu QP\n"
                " %-13s %-11s %-18s %-10s %-10s %s\n",
                reps, "mode", "executor", "operation", "min", "median", "max");
  // The synthetic rings first: they allocate and free CUDA memory, which must not happen while
  // a GPU engine is resident.
  if (o.has(Mode::kGpuQGpu)) postpoll_synthetic(h, reps, true);
  if (o.has(Mode::kGpuQHost)) postpoll_synthetic(h, reps, false);
  if (o.has(Mode::kGpuQGpu) && o.engine) postpoll_engine(h, reps);
}

// ---- anchors ----------------------------------------------------------------------------------

/// Two parties bounce a counter through two flag words; party 0 times each round trip.
__global__ void flag_pingpong(std::uint32_t* mine, std::uint32_t* theirs, int iters, bool starts,
                              std::uint64_t* rtt_ns, std::uint32_t* timeouts) {
  constexpr auto kSys = gv::sync::Scope::kSystem;  // the two parties are different GPUs
  if (threadIdx.x != 0) return;
  for (int i = 1; i <= iters; ++i) {
    const std::uint64_t t0 = gv::sync::now_ns();
    if (starts) {
      gv::sync::store_release(theirs, static_cast<std::uint32_t>(i), kSys);
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(mine, kSys) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      rtt_ns[i - 1] = gv::sync::now_ns() - t0;
    } else {
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(mine, kSys) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      gv::sync::store_release(theirs, static_cast<std::uint32_t>(i), kSys);
    }
  }
}

__global__ void flag_pingpong_2blocks(std::uint32_t* f0, std::uint32_t* f1, int iters, std::uint64_t* rtt,
                                      std::uint32_t* timeouts) {
  // block 0 owns f0 and writes f1; block 1 the reverse.
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      for (int i = 1; i <= iters; ++i) {
        const std::uint64_t t0 = gv::sync::now_ns();
        gv::sync::store_release(f1, static_cast<std::uint32_t>(i));
        if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(f0) == static_cast<std::uint32_t>(i); },
                                   gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
          ++*timeouts;
          return;
        }
        rtt[i - 1] = gv::sync::now_ns() - t0;
      }
    }
  } else if (threadIdx.x == 0) {
    for (int i = 1; i <= iters; ++i) {
      if (gv::sync::bounded_wait([&] { return gv::sync::load_acquire(f1) == static_cast<std::uint32_t>(i); },
                                 gv::Budget{1'000'000'000}, nullptr) != Status::kOk) {
        ++*timeouts;
        return;
      }
      gv::sync::store_release(f0, static_cast<std::uint32_t>(i));
    }
  }
}

void report_anchor(const char* what, std::vector<double> half_us) {
  const std::uint64_t n = half_us.size();
  const auto s = gv::bench::summarize(std::move(half_us));
  if (g_json)
    std::printf("%s\n", gv::bench::latency_json("anchor", std::string("\"mode\":\"none\",\"variant\":\"") + what + "\",", 8, n, s).c_str());
  else
    std::printf(" %-44s t_typical %.3f us  t_min %.3f  t_avg %.3f  99%% %.3f\n", what, s.typical, s.min, s.avg, s.p99);
}

/// No GPU engine is open here: device-wide synchronisation is fine.
void bench_anchors(int iters) {
  if (!g_json) std::printf("# anchors: half round trip of a flag ping-pong [us]\n");
  std::uint64_t* rtt;
  std::uint32_t* timeouts;
  CK(cudaMallocHost(&rtt, sizeof(std::uint64_t) * iters));
  CK(cudaMallocHost(&timeouts, sizeof(std::uint32_t)));
  auto collect = [&](const char* what) {
    if (*timeouts) throw std::runtime_error(std::string(what) + ": a flag wait timed out");
    std::vector<double> v;
    for (int i = iters / 10; i < iters; ++i) v.push_back(static_cast<double>(rtt[i]) / 2000.0);
    report_anchor(what, v);
  };
  for (const bool gpu : {true, false}) {
    std::uint32_t* f;
    if (gpu) {
      CK(cudaMalloc(&f, 256));
      CK(cudaMemset(f, 0, 256));
    } else {
      CK(cudaHostAlloc(&f, 256, cudaHostAllocMapped));
      std::memset(f, 0, 256);
    }
    *timeouts = 0;
    flag_pingpong_2blocks<<<2, 32>>>(f, f + 32, iters, rtt, timeouts);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    collect(gpu ? "two blocks, flags in GPU memory" : "two blocks, flags in pinned host memory");
    CK(gpu ? cudaFree(f) : cudaFreeHost(f));
  }
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n >= 2) {
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
      std::uint32_t *f0, *f1;
      cudaStream_t s0, s1;
      enable_peer_access(0, 1);
      CK(cudaMalloc(&f0, 256));
      CK(cudaMemset(f0, 0, 256));
      CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
      enable_peer_access(1, 0);
      CK(cudaMalloc(&f1, 256));
      CK(cudaMemset(f1, 0, 256));
      CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
      CK(cudaDeviceSynchronize());
      *timeouts = 0;
      // GPU0 polls its own f0 and stores into GPU1's f1; GPU1 the reverse (peer stores).
      flag_pingpong<<<1, 32, 0, s1>>>(f1, f0, iters, false, rtt, timeouts);
      CK(cudaSetDevice(0));
      flag_pingpong<<<1, 32, 0, s0>>>(f0, f1, iters, true, rtt, timeouts);
      CK(cudaStreamSynchronize(s0));
      CK(cudaSetDevice(1));
      CK(cudaStreamSynchronize(s1));
      collect("two GPUs, peer stores (NVLink/PCIe)");

      // cudaMemcpyPeerAsync of 8 bytes, timed with events.
      CK(cudaSetDevice(0));
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<double> v;
      for (int i = 0; i < 1000; ++i) {
        CK(cudaEventRecord(e0, s0));
        CK(cudaMemcpyPeerAsync(f1, 1, f0, 0, 8, s0));
        CK(cudaEventRecord(e1, s0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 100) v.push_back(ms * 1000.0);
      }
      report_anchor("cudaMemcpyPeerAsync 8 B, one way (events)", v);
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      CK(cudaStreamDestroy(s0));
      CK(cudaFree(f0));
      CK(cudaSetDevice(1));
      CK(cudaStreamDestroy(s1));
      CK(cudaFree(f1));
      CK(cudaSetDevice(0));
    } else if (!g_json) {
      std::printf(" two GPUs present but without peer access: no peer anchor\n");
    }
  } else if (!g_json) {
    std::printf(" one GPU: no two-GPU anchors\n");
  }
  CK(cudaFreeHost(rtt));
  CK(cudaFreeHost(timeouts));
}


// ---- drain --------------------------------------------------------------------------------------

/// The GPU engine's execution rate apart from its posters: with the engine stopped, each QP's
/// block posts n inline WRITEs (one CQE per 16); then blocks that wait for those CQEs are
/// started, the engine resumes, and the time from each QP's first CQE to its last gives the
/// engine's time per WQE with a full backlog. With hold_ms, the engine instead runs hold_ms
/// alone and the CQEs are checked after it stopped again (for ncu, which serialises kernels:
/// profile the engine's second launch).
void bench_drain(const Options& o, Harness& h) {
  // The SQ holds 128 WQEs of two WQEBBs; two CQEs at least.
  const std::uint64_t n = std::clamp<std::uint64_t>(o.iters, 2 * kSignalEvery, 128);
  Shape shape;
  shape.pairs = kMaxRoles / 2;
  Testbed tb(Mode::kGpuQGpu, o.gpus, shape, h);
  if (!g_json)
    std::printf("# drain, gpu-qgpu: %llu inline WRITEs pre-posted per QP with the engine stopped, one CQE per %u; "
                "ns per WQE from a QP's first CQE to its last; %s\n",
                static_cast<unsigned long long>(n), kSignalEvery, where(tb).c_str());
  for (const std::uint32_t bytes : {8u, 64u}) {
    for (const int qps : {1, 16}) {
      const Stream stream{bytes, n};
      const std::string what = "drain " + std::to_string(qps) + " QPs " + std::to_string(bytes) + " B";
      load_payloads(tb, 2 * qps, bytes);
      tb.quiesce();
      tb.run(Prepost{{stream}}, qps, what + " (posting)");
      if (o.hold_ms > 0) {
        tb.resume();
        std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));
        tb.quiesce();
        tb.run(DrainWait{{stream}}, qps, what);
        tb.resume();
      } else {
        std::exception_ptr failed;
        std::thread waiter([&] {
          try {
            tb.run(DrainWait{{stream}}, qps, what);
          } catch (...) {
            failed = std::current_exception();
          }
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the waiting blocks are polling
        std::exception_ptr resume_failed;  // the waiter is joined either way (its waits are bounded)
        try {
          tb.resume();
        } catch (...) {
          resume_failed = std::current_exception();
        }
        waiter.join();
        if (resume_failed) std::rethrow_exception(resume_failed);
        if (failed) std::rethrow_exception(failed);
      }
      std::vector<double> per_wqe;
      std::uint64_t first = ~std::uint64_t{0}, last = 0;
      for (int r = 0; r < qps; ++r) {
        expect_payload(tb, 2 * r + 1, 2 * r, bytes, pattern(seed_of(2 * r, bytes), bytes - 1), what);
        const std::uint64_t* t = h.samples_of(r);
        per_wqe.push_back(static_cast<double>(t[1] - t[0]) / static_cast<double>(n - kSignalEvery));
        first = std::min(first, t[0]);
        last = std::max(last, t[1]);
      }
      std::sort(per_wqe.begin(), per_wqe.end());
      const double ns = per_wqe[per_wqe.size() / 2];
      const double rate = static_cast<double>(qps) * static_cast<double>(n - kSignalEvery) /
                          static_cast<double>(last - first) * 1e3;
      if (o.hold_ms > 0) {
        if (!g_json) std::printf(" %s: all CQEs arrived (held %d ms; no timing)\n", what.c_str(), o.hold_ms);
      } else if (g_json) {
        std::printf("{\"bench\":\"drain\",%s\"bytes\":%u,\"wqes_per_qp\":%llu,\"qps\":%d,\"ns_per_wqe_median\":%.1f,"
                    "\"mmsg_per_s\":%.4f}\n",
                    json_keys(Mode::kGpuQGpu, "inline", tb.gpus()).c_str(), bytes, static_cast<unsigned long long>(n), qps,
                    ns, rate);
      } else {
        std::printf(" %-3d QPs %-3u B: %.1f ns per WQE (median over QPs), %.4f Mmsg/s together\n", qps, bytes, ns, rate);
      }
    }
  }
}

constexpr char kUsage[] =
    "usage: gv_gpu_verbs pingpong|bw|msgrate|atomics|postpoll|anchors|drain [--mode LIST] [-a | -s BYTES]\n"
    "                    [-n ITERS] [--gpus 1|2] [--engine-warps N] [--json]\n"
    "  --mode LIST  comma list of gpu-qgpu, gpu-qhost, host, host-assisted (default: all four)\n"
    "  -a           sizes 8 B .. 4 MiB (pingpong, bw; pingpong runs at most 100 iterations above 64 KiB)\n"
    "  -s BYTES     one size, 1 B .. 64 MiB (default: 8 B; bw 64 KiB)\n"
    "  -n ITERS     iterations a size (pingpong, atomics), messages a size (bw, at most 512 MiB)\n"
    "               or a QP (msgrate), launches x 100 (postpoll), round trips (anchors); 1 .. 1000000,\n"
    "               default 1000\n"
    "  --gpus 1|2   GPUs to run on (default: 2 when two GPUs reach each other's memory)\n"
    "  --engine-warps N  gpu-qgpu: the GPU engine's warps, 1..32 (default 4)\n"
    "  --json       one JSON object per row\n"
    "  --no-engine  postpoll: synthetic rings only, no resident GPU engine (ncu serialises kernels)\n"
    "  --hold-ms MS drain: let the engine run MS ms alone, then check (for ncu), 1 .. 60000; no timing\n"
    "  -h, --help   this text\n";

Options parse(int argc, char** argv) {
  using gv::bench::UsageError;
  gv::bench::ArgWalker args(argc, argv);
  if (!args.more()) throw UsageError("no subcommand");
  Options o;
  o.cmd = args.next();
  const std::string cmds[] = {"pingpong", "bw", "msgrate", "atomics", "postpoll", "anchors", "drain"};
  if (std::find(std::begin(cmds), std::end(cmds), o.cmd) == std::end(cmds))
    throw UsageError("unknown subcommand " + o.cmd);
  while (args.more()) {
    const std::string a = args.next();
    if (a == "--json") {
      g_json = true;
    } else if (a == "-a") {
      o.sizes = gv::bench::pow2_sizes(3, 22);
    } else if (a == "-s") {
      o.sizes = {args.number(a, 1, std::uint64_t{64} << 20)};
    } else if (a == "-n") {
      o.iters = args.number(a, 1, 1'000'000);
    } else if (a == "--gpus") {
      o.gpus = static_cast<int>(args.number(a, 1, 2));
    } else if (a == "--engine-warps") {
      g_engine_warps = static_cast<std::uint32_t>(args.number(a, 1, 32));
    } else if (a == "--no-engine" && o.cmd == "postpoll") {
      o.engine = false;
    } else if (a == "--hold-ms" && o.cmd == "drain") {
      o.hold_ms = static_cast<int>(args.number(a, 1, 60'000));
    } else if (a == "--mode") {
      o.modes.clear();
      const std::string list = args.value(a);
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        const std::string m = list.substr(at, end - at);
        const auto it = std::find_if(std::begin(kAllModes), std::end(kAllModes), [&](Mode x) { return m == name(x); });
        if (it == std::end(kAllModes)) throw UsageError("unknown mode '" + m + "'");
        if (!o.has(*it)) o.modes.push_back(*it);
        at = end + 1;
      }
    } else {
      throw UsageError("unknown argument " + a);
    }
  }
  return o;
}

/// --gpus: by default two when two GPUs reach each other's memory. Peer access is enabled here,
/// before any GPU engine runs (connecting gpu-qgpu QPs across GPUs needs it).
int choose_gpus(int asked, int present) {
  int a = 0, b = 0;
  if (present >= 2) {
    CK(cudaDeviceCanAccessPeer(&a, 0, 1));
    CK(cudaDeviceCanAccessPeer(&b, 1, 0));
  }
  const bool peers = a != 0 && b != 0;
  const int gpus = asked != 0 ? asked : peers ? 2 : 1;
  if (gpus == 2 && present < 2) throw gv::Error("--gpus 2: this machine has one GPU");
  if (gpus == 2 && peers) {
    enable_peer_access(0, 1);
    enable_peer_access(1, 0);
  }
  CK(cudaSetDevice(0));
  return gpus;
}

int run(const Options& o_in) {
  Options o = o_in;
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n == 0) throw gv::Error("no NVIDIA GPU or driver found (the CUDA runtime lists no device)");
  // Host threads that wait for a kernel sleep instead of spinning, leaving the cores to the
  // CPU engine, the proxies and the host posters (in-kernel timing does not depend on it).
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  }
  o.gpus = choose_gpus(o.gpus, n);
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  if (!g_json) {
    std::printf("# device: %s x%d, %d used; GPU engine warps %u; modes:", p.name, n, o.gpus, g_engine_warps);
    for (const Mode m : o.modes) std::printf(" %s", name(m));
    std::printf("\n");
  }
  Harness h(o.gpus, o.iters + 100);  // the largest run: 100 warm-up rounds and -n measured ones
  if (o.cmd == "pingpong") bench_pingpong(o, h);
  else if (o.cmd == "bw") bench_bw(o, h);
  else if (o.cmd == "msgrate") bench_msgrate(o, h);
  else if (o.cmd == "atomics") bench_atomics(o, h);
  else if (o.cmd == "postpoll") bench_postpoll(o, h);
  else if (o.cmd == "drain") bench_drain(o, h);
  else bench_anchors(static_cast<int>(o.iters));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gv::bench::run_main("gv_gpu_verbs", kUsage, [&] { return run(parse(argc, argv)); });
}
