// MultiDomain: the host side of distributed Himeno — per-rank setup, the loop of each mode, and
// the reporting of the first failure.
#include <gpuverbs/himeno/multi.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

#include "cuda_check.hpp"
#include "multi_kernels.hpp"

namespace gv::himeno {
namespace {

using detail::check;

std::string error_text(const ErrorRecord& e) {
  const auto w = static_cast<Where>(e.where);
  const std::string status = w == Where::kDeviceLaunch ? cudaGetErrorString(static_cast<cudaError_t>(e.status))
                                                       : to_string(static_cast<Status>(e.status));
  return std::string(to_string(w)) + " in iteration " + std::to_string(e.iteration) + ": " + status;
}

DeviceLimits device_limits(int gpu) {
  DeviceLimits d;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, gpu), "cudaGetDeviceProperties");
  d.name = prop.name;
  d.sms = prop.multiProcessorCount;
  int coop = 0;
  check(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, gpu), "cudaDeviceGetAttribute(cooperative launch)");
  d.cooperative_launch = coop != 0;
  int runtime = 0, driver = 0;
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  d.device_graph_launch = runtime >= 12000 && driver >= 12000;
  if (!d.device_graph_launch)
    d.device_graph_why = "runtime " + std::to_string(runtime) + ", driver " + std::to_string(driver) +
                         " (device graph launch needs 12000 or later for both)";
  return d;
}

/// Plain words for the World allgather that tells a rank which peers share its GPU.
struct GpuId {
  unsigned char uuid[16] = {};
  std::uint32_t ib = 0;  ///< the rank runs a software-HCA engine on it
};

}  // namespace

std::vector<World*> raw(const std::vector<std::unique_ptr<World>>& worlds) {
  std::vector<World*> out;
  for (const auto& w : worlds) out.push_back(w.get());
  return out;
}

// ---- per-rank state ----------------------------------------------------------------------------

struct MultiDomain::Rank {
  World* world = nullptr;
  int gpu = 0;
  RankPlan plan;
  DistArgs args;
  std::byte* block = nullptr;
  cudaStream_t main = nullptr, side = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;  // timed
  cudaEvent_t halo = nullptr, bnd = nullptr, fork = nullptr, join = nullptr;
  double* host_gosa = nullptr;                  // hybrid: mapped pinned [capacity]
  std::vector<double> host_total;               // hybrid: the global Gosa per iteration
  std::byte* peer_block[2] = {nullptr, nullptr};  // hybrid: the neighbours' blocks, here
  int peer_gpu[2] = {-1, -1};
  cudaGraphExec_t graph[2] = {nullptr, nullptr};       // graph mode, [comm]
  cudaGraphExec_t dev_graph[2] = {nullptr, nullptr};   // device-launch, [comm]
  DeviceLimits limits;
  int ranks_on_gpu = 1, engines_on_gpu = 0;
  bool every_neighbour_p2p = true;
  int iteration_per_sm = 0, persistent_per_sm = 0;

  void select() const { check(cudaSetDevice(gpu), "cudaSetDevice(" + std::to_string(gpu) + ")"); }
  ModeNeeds needs(Mode m, bool other_processes) const {
    ModeNeeds n;
    n.ranks_on_gpu = ranks_on_gpu;
    n.engines_on_gpu = engines_on_gpu;
    n.blocks_per_sm = m == Mode::kPersistent ? persistent_per_sm : iteration_per_sm;
    n.boundary_vblocks = plan.boundary_vblocks;
    n.peers_in_other_processes = other_processes;
    n.every_peer_p2p = every_neighbour_p2p;
    return n;
  }
  /// One sweeping block per virtual block and the communication block, as co-residency allows
  /// (persistent_kernel; why_not has checked that two fit).
  int persistent_grid(bool other_processes) const {
    return std::min(plan.vblocks + 1, coresident_blocks_per_rank(limits, needs(Mode::kPersistent, other_processes)));
  }
  /// Where sweep n's boundary plane for side s goes (hybrid): the neighbour's halo, here.
  float* dest(Side s, std::uint64_t n, const HeapLayout& h) const {
    return reinterpret_cast<float*>(peer_block[s] + h.p[(n + 1) & 1]) + plan.dest_offset[s];
  }
  /// And where it comes from: this rank's output buffer of sweep n.
  const float* source(Side s, std::uint64_t n) const { return args.p[(n + 1) & 1] + plan.send_offset[s]; }

