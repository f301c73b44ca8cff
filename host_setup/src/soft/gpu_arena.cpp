// The GPU-memory placement (CUDA builds): the arena is one cudaMalloc on the engine's GPU,
// shared with other processes through CUDA IPC and with other devices of this process by
// address; the host keeps its own copy of header and tables (the shadow) and publishes every
// change with a copy on its control stream, and reads what the engine writes back the same way.
// Served by the GPU engine (gpu_engine_kernel.cu), which GpuEngine starts, stops and watches.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "../cuda_util.hpp"
#include "arena_store.hpp"
#include "gpu_engine_kernel.hpp"

namespace gv::detail {
namespace {

using soft::ArenaHeader;

/// Zero n bytes of GPU memory with copies from host memory, then wait for them. Not cudaMemset:
/// a memset is a kernel, and while user kernels occupy every SM it would wait for them (open()
/// could not report that the engine cannot start; a QP could not be created beside a
/// persistent user kernel). Copies need only the copy engines.
void clear_by_copies(void* p, std::size_t n, cudaStream_t s, const std::string& what) {
  static const std::vector<std::byte> zeros(std::size_t{1} << 20);
  for (std::size_t off = 0; off < n; off += zeros.size())
    cuda_check(cudaMemcpyAsync(static_cast<std::byte*>(p) + off, zeros.data(), std::min(zeros.size(), n - off),
                               cudaMemcpyHostToDevice, s),
               what);
  cuda_check(cudaStreamSynchronize(s), what);
}

// A resident engine and lazy module loading deadlock: with CUDA_MODULE_LOADING=LAZY (the
// default since CUDA 12) the first launch of each kernel loads its module, and loading waits
// for the kernels running on the device, the engine included, forever. Ask for eager loading
// before anything initialises CUDA (a user's explicit setting wins; open() checks it).
[[maybe_unused]] const bool g_eager_loading = [] {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  return true;
}();

/// True if this process loads CUDA modules lazily (or the driver cannot say).
bool lazy_module_loading() {
  using Fn = int (*)(int*);  // CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode*)
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      fn == nullptr) {
    (void)cudaGetLastError();
    return false;  // a driver without the query predates lazy loading
  }
  int mode = 0;
  return reinterpret_cast<Fn>(fn)(&mode) == 0 && mode == 2;  // CU_MODULE_LAZY_LOADING
}

/// GPU arenas open in this process, by name, so that QPs of two devices connect without IPC.
struct GpuArenaRef {
  std::byte* base;
  int gpu;
};
std::mutex g_gpu_arenas_mu;
std::map<std::string, GpuArenaRef> g_gpu_arenas;

/// The outcome of a GPU engine launch made on a thread of its own (see GpuEngine::start).
class EngineLaunch {
 public:
  void made(cudaError_t e) {
    std::lock_guard lk(mu_);
    err_ = e;
    done_ = true;
    cv_.notify_all();
  }
  void wait_made() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [this] { return done_; });
  }
  /// The launch's error (cudaSuccess while it is not made yet).
  cudaError_t error() {
    std::lock_guard lk(mu_);
    return err_;
  }
  /// Whether the launch was made and its kernel has run to its end on `stream`.
  bool ran(cudaStream_t stream) {
    {
      std::lock_guard lk(mu_);
      if (!done_) return false;
    }
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaErrorNotReady) return false;
    (void)cudaGetLastError();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  cudaError_t err_ = cudaSuccess;
};

