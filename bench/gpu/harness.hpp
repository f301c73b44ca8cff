// gv_gpu_verbs's shared harness: the control modes, the CUDA resources every subcommand uses
// (Harness), the test beds that run an experiment in a mode (Testbed), and the text and JSON
// rows. One file per subcommand builds on it (pingpong.cu, bw.cu, ...); main.cu parses the
// command line. The experiments themselves are bench/common/experiments.hpp, shared with
// gv_pingpong.
//
// While a gpu-qgpu device is open its engine kernel is resident, so a device-wide synchronising
// CUDA call would wait forever: the CUDA memory the experiments use is allocated before any such
// device opens and released after the last closes (Harness), kernels run on non-blocking
// streams, only those streams are synchronised, and kernels are loaded eagerly.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "../common/bed.hpp"
#include "../common/cuda_check.hpp"
#include "../common/experiments.hpp"
#include "../common/provider.hpp"
#include "../common/report.hpp"
#include "../common/stats.hpp"
#include "hostctl.hpp"

namespace gv::bench {

namespace m5 = gv::ib::mlx5;
constexpr auto kSys = gv::sync::Scope::kSystem;


extern JsonLog g_json;                ///< --json FILE: the JSON rows (none without it)
extern std::uint32_t g_engine_warps;  ///< gpu-qgpu: the GPU engine's warps (--engine-warps)
extern bool g_owner;                  ///< GPU-controlled posters hold their QP through a QpOwner (--poster owner)
extern ProviderArgs g_provider;       ///< --provider, -d, -i, -x: the software HCA or a NIC

constexpr int kMaxRoles = 32;  ///< QPs one run drives (msgrate's largest count)

/// The control modes (main.cu's header says what each runs).
enum class Mode { kGpuQGpu, kGpuQHost, kHostControlled, kHostAssisted, kCpuThreads };
constexpr Mode kAllModes[] = {Mode::kGpuQGpu, Mode::kGpuQHost, Mode::kHostControlled, Mode::kHostAssisted,
                              Mode::kCpuThreads};

const char* name(Mode m);

/// Modes whose posters are host threads: one per QP, plus the CPU engine's.
inline bool host_threads_post(Mode m) {
  return m == Mode::kCpuThreads || m == Mode::kHostAssisted || m == Mode::kHostControlled;
}

struct Options {
  std::string cmd;
  std::vector<Mode> modes{std::begin(kAllModes), std::end(kAllModes)};
  std::vector<std::uint64_t> sizes;  ///< empty: the subcommand's default
  std::uint64_t iters = 1000;
  int gpus = 0;  ///< 0: two when two GPUs reach each other, else one
  bool engine = true;  ///< postpoll: include the gpu-qgpu QP (a resident GPU engine)
  int hold_ms = 0;     ///< drain: run the engine this long alone instead of timing it (ncu)

  std::string json;    ///< --json FILE
  std::string server;  ///< pingpong over a NIC: the server to connect to (empty: be the server)
  int tcp_port = 18515;  ///< -p: where the two-host ping-pong's server listens (perftest's default)