  /// One stream-mode iteration. `side` waits for the halos, then puts the boundary planes as
  /// soon as `main` has swept them; `main` sweeps the boundary once the halos are in, then the
  /// interior, then the Gosa. fork_join: `side` joins from and back into `main` within the
  /// iteration, as a captured graph needs.
  void enqueue_stream_iteration(bool fork_join) {
    const int bv = plan.boundary_vblocks;
    if (bv > 0) {
      if (fork_join) {
        check(cudaEventRecord(fork, main), "cudaEventRecord");
        check(cudaStreamWaitEvent(side, fork), "cudaStreamWaitEvent");
      }
      check(detail::launch_halo_wait(args, side), "launching the halo-wait kernel");
      check(cudaEventRecord(halo, side), "cudaEventRecord");
      check(cudaStreamWaitEvent(main, halo), "cudaStreamWaitEvent");
      check(detail::launch_vblocks(args, 0, bv, main), "launching the boundary sweep");
      check(cudaEventRecord(bnd, main), "cudaEventRecord");
      check(cudaStreamWaitEvent(side, bnd), "cudaStreamWaitEvent");
      check(detail::launch_halo_send(args, side), "launching the halo-send kernel");
      if (fork_join) check(cudaEventRecord(join, side), "cudaEventRecord");
    }
    check(detail::launch_vblocks(args, bv, plan.vblocks - bv, main), "launching the interior sweep");
    check(detail::launch_gosa(args, main), "launching the Gosa kernel");
    if (fork_join && bv > 0) check(cudaStreamWaitEvent(main, join), "cudaStreamWaitEvent");
  }

  /// The graph of one stream-mode iteration, or (device_launch) the device graph of one in-kernel
  /// iteration followed by the scheduler that tail-launches it again.
  cudaGraphExec_t capture(bool device_launch) {
    select();
    check(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      if (device_launch) {
        check(detail::launch_iteration(args, main), "capturing the iteration kernel");
        check(detail::launch_scheduler(args, main), "capturing the scheduler kernel");
      } else {
        enqueue_stream_iteration(true);
      }
    } catch (...) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(main, &partial) == cudaSuccess && partial != nullptr) (void)cudaGraphDestroy(partial);
      throw;
    }
    cudaGraph_t g = nullptr;
    check(cudaStreamEndCapture(main, &g), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, g, device_launch ? cudaGraphInstantiateFlagDeviceLaunch : 0);
    (void)cudaGraphDestroy(g);
    check(e, device_launch ? "device-launch: cudaGraphInstantiate(cudaGraphInstantiateFlagDeviceLaunch)"
                           : "graph: cudaGraphInstantiate");
    check(cudaGraphUpload(exec, main), "cudaGraphUpload");
    return exec;
  }
};

/// hybrid with several ranks in this process: the rank threads meet once per iteration and
/// each gets every rank's Gosa. Spins (the hybrid's host threads own their cores), bounded by
/// the World's wait budget; a thread that fails stops the others.
class MultiDomain::HostExchange {
 public:
  HostExchange(int ranks, Budget budget) : ranks_(ranks), budget_(budget) {
    for (auto& s : slots_) s.assign(std::size_t(ranks), 0.0);
  }
  /// Contributes `mine` for meeting k (0, 1, ...) and returns the sum over ranks in rank order.
  double sum(int rank, std::uint64_t k, double mine) {
    std::vector<double>& slot = slots_[k & 1];  // meeting k+1 may start filling the other one
    slot[std::size_t(rank)] = mine;
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    const std::uint64_t target = (k + 1) * std::uint64_t(ranks_);
    const auto t0 = std::chrono::steady_clock::now();
    while (arrived_.load(std::memory_order_acquire) < target) {
      if (abandoned_.load(std::memory_order_relaxed)) throw std::runtime_error("himeno: hybrid: another rank failed");
      if (std::chrono::steady_clock::now() - t0 > std::chrono::nanoseconds(budget_.ns))
        throw std::runtime_error("himeno: hybrid: the ranks did not meet within the wait budget");
    }
    double total = 0.0;
    for (double v : slot) total += v;
    return total;
  }
  void abandon() { abandoned_.store(true, std::memory_order_relaxed); }