class GpuArena final : public ArenaStore {
 public:
  explicit GpuArena(const DeviceOptions& opt) : gpu_(opt.gpu) {
    const int n = require_gpus("Device::open(soft): the GPU engine");
    if (opt.gpu < 0 || opt.gpu >= n)
      throw Error("Device::open(soft): gpu " + std::to_string(opt.gpu) + " does not exist: this machine has " +
                  std::to_string(n) + " GPU(s), 0.." + std::to_string(n - 1));
    DeviceGuard g(opt.gpu);
    if (lazy_module_loading())
      throw Error("Device::open(soft): the GPU engine cannot run with lazy CUDA module loading "
                  "(CUDA_MODULE_LOADING=LAZY): the first launch of any kernel would wait for the "
                  "resident engine forever. Set CUDA_MODULE_LOADING=EAGER before the process starts "
                  "CUDA (gpuverbs asks for it unless the variable is already set)");
    const std::size_t size = opt.arena_bytes;
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, size), "Device::open(soft): cannot allocate the GPU engine's arena of " +
                                         std::to_string(size) + " bytes on GPU " + std::to_string(opt.gpu));
    base_ = static_cast<std::byte*>(p);
    shadow_.assign(soft::ArenaLayout::kHeap, std::byte{0});  // header and tables
    char name[64];
    std::snprintf(name, sizeof(name), "gpu:%d:%d:%p", getpid(), gpu_, p);
    init(base_, shadow_.data(), size, name);
    try {
      cuda_check(cudaStreamCreateWithFlags(&ctl_, cudaStreamNonBlocking), "Device::open(soft): control stream");
      cuda_check(cudaStreamCreateWithFlags(&engine_stream_, cudaStreamNonBlocking), "Device::open(soft): engine stream");
      clear_by_copies(p, size, ctl_, "Device::open(soft): clearing the arena");
      cuda_check(cudaHostAlloc(&beacon_, sizeof(EngineBeacon), cudaHostAllocMapped | cudaHostAllocPortable),
                 "Device::open(soft): the GPU engine's beacon (pinned host memory)");
      cudaIpcMemHandle_t h{};
      if (cudaIpcGetMemHandle(&h, p) == cudaSuccess) {
        static_assert(sizeof(h) == sizeof(ipc_));
        std::memcpy(ipc_, &h, sizeof(h));
      } else {
        (void)cudaGetLastError();  // other processes cannot connect; said at their connect
      }
    } catch (...) {
      close();
      throw;
    }
    std::lock_guard lk(g_gpu_arenas_mu);
    g_gpu_arenas[path_] = GpuArenaRef{base_, gpu_};
  }

  /// After the engine has stopped.
  ~GpuArena() override {
    if (base_ != nullptr) close();
  }

  bool on_gpu() const override { return true; }
  int gpu() const { return gpu_; }
  cudaStream_t engine_stream() const { return engine_stream_; }
  EngineBeacon* beacon() const { return beacon_; }

  void describe(QpInfo& info) const override {
    static_assert(sizeof(info.ipc) == sizeof(ipc_));
    std::memcpy(info.ipc, ipc_, sizeof(ipc_));
  }

  std::unique_ptr<Engine> start_engine(const DeviceOptions& opt, const EngineSite& site) override;

  /// After a failed start: the engine's launch may still be queued behind other kernels, and
  /// its arena must outlive it. A detached thread frees everything once the launch has run
  /// (it sees the beacon's stop and exits at once); this object then holds nothing.
  void abandon(std::shared_ptr<EngineLaunch> launch) {
    {
      std::lock_guard lk(g_gpu_arenas_mu);
      g_gpu_arenas.erase(path_);
    }
    std::thread([gpu = gpu_, base = base_, ctl = ctl_, es = engine_stream_, beacon = beacon_, launch] {
      if (launch) launch->wait_made();
      {
        DeviceGuard g(gpu, false);
        (void)cudaStreamSynchronize(es);
      }
      free_resources(gpu, base, ctl, es, beacon);
    }).detach();
    base_ = nullptr;
  }

  void push(const void* p, std::size_t n) override {
    std::byte* dst = engine_ptr(*static_cast<std::byte*>(const_cast<void*>(p)));
    cuda_check(cudaMemcpyAsync(dst, p, n, cudaMemcpyHostToDevice, ctl_), "soft GPU engine: table update");
    cuda_check(cudaStreamSynchronize(ctl_), "soft GPU engine: table update");
  }

  void write_at(std::uint64_t off, const void* src, std::size_t n) override {
    cuda_check(cudaMemcpyAsync(arena_.base + off, src, n, cudaMemcpyHostToDevice, ctl_), "soft GPU engine: ring setup");
    cuda_check(cudaStreamSynchronize(ctl_), "soft GPU engine: ring setup");
  }
  void zero_at(std::uint64_t off, std::size_t n) override {
    clear_by_copies(arena_.base + off, n, ctl_, "soft GPU engine: ring setup");
  }

  /// Memory of its GPU, of a GPU it can reach as a peer, and host memory pinned and mapped for
  /// the GPUs; never moved with copies (-1).
  int reachable(const void* addr, std::size_t, std::uint32_t) const override {
    cudaPointerAttributes at{};
    const cudaError_t e = cudaPointerGetAttributes(&at, addr);
    (void)cudaGetLastError();
    if (e != cudaSuccess || at.type == cudaMemoryTypeUnregistered)
      throw Error("reg_mr: the GPU engine cannot reach pageable host memory at " +
                  hex(reinterpret_cast<std::uintptr_t>(addr)) +
                  "; use Device::alloc, cudaMalloc, or pin it with cudaHostRegister(..., cudaHostRegisterMapped)");
    if (at.type == cudaMemoryTypeHost && at.devicePointer != addr)
      throw Error("reg_mr: pinned host memory at " + hex(reinterpret_cast<std::uintptr_t>(addr)) +
                  " is not mapped at the same address on the GPU; register it with cudaHostRegisterMapped");
    if (at.type == cudaMemoryTypeDevice && at.device != gpu_) {
      int can = 0;
      (void)cudaDeviceCanAccessPeer(&can, gpu_, at.device);
      if (!can)
        throw Error("reg_mr: memory of GPU " + std::to_string(at.device) + " is not reachable from GPU " +
                    std::to_string(gpu_) + " (no peer access)");
      DeviceGuard g(gpu_);
      const cudaError_t pe = cudaDeviceEnablePeerAccess(at.device, 0);
      if (pe != cudaErrorPeerAccessAlreadyEnabled) cuda_check(pe, "reg_mr: cudaDeviceEnablePeerAccess");
      (void)cudaGetLastError();
    }
    return -1;
  }

  /// The peer arena's address in this process: this arena, another device's of this process,
  /// or another process's opened through CUDA IPC.
  std::uint64_t peer_base(std::uint32_t qpn, const QpInfo& r) override {
    if (!is_gpu_arena_name(r.arena))
      throw Error("modify_to_rtr: QP " + hex(qpn) + " is served by the GPU engine and remote QP " + hex(r.qpn) +
                  " by the CPU engine; connect QPs of devices opened with the same DeviceOptions::engine");
    if (path_ == r.arena) return reinterpret_cast<std::uintptr_t>(arena_.base);
    DeviceGuard g(gpu_);
    if (r.pid == getpid()) {
      GpuArenaRef ref{};
      {
        std::lock_guard lk(g_gpu_arenas_mu);
        auto it = g_gpu_arenas.find(r.arena);
        if (it == g_gpu_arenas.end())
          throw Error("modify_to_rtr: remote QP " + hex(r.qpn) + " belongs to a device that is closed");
        ref = it->second;
      }
      if (ref.gpu != gpu_) {
        int can = 0;
        cuda_check(cudaDeviceCanAccessPeer(&can, gpu_, ref.gpu), "modify_to_rtr: cudaDeviceCanAccessPeer");
        if (!can)
          throw Error("modify_to_rtr: GPU " + std::to_string(gpu_) + " cannot access GPU " +
                      std::to_string(ref.gpu) + "'s memory (no peer access): the GPU engines cannot connect");
        const cudaError_t e = cudaDeviceEnablePeerAccess(ref.gpu, 0);
        if (e != cudaErrorPeerAccessAlreadyEnabled) cuda_check(e, "modify_to_rtr: cudaDeviceEnablePeerAccess");
        (void)cudaGetLastError();
      }
      return reinterpret_cast<std::uintptr_t>(ref.base);
    }
    const std::string key(r.arena, strnlen(r.arena, sizeof(r.arena)));
    auto it = ipc_peers_.find(key);
    if (it != ipc_peers_.end()) return reinterpret_cast<std::uintptr_t>(it->second);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, r.ipc, sizeof(h));
    void* p = nullptr;
    cuda_check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
               "modify_to_rtr: opening remote QP " + hex(r.qpn) + "'s arena (process " +
                   std::to_string(r.pid) + ") through CUDA IPC");
    ipc_peers_[key] = p;
    return reinterpret_cast<std::uintptr_t>(p);
  }

 private:
  void pull_bytes(void* dst, const void* tab_field, std::size_t n) const override {
    const void* src = engine_ptr(*static_cast<std::byte*>(const_cast<void*>(tab_field)));
    cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, ctl_), "soft GPU engine: reading its state");
    cuda_check(cudaStreamSynchronize(ctl_), "soft GPU engine: reading its state");
  }

  /// What the constructor acquired, freed on GPU `gpu` (after the engine has ended).
  static void free_resources(int gpu, std::byte* base, cudaStream_t ctl, cudaStream_t es, EngineBeacon* beacon) {
    DeviceGuard g(gpu, false);
    if (ctl) (void)cudaStreamDestroy(ctl);
    if (es) (void)cudaStreamDestroy(es);
    if (beacon) (void)cudaFreeHost(beacon);
    (void)cudaFree(base);
  }

  void close() {
    {
      std::lock_guard lk(g_gpu_arenas_mu);
      g_gpu_arenas.erase(path_);
    }
    {
      DeviceGuard g(gpu_, false);
      for (auto& [name, base] : ipc_peers_) (void)cudaIpcCloseMemHandle(base);
    }
    free_resources(gpu_, base_, ctl_, engine_stream_, beacon_);
    base_ = nullptr;
  }

  int gpu_;
  std::byte* base_ = nullptr;       ///< the cudaMalloc (null once closed or abandoned)
  std::vector<std::byte> shadow_;   ///< the host's view of header and tables
  cudaStream_t ctl_ = nullptr;      ///< table updates and reads
  cudaStream_t engine_stream_ = nullptr;
  EngineBeacon* beacon_ = nullptr;  ///< pinned, mapped: the engine's start and the host's stop
  unsigned char ipc_[64] = {};
  std::map<std::string, void*> ipc_peers_;
};