  bool has(Mode m) const { return std::find(modes.begin(), modes.end(), m) != modes.end(); }
};

// ---- host-assisted: the kernel's side and the proxy thread -------------------------------------

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

/// host-assisted, the kernel's side. post() raises the request count with a system-scope
/// release, so the payload the kernel stored before it is visible to the proxy (and through the
/// proxy's doorbell to the CPU engine). The waits acquire the proxy's counts at system scope
/// and end early when the proxy reports a failure.
class ProxyTx : public PosterBytes {
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

/// host-assisted: one role's proxy thread. Posts the WRs its kernel requested (at most kWindow
/// ahead of their completions), polls the send and receive CQs, and publishes the counts. On an
/// error it raises `failed`, which ends the kernel's waits, and returns the error.
Status serve_proxy(const Endpoint& ep, const WrPlan& plan, ProxyChannel* ch, const std::atomic<bool>& stop);

// ---- kernels that run roles ---------------------------------------------------------------------

/// Where the roles of one launch find their endpoints and leave their results.
struct RoleArgs {
  int first = 0;                  ///< the role of block 0
  Endpoint ep[kMaxRoles];         ///< block b's endpoint
  ProxyChannel* chans = nullptr;  ///< host-assisted: role r's channel is chans[r]
  RoleResults res;                ///< mapped host memory
  bool owner = false;             ///< post and poll through a QpOwner (DirectTx<true>)
};

/// One single-thread block per role.
template <class Exp, bool kProxied>
__global__ void role_kernel(const __grid_constant__ Exp exp, const __grid_constant__ RoleArgs a) {
  const int role = a.first + static_cast<int>(blockIdx.x);
  const Endpoint& ep = a.ep[blockIdx.x];
  std::uint64_t* samples = a.res.samples_of(role);
  if constexpr (kProxied) {
    ProxyTx tx(a.chans + role);
    a.res.status[role] = exp.run(tx, ep, role, samples);
  } else if (a.owner) {
    DirectTx<true> tx(ep, exp.plan(ep));
    a.res.status[role] = exp.run(tx, ep, role, samples);
  } else {
    DirectTx<> tx(ep, exp.plan(ep));
    a.res.status[role] = exp.run(tx, ep, role, samples);
  }
}

// ---- CUDA resources ---------------------------------------------------------------------------

/// `count` T in pinned host memory mapped into the GPUs at its host address, zeroed.
void* alloc_mapped_bytes(std::size_t bytes);
template <class T>
T* alloc_mapped(std::size_t count) {
  return static_cast<T*>(alloc_mapped_bytes(count * sizeof(T)));
}

/// Lets GPU `from` access GPU `to`'s memory (already allowed is fine).
void enable_peer_access(int from, int to);

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

  Harness(int gpus, std::uint64_t samples_per_role);
  ~Harness() { release(); }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  RoleResults results() const { return RoleResults{status, samples, cap}; }
  std::uint64_t* samples_of(int role) const { return results().samples_of(role); }

 private:
  void release();
};

// ---- test beds --------------------------------------------------------------------------------

/// The endpoints of one mode: devices, QP pairs (endpoints 2p and 2p + 1 are connected), their
/// buffers, and the runner that drives roles through them. With two GPUs, endpoint e is on
/// GPU e % 2: its queues and buffers for gpu-qgpu, its kernel for the GPU-controlled and
/// host-assisted modes.
class Testbed {
 public:
  Testbed(Mode mode, int gpus, const Shape& shape, Harness& h);
  ~Testbed() { teardown(); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  Mode mode() const { return mode_; }
  /// GPUs the experiment uses (0: host threads on host memory alone).
  int gpus() const { return mode_ == Mode::kCpuThreads ? 0 : gpus_; }
  int gpu_of(int e) const { return gpus_ == 2 ? e % 2 : 0; }
  std::size_t region() const { return bed_->region(); }
  const Endpoint& ep(int e) const { return bed_->ep(e); }
  RoleResults results() const { return h_.results(); }

  /// Copy into / out of endpoint e's buffer at `off` (GPU memory through the staging buffer).
  void put(int e, std::size_t off, const std::uint8_t* src, std::size_t n);
  std::vector<std::uint8_t> get(int e, std::size_t off, std::size_t n);

  /// gpu-qgpu: stop / restart every device's GPU engine (queues keep their state).
  void quiesce();
  void resume();

  /// Run roles [0, roles) of `exp` and check that each reported success; `what` names the run
  /// in errors.
  template <class Exp>
  void run(const Exp& exp, int roles, const std::string& what) {
    if (roles < 1 || roles > kMaxRoles) throw std::logic_error(what + ": bad role count");
    const RoleResults res = h_.results();
    clear_reports(res, roles);
    switch (mode_) {
      case Mode::kGpuQGpu:
      case Mode::kGpuQHost: launch<Exp, false>(exp, roles, what); break;
      case Mode::kCpuThreads:
        bed_->run_threads(exp, roles, res, [](int, const Endpoint& e, const WrPlan& p) { return DirectTx(e, p); });
        break;
      case Mode::kHostAssisted: run_host_assisted(exp, roles, what); break;
      case Mode::kHostControlled: run_host_controlled(exp, roles, what); break;
    }
    check_reports(res, roles, what, [this] { return bed_->async_events(); });
  }

 private:
  /// Stops the GPU engines first (so that nothing below waits on a resident kernel), then
  /// releases in dependency order. Never throws.
  void teardown() noexcept;

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
      a.res = h_.results();
      a.owner = g_owner && !kProxied;
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
    GV_BENCH_CUDA(cudaSetDevice(0));
    if (!error.empty()) throw std::runtime_error(error);
  }