 private:
  int ranks_;
  Budget budget_;
  std::vector<double> slots_[2];
  std::atomic<std::uint64_t> arrived_{0};
  std::atomic<bool> abandoned_{false};
};

// ---- construction ------------------------------------------------------------------------------

std::size_t MultiDomain::heap_bytes(const GridSize& g, int ranks, const MultiOptions& o) {
  return plan_heap(g, ranks, o.capacity, o.planes_per_block).bytes + 4096;  // the block's alignment
}

MultiDomain::MultiDomain(std::vector<World*> ranks, const GridSize& g, const FieldsOf& fields, const MultiOptions& o) {
  if (ranks.empty()) throw std::invalid_argument("himeno: MultiDomain needs at least one rank");
  std::sort(ranks.begin(), ranks.end(), [](World* a, World* b) { return a->rank() < b->rank(); });
  size_ = ranks[0]->size();
  for (World* w : ranks) {
    if (w->size() != size_ || !w->on_gpu())
      throw std::invalid_argument("himeno: MultiDomain's ranks must be GPU ranks of one World");
  }
  if (int(ranks.size()) != size_ && ranks.size() != 1)
    throw std::invalid_argument("himeno: a process drives every rank of its World or exactly one (" +
                                std::to_string(ranks.size()) + " of " + std::to_string(size_) + " given)");
  heap_ = plan_heap(g, size_, o.capacity, o.planes_per_block);
  const bool multi_process = int(ranks.size()) < size_;
  try {
    for (World* w : ranks) {
      ranks_.push_back(std::make_unique<Rank>());  // release() frees what a failed setup made
      Rank* r = ranks_.back().get();
      r->world = w;
      r->gpu = w->gpu();
      r->select();
      r->plan = plan_rank(g, size_, w->rank(), o.planes_per_block, o.arithmetic);
      r->block = static_cast<std::byte*>(w->alloc(heap_.bytes, 256));
      r->args = make_dist_args(w->endpoint(), r->block, heap_, r->plan, true);
      const HostFields f = fields(r->plan.slab);
      const std::size_t field = std::size_t(f.layout.elems()) * sizeof(float);
      check(cudaMemcpy(r->block + heap_.p_init, f.p.data(), field, cudaMemcpyHostToDevice), "cudaMemcpy(p)");
      check(cudaMemcpy(r->block + heap_.coef, f.coef.data(), kCoefCount * field, cudaMemcpyHostToDevice),
            "cudaMemcpy(coefficients)");
      check(cudaStreamCreateWithFlags(&r->main, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaStreamCreateWithFlags(&r->side, cudaStreamNonBlocking), "cudaStreamCreate");
      // The end of a run is awaited with the thread asleep (blocking sync): a GPU-controlled run
      // needs no host CPU, and getrusage then shows it. hybrid's own waits inside the loop spin.
      check(cudaEventCreate(&r->start), "cudaEventCreate");
      check(cudaEventCreateWithFlags(&r->stop, cudaEventBlockingSync), "cudaEventCreate");
      for (cudaEvent_t* e : {&r->halo, &r->bnd, &r->fork, &r->join})
        check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate");
      void* pinned = nullptr;
      check(cudaHostAlloc(&pinned, std::size_t(o.capacity) * sizeof(double), cudaHostAllocMapped | cudaHostAllocPortable),
            "cudaHostAlloc(Gosa)");
      r->host_gosa = static_cast<double*>(pinned);
      r->host_total.assign(std::size_t(o.capacity), 0.0);
      r->limits = device_limits(r->gpu);
      check(detail::iteration_blocks_per_sm(o.arithmetic, r->iteration_per_sm), "occupancy of the iteration kernel");
      check(detail::persistent_blocks_per_sm(o.arithmetic, r->persistent_per_sm), "occupancy of the persistent kernel");
      for (Side s : {kLower, kUpper})
        if (r->plan.has(s)) {
          const rma::Transport t = w->transport_to(r->plan.neighbour[s]);
          r->every_neighbour_p2p = r->every_neighbour_p2p && (t == rma::Transport::kP2p || t == rma::Transport::kSelf);
        }
    }
    share_gpus(multi_process);
    find_peer_blocks();
    reset();
  } catch (...) {
    release();
    throw;
  }
}

namespace {
bool uses_ib(const World& w) {
  for (int q = 0; q < w.size(); ++q)
    if (w.transport_to(q) == rma::Transport::kIb) return true;
  return false;
}
}  // namespace

void MultiDomain::share_gpus(bool multi_process) {
  if (!multi_process) {
    for (auto& r : ranks_) {
      r->ranks_on_gpu = r->engines_on_gpu = 0;
      for (const auto& q : ranks_)
        if (q->gpu == r->gpu) {
          ++r->ranks_on_gpu;
          r->engines_on_gpu += uses_ib(*q->world) ? 1 : 0;
        }
    }
    return;
  }
  // One rank per process: which ranks of the World share this rank's GPU (by UUID).
  Rank& r = *ranks_[0];
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, r.gpu), "cudaGetDeviceProperties");
  GpuId mine;
  std::memcpy(mine.uuid, &prop.uuid, sizeof(mine.uuid));
  mine.ib = uses_ib(*r.world) ? 1 : 0;
  std::vector<GpuId> all(static_cast<std::size_t>(size_));
  r.world->allgather(&mine, all.data(), sizeof(GpuId));
  r.ranks_on_gpu = r.engines_on_gpu = 0;
  for (const GpuId& q : all)
    if (std::memcmp(q.uuid, mine.uuid, sizeof(mine.uuid)) == 0) {
      ++r.ranks_on_gpu;
      r.engines_on_gpu += int(q.ib);
    }
}