/// Starts, stops and watches the engine kernel of one GpuArena.
class GpuEngine final : public Engine {
 public:
  GpuEngine(GpuArena& arena, std::uint32_t warps, const EngineSite& site)
      : arena_(arena), gpu_(arena.gpu()), warps_(warps), site_(site) {
    try {
      start(false);
    } catch (...) {
      arena_.abandon(launch_);
      throw;
    }
    watchdog_ = std::thread([this] { watch(); });
  }

  ~GpuEngine() override {
    {
      std::lock_guard lk(wd_mu_);
      wd_stop_ = true;
    }
    wd_cv_.notify_all();
    watchdog_.join();
    if (running_) (void)stop_nothrow();
  }

  void quiesce() override {
    if (failed_) throw Error("Device::quiesce: the GPU engine failed (AsyncEvent kEngineFailed); close the device");
    if (!running_) throw Error("Device::quiesce: the GPU engine is already stopped; call resume() first");
    cuda_check(stop_nothrow(), "Device::quiesce: the GPU engine ended with an error");
  }

  void resume() override {
    if (failed_) throw Error("Device::resume: the GPU engine failed (AsyncEvent kEngineFailed); close the device");
    if (running_) throw Error("Device::resume: the GPU engine is running; quiesce() first");
    start(true);
  }