  /// host-controlled: a host thread per role, kernels for the application's side of each
  /// message on its endpoint's stream (hostctl.hpp); then every message of every role must
  /// have been consumed with its tag.
  template <class Exp>
  void run_host_controlled(const Exp& exp, int roles, const std::string& what) {
    if constexpr (!std::is_same_v<Exp, PingPong>) {
      throw std::logic_error(what + ": host-controlled runs the ping-pong only");
    } else {
      for (int e = 0; e < 2 * roles; ++e) consumed_[e] = 0;
      bed_->run_threads(exp, roles, h_.results(), [this](int n, const Endpoint& e, const WrPlan& p) {
        return HostCtlTx(e, p, ctl_streams_[static_cast<std::size_t>(n)], &consumed_[n]);
      });
      sync_ctl_streams();  // the last consumers
      for (int r = 0; r < roles; ++r) {
        const int e = exp.endpoint(r);
        if (h_.status[r] == Status::kOk && consumed_[e] != exp.n)
          throw gv::Error(what + ": endpoint " + std::to_string(e) + "'s consumer kernels saw " +
                          std::to_string(consumed_[e]) + " of " + std::to_string(exp.n) + " messages with their tag");
      }
    }
  }
  void sync_ctl_streams();
  /// cudaSetDeviceFlags(flags) on every GPU of the bed.
  void set_schedule(unsigned flags);

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
                        gv::to_string(proxy[static_cast<std::size_t>(r)]) + bed_->async_events());
  }

  bool buffers_on_gpu() const { return mode_ == Mode::kGpuQGpu || mode_ == Mode::kHostControlled; }

  Mode mode_;
  int gpus_;
  Harness& h_;
  std::optional<QpBed> bed_;
  std::vector<cudaStream_t> ctl_streams_;  ///< host-controlled: endpoint e's kernels
  std::uint32_t* consumed_ = nullptr;      ///< host-controlled: messages endpoint e consumed (mapped)
};

// ---- rows ---------------------------------------------------------------------------------------

/// host-controlled runs only the ping-pong (the dissertation's baseline): true, after a note,
/// when `bench` is another experiment and `m` that mode.
bool skips_host_controlled(Mode m, const char* bench);
/// Where a test bed's posters run, for the text headers.
std::string where(const Testbed& tb);
/// The text rows' leading columns.
std::string lead(const char* mode, const char* variant);
/// The JSON rows' leading keys.
std::string json_keys(Mode m, const char* variant, int gpus);
void print_latency(const char* bench, const Testbed& tb, const char* variant, std::uint64_t bytes,
                   std::uint64_t iters, const LatencyStats& s);

// ---- the subcommands (one file each) -----------------------------------------------------------

void bench_pingpong(const Options& o, Harness& h);
/// pingpong over a NIC between two hosts (remote.cu): the server without o.server, else the client.
void bench_pingpong_remote(const Options& o, Harness& h);
void bench_bw(const Options& o, Harness& h);
void bench_msgrate(const Options& o, Harness& h);
void bench_atomics(const Options& o, Harness& h);
void bench_postpoll(const Options& o, Harness& h);
void bench_anchors(const Options& o, Harness& h);
void bench_drain(const Options& o, Harness& h);

}  // namespace gv::bench