void MultiDomain::find_peer_blocks() {
  for (auto& rp : ranks_) {
    Rank& r = *rp;
    for (Side s : {kLower, kUpper}) {
      if (!r.plan.has(s)) continue;
      const int q = r.plan.neighbour[s];
      if (driven() == size_) {  // the neighbour is a rank of this process
        r.peer_block[s] = ranks_[std::size_t(q)]->block;
        r.peer_gpu[s] = ranks_[std::size_t(q)]->gpu;
        continue;
      }
      // Another process: its heap as this process maps it (p2p peers only; hybrid refuses ib).
      const rma::Endpoint& ep = r.world->endpoint();
      std::vector<rma::Peer> peers(ep.size);
      r.select();
      check(cudaMemcpy(peers.data(), ep.peers, peers.size() * sizeof(rma::Peer), cudaMemcpyDeviceToHost),
            "cudaMemcpy(peer table)");
      if (peers[std::size_t(q)].transport != rma::Transport::kP2p || peers[std::size_t(q)].base == nullptr) continue;
      r.peer_block[s] = peers[std::size_t(q)].base + (r.block - ep.heap);
      cudaPointerAttributes at{};
      check(cudaPointerGetAttributes(&at, r.peer_block[s]), "cudaPointerGetAttributes(peer heap)");
      r.peer_gpu[s] = at.device;
    }
  }
}