  /// A warp fences when it sees ArenaHeader::qps_created change, which it reads right after it
  /// publishes its epoch: the first advance seen is followed by a sweep that reads it, the
  /// second ends that sweep. A stopped engine starts with an empty L1.
  void forget_stale() noexcept override { (void)(swept() && swept()); }

  /// Every engine warp has finished a sweep since the call (the CPU engine sweeps under the
  /// tables' lock instead). False, without waiting, for an engine the watchdog reported (it may
  /// never sweep again), and after 2 s without a sweep.
  bool swept() noexcept override {
    if (!running_) return true;
    if (failed_) return false;
    try {
      const soft::ArenaHeader* h = arena_.tables().hdr();
      std::uint64_t seen[soft::kMaxEngineWarps];
      for (std::uint32_t w = 0; w < warps_; ++w) seen[w] = arena_.pull(h->epoch[w]);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      for (std::uint32_t w = 0; w < warps_; ++w) {
        while (arena_.pull(h->epoch[w]) == seen[w]) {
          if (std::chrono::steady_clock::now() > deadline) return false;
          std::this_thread::yield();
        }
      }
    } catch (...) {
      return false;  // the engine's state cannot be read (dead context)
    }
    return true;
  }

 private:
  /// Launches the engine and waits for its heartbeat; open() and resume() (`resuming`).
  void start(bool resuming) {
    const std::string who = resuming ? "Device::resume" : "Device::open(soft)";
    const cudaStream_t es = arena_.engine_stream();
    EngineBeacon* const beacon = arena_.beacon();
    // A launch abandoned by an earlier failed start may still wait for an SM: a second
    // engine must not join it (and a copy now would wait behind it).
    if (launch_ && !launch_->ran(es))
      throw Error(who + ": the GPU engine's previous start is still waiting for an SM on GPU " + std::to_string(gpu_) +
                  ": kernels running there occupy it; call resume() again once they have ended");
    ArenaHeader* h = arena_.tables().hdr();
    for (auto& e : h->epoch) e = 0;
    arena_.push(h->epoch, sizeof(h->epoch));
    sync::store_relaxed(&beacon->started, std::uint32_t{0});
    sync::store_release(&beacon->stop, std::uint32_t{0});
    // Launched from a thread of its own: on a GPU full of other kernels the launch itself can
    // block (the driver grows the local-memory pool for the engine's stack, which waits for
    // the running kernels), and open() must still report within 5 s.
    launch_ = std::make_shared<EngineLaunch>();
    std::thread([l = launch_, gpu = gpu_, es, arena = arena_.arena(), warps = warps_, beacon] {
      DeviceGuard g(gpu, false);
      l->made(launch_gpu_engine(es, arena, getpid(), warps, beacon));
    }).detach();
    // The engine must be resident before anyone relies on it: a GPU full of long-running
    // kernels would otherwise leave every post unanswered without a word. Its start is read
    // from the beacon in mapped host memory, never with a copy: while the launch waits for an
    // SM, copies on our other streams wait behind it (measured on H100 and H200).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (sync::load_acquire(&beacon->started) == 0) {
      // (an error is known only once the launch was made)
      cuda_check(launch_->error(), who + ": launching the GPU engine");
      if (std::chrono::steady_clock::now() > deadline) {
        sync::store_release(&beacon->stop, std::uint32_t{1});
        throw Error(who + ": the GPU engine did not start within 5 s on GPU " + std::to_string(gpu_) +
                    ": kernels already running there occupy it (the engine needs " + std::to_string(warps_) +
                    " warps, in blocks of up to 8, for the device's lifetime); " +
                    (resuming ? "call resume() again once they have ended"
                              : "open the device before launching long-running kernels"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    running_ = true;
  }

  cudaError_t stop_nothrow() {
    sync::store_release(&arena_.beacon()->stop, std::uint32_t{1});
    running_ = false;
    DeviceGuard g(gpu_, false);
    return cudaStreamSynchronize(arena_.engine_stream());
  }

  /// Reports an engine that ended or stopped advancing, and raises abort so that every
  /// device-side wait of this device ends.
  void watch() {
    using clock = std::chrono::steady_clock;
    (void)cudaSetDevice(gpu_);
    std::uint64_t last = 0;
    auto last_change = clock::now();
    bool reported = false;
    std::unique_lock lk(wd_mu_);
    while (!wd_cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return wd_stop_; })) {
      std::unique_lock plk(site_.tables, std::try_to_lock);
      if (!plk.owns_lock() || !running_ || reported) {
        last_change = clock::now();
        continue;
      }
      const cudaError_t e = cudaStreamQuery(arena_.engine_stream());
      std::string why;
      if (e != cudaErrorNotReady) {
        (void)cudaGetLastError();
        why = std::string("the GPU engine on GPU ") + std::to_string(gpu_) + " ended unexpectedly (" +
              (e == cudaSuccess ? "no error" : cuda_error_text(e)) + "); the device's queues are dead: close it";
      } else {
        std::uint64_t now = last;
        try {
          now = arena_.pull(arena_.tables().hdr()->epoch[0]);
        } catch (const Error&) {
        }
        if (now != last) {
          last = now;
          last_change = clock::now();
        } else if (clock::now() - last_change > std::chrono::seconds(2)) {
          why = "the GPU engine on GPU " + std::to_string(gpu_) +
                " has not advanced for 2 s: it is not being scheduled (a debugger, or a process "
                "holding the GPU exclusively); its queues are stalled";
        }
      }
      if (!why.empty()) {
        reported = true;
        failed_ = true;
        if (e != cudaErrorNotReady) running_ = false;  // ended: nothing left to stop or wait for
        plk.unlock();
        site_.report(AsyncEvent{AsyncEvent::Type::kEngineFailed, 0, why});
        try {
          site_.abort();
        } catch (const Error&) {
        }
      }
    }
  }

  GpuArena& arena_;
  int gpu_;
  std::uint32_t warps_;
  EngineSite site_;
  std::shared_ptr<EngineLaunch> launch_;  ///< the engine's last launch (shared with its thread)
  bool running_ = false;  ///< under the tables' lock
  bool failed_ = false;   ///< the watchdog reported kEngineFailed (under the tables' lock)
  std::thread watchdog_;
  std::mutex wd_mu_;
  std::condition_variable wd_cv_;
  bool wd_stop_ = false;
};

std::unique_ptr<Engine> GpuArena::start_engine(const DeviceOptions& opt, const EngineSite& site) {
  return std::make_unique<GpuEngine>(*this, opt.engine_warps, site);
}

}  // namespace

std::unique_ptr<ArenaStore> open_gpu_arena(const DeviceOptions& opt) { return std::make_unique<GpuArena>(opt); }

}  // namespace gv::detail