void MultiDomain::release() noexcept {
  for (auto& r : ranks_) {
    (void)cudaSetDevice(r->gpu);
    if (r->main != nullptr) (void)cudaStreamSynchronize(r->main);
    if (r->side != nullptr) (void)cudaStreamSynchronize(r->side);
  }
  // With the ib transport a software-HCA engine stays resident; freeing pinned memory or graphs
  // may wait for the whole device, so the engines of the ranks driven here stop meanwhile.
  std::vector<World*> stopped;
  for (auto& r : ranks_) {
    try {
      r->world->quiesce();
      stopped.push_back(r->world);
    } catch (const std::exception&) {
      // An engine that failed or is stopped already: nothing to stop.
    }
  }
  for (auto& r : ranks_) {
    (void)cudaSetDevice(r->gpu);
    for (cudaGraphExec_t g : {r->graph[0], r->graph[1], r->dev_graph[0], r->dev_graph[1]})
      if (g != nullptr) (void)cudaGraphExecDestroy(g);
    for (cudaEvent_t e : {r->start, r->stop, r->halo, r->bnd, r->fork, r->join})
      if (e != nullptr) (void)cudaEventDestroy(e);
    for (cudaStream_t s : {r->main, r->side})
      if (s != nullptr) (void)cudaStreamDestroy(s);
    if (r->host_gosa != nullptr) (void)cudaFreeHost(r->host_gosa);
    if (r->block != nullptr) {
      try {
        r->world->free(r->block);
      } catch (const std::exception&) {
        // Not a block of this World: nothing was allocated.
      }
    }
  }
  for (World* w : stopped) {
    try {
      w->resume();
    } catch (const std::exception&) {
      // The World reports an engine that cannot restart on its next use.
    }
  }
  ranks_.clear();
}

MultiDomain::~MultiDomain() { release(); }

// ---- queries -----------------------------------------------------------------------------------

const RankPlan& MultiDomain::plan(int index) const { return ranks_.at(std::size_t(index))->plan; }
int MultiDomain::gpu(int index) const { return ranks_.at(std::size_t(index))->gpu; }
int MultiDomain::gpus() const {
  std::vector<int> g;
  for (const auto& r : ranks_) g.push_back(r->gpu);
  std::sort(g.begin(), g.end());
  return int(std::unique(g.begin(), g.end()) - g.begin());
}

std::string MultiDomain::why_not(Mode m) const {
  for (const auto& r : ranks_) {
    const std::string why = gv::himeno::why_not(m, r->limits, r->needs(m, driven() < size_));
    if (!why.empty()) return "rank " + std::to_string(r->world->rank()) + " (GPU " + std::to_string(r->gpu) + "): " + why;
  }
  return {};
}

std::vector<double> MultiDomain::gosa(int index) const {
  const Rank& r = *ranks_.at(std::size_t(index));
  std::vector<double> out(static_cast<std::size_t>(iterations_));
  r.select();
  check(cudaMemcpy(out.data(), r.args.gosa_total, out.size() * sizeof(double), cudaMemcpyDeviceToHost),
        "cudaMemcpy(Gosa)");
  return out;
}

std::vector<float> MultiDomain::download_p(int index) const {
  const Rank& r = *ranks_.at(std::size_t(index));
  std::vector<float> out(std::size_t(r.plan.slab.local.elems()));
  r.select();
  check(cudaMemcpy(out.data(), r.args.p[iterations_ & 1], out.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy(p)");
  return out;
}

// ---- reset and runs ----------------------------------------------------------------------------

void MultiDomain::reset(bool poison) {
  for (auto& rp : ranks_) {
    Rank& r = *rp;
    r.select();
    const std::size_t field = std::size_t(r.plan.slab.local.elems()) * sizeof(float);
    const auto cap = std::size_t(heap_.capacity);
    for (int k = 0; k < 2; ++k)
      check(cudaMemcpyAsync(r.block + heap_.p[k], r.block + heap_.p_init, field, cudaMemcpyDeviceToDevice, r.main),
            "cudaMemcpyAsync(p)");
    const std::pair<std::size_t, std::size_t> zero[] = {{heap_.halo_sig, 2 * sizeof(std::uint64_t)},
                                                        {heap_.gosa_sig, cap * sizeof(std::uint64_t)},
                                                        {heap_.control, sizeof(Control)}};
    const std::pair<std::size_t, std::size_t> nan[] = {
        {heap_.gosa_mine, cap * sizeof(double)},
        {heap_.gosa_parts, cap * std::size_t(size_) * sizeof(double)},
        {heap_.gosa_total, cap * sizeof(double)},
        {heap_.partials[0], std::size_t(heap_.max_vblocks) * sizeof(double)},
        {heap_.partials[1], std::size_t(heap_.max_vblocks) * sizeof(double)}};
    for (const auto& [at, bytes] : zero) check(cudaMemsetAsync(r.block + at, 0, bytes, r.main), "cudaMemsetAsync");
    for (const auto& [at, bytes] : nan) check(cudaMemsetAsync(r.block + at, 0xff, bytes, r.main), "cudaMemsetAsync");
    if (poison) check(detail::launch_poison(r.args, r.main), "launching the poison kernel");
  }
  for (auto& r : ranks_) {
    r->select();
    check(cudaStreamSynchronize(r->main), "cudaStreamSynchronize (reset)");
  }
  // No rank may put into a buffer another process is still restoring.
  if (driven() < size_) ranks_[0]->world->barrier();
  iterations_ = 0;
  failed_ = false;
}

void MultiDomain::prepare_mode(Rank& r, Mode m, bool comm) {
  r.args.comm = comm ? 1 : 0;
  if (m == Mode::kGraph && r.graph[comm] == nullptr) r.graph[comm] = r.capture(false);
  if (m == Mode::kDeviceLaunch && r.dev_graph[comm] == nullptr) r.dev_graph[comm] = r.capture(true);
}

double MultiDomain::run(Mode m, int iters, bool comm) {
  if (failed_) throw std::runtime_error("himeno: a run failed; reset() before the next one");
  if (iters < 0) throw std::invalid_argument("himeno: the number of iterations must be >= 0");
  if (iterations_ + iters > heap_.capacity)
    throw std::runtime_error("himeno: " + std::to_string(iterations_ + iters) + " iterations since the reset exceed " +
                             "the capacity of " + std::to_string(heap_.capacity) +
                             " (MultiOptions::capacity): reset() first, or raise it");
  if (const std::string why = why_not(m); !why.empty()) throw std::runtime_error("himeno: " + why);
  for (auto& r : ranks_) prepare_mode(*r, m, comm);
  const auto n0 = std::uint64_t(iterations_), end = n0 + std::uint64_t(iters);
  failed_ = true;  // until the run is known to have succeeded
  std::unique_ptr<HostExchange> ex;
  if (m == Mode::kHybrid && comm && driven() > 1) ex = std::make_unique<HostExchange>(driven(), ranks_[0]->args.ep.budget);
  if (driven() == 1) {
    run_rank(*ranks_[0], m, n0, end, comm, nullptr);
  } else {
    std::vector<std::exception_ptr> errors(ranks_.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < ranks_.size(); ++i)
      threads.emplace_back([&, i] {
        try {
          run_rank(*ranks_[i], m, n0, end, comm, ex.get());
        } catch (...) {
          errors[i] = std::current_exception();
          if (ex) ex->abandon();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  check_errors(m);
  iterations_ = std::int64_t(end);
  failed_ = false;
  float longest = 0.0f;
  for (auto& r : ranks_) {
    r->select();
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, r->start, r->stop), "cudaEventElapsedTime");
    longest = std::max(longest, ms);
  }
  return double(longest);
}

void MultiDomain::check_errors(Mode m) const {
  for (const auto& r : ranks_) {
    r->select();
    Control c;
    check(cudaMemcpy(&c, r->args.control, sizeof c, cudaMemcpyDeviceToHost), "cudaMemcpy(control)");
    if (c.error.status != 0)
      throw std::runtime_error("himeno: rank " + std::to_string(r->world->rank()) + " (GPU " + std::to_string(r->gpu) +
                               ") failed in mode " + to_string(m) + ": " + error_text(c.error));
  }
}

void MultiDomain::run_rank(Rank& r, Mode m, std::uint64_t n0, std::uint64_t end, bool comm, HostExchange* ex) {
  r.select();
  const DistArgs& a = r.args;
  const RankPlan& p = r.plan;
  const int bv = p.boundary_vblocks;
  check(cudaEventRecord(r.start, r.main), "cudaEventRecord");
  check(detail::launch_prepare(a, n0, end, r.main), "launching the prepare kernel");
  if (m == Mode::kHybrid || m == Mode::kStream) {  // `side` works after the prepare kernel
    check(cudaEventRecord(r.fork, r.main), "cudaEventRecord");
    check(cudaStreamWaitEvent(r.side, r.fork), "cudaStreamWaitEvent");
  }
  bool wait_chain = false;
  switch (m) {
    case Mode::kHybrid: {
      const std::size_t plane = std::size_t(r.args.halo.plane_floats) * sizeof(float);
      for (std::uint64_t n = n0; n < end; ++n) {
        check(detail::launch_vblocks(a, 0, bv, r.main), "launching the boundary sweep");
        check(cudaEventRecord(r.bnd, r.main), "cudaEventRecord");
        check(detail::launch_vblocks(a, bv, p.vblocks - bv, r.side), "launching the interior sweep");
        check(cudaStreamWaitEvent(r.side, r.bnd), "cudaStreamWaitEvent");
        check(detail::launch_gosa_to_host(a, r.host_gosa, r.side), "launching the Gosa kernel");
        if (comm && bv > 0) {
          check(cudaStreamSynchronize(r.main), "cudaStreamSynchronize (boundary sweep)");
          for (Side s : {kLower, kUpper})
            if (p.has(s))
              check(cudaMemcpyPeerAsync(r.dest(s, n, heap_), r.peer_gpu[s], r.source(s, n), r.gpu, plane, r.main),
                    "cudaMemcpyPeerAsync (halo)");
        }
        check(cudaStreamSynchronize(r.main), "cudaStreamSynchronize");
        check(cudaStreamSynchronize(r.side), "cudaStreamSynchronize");
        const double mine = r.host_gosa[n];
        double total = mine;
        if (comm && ex != nullptr) {
          total = ex->sum(r.world->rank(), n - n0, mine);
        } else if (comm && size_ > 1) {  // one rank per process: the World's collective
          std::vector<double> all(static_cast<std::size_t>(size_));
          r.world->allgather(&mine, all.data(), sizeof mine);
          total = 0.0;
          for (double v : all) total += v;
        }
        r.host_total[n] = total;
      }
      check(cudaEventRecord(r.stop, r.main), "cudaEventRecord");
      check(cudaEventSynchronize(r.stop), "cudaEventSynchronize");
      if (end > n0)
        check(cudaMemcpy(a.gosa_total + n0, r.host_total.data() + n0, (end - n0) * sizeof(double), cudaMemcpyHostToDevice),
              "cudaMemcpy(Gosa)");
      return;
    }
    case Mode::kStream:
      for (std::uint64_t n = n0; n < end; ++n) r.enqueue_stream_iteration(false);
      check(cudaEventRecord(r.join, r.side), "cudaEventRecord");
      check(cudaStreamWaitEvent(r.main, r.join), "cudaStreamWaitEvent");
      break;
    case Mode::kGraph:
      for (std::uint64_t n = n0; n < end; ++n) check(cudaGraphLaunch(r.graph[comm], r.main), "cudaGraphLaunch");
      break;
    case Mode::kInKernel:
      for (std::uint64_t n = n0; n < end; ++n) check(detail::launch_iteration(a, r.main), "launching the iteration kernel");
      break;
    case Mode::kDeviceLaunch:
      if (end > n0) check(cudaGraphLaunch(r.dev_graph[comm], r.main), "cudaGraphLaunch (device graph)");
      wait_chain = true;
      break;
    case Mode::kPersistent:
      if (end > n0)
        check(detail::launch_persistent(a, r.persistent_grid(driven() < size_), r.main),
              "cudaLaunchCooperativeKernel (persistent)");
      break;
  }
  check(detail::launch_finish(a, wait_chain, r.main), "launching the finish kernel");
  check(cudaEventRecord(r.stop, r.main), "cudaEventRecord");
  check(cudaEventSynchronize(r.stop), "cudaEventSynchronize");
}

}  // namespace gv::himeno
