// World setup: a sequence of named steps, the collective ones each an allgather of a fixed-size
// record:
//   1. who: host, process, GPU, options (mismatched options fail here, naming the ranks);
//   2. reach: which peers' heaps this rank can map (p2p needs both directions), hence the
//      transport to each peer;
//   3. place: this rank's tables, heap and queues (no collective: two ranks of one process would
//      wait for each other inside the engine gate);
//   4. heaps: how to map each heap (shared file, CUDA IPC handle) and its address, then
//      the mappings;
//   5. ib: every queue pair's connection info, then connect;
// then the endpoint tables are written and a last barrier makes every rank ready together.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include <gpuverbs/ib/ring.hpp>

#include "engine_gate.hpp"
#include "ib_provider.hpp"
#include "options.hpp"
#include "world_impl.hpp"

namespace gv {
namespace {

using rma::Transport;
using Memory = WorldOptions::Memory;

std::uint64_t host_identity() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string b;
  if (boot >> b) id += "/" + b;
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Step 1: who each rank is.
struct Who {
  std::uint64_t host = 0;
  std::int32_t pid = 0;
  std::int32_t gpu = -1;        ///< CUDA ordinal in its process, -1 for host ranks
  std::uint64_t heap_bytes = 0;
  std::uint32_t lanes = 0, depth = 0;
  std::uint32_t transport = 0;  ///< forced transport (0 = choose)
  std::uint32_t memory = 0;     ///< 0 host, 1 GPU
  std::uint32_t engine = 0;     ///< the ib engine: 0 CPU, 1 GPU
  unsigned char uuid[16] = {};  ///< GPU UUID
};

/// Step 4: how to reach a rank's heap.
struct HeapInfo {
  detail::HeapExport exp;
  std::uint64_t addr = 0;       ///< heap address in its own process (ib remote addresses, same-process p2p)
  std::uint32_t rkey = 0;
  std::uint32_t pad = 0;
};

/// The steps, in order, on one rank's Impl.
class Setup {
 public:
  explicit Setup(World::Impl& m) : m_(m) {}

  void run(const WorldOptions& o) {
    m_.opt = detail::resolve_options(o);
    m_.rank = m_.boot->rank();
    m_.size = m_.boot->size();
    who(memory());
    reach();
    {
      detail::EngineGate gate(nullptr);  // every CUDA allocation of the setup, no engine running
      place();
    }
    heaps();
    if (need_ib_) connect_ib();
    write_tables();
    go_live();
  }

 private:
  std::size_t n() const { return static_cast<std::size_t>(m_.size); }

  /// Where heaps live: GPUs when asked (or, for kAuto, when there are any).
  Memory memory() {
    Memory memory = m_.opt.memory;
    // Host ranks never touch CUDA (a process may fork them, or have no driver).
    if (memory != Memory::kHost) ngpus_ = detail::gpu_count();
    if (memory == Memory::kAuto) memory = ngpus_ > 0 ? Memory::kGpu : Memory::kHost;
    if (memory == Memory::kHost && m_.opt.ib_engine == WorldOptions::Engine::kGpu)
      throw Error("World: ib_engine kGpu (GV_IB_ENGINE=gpu) needs GPU heaps, but this World's ranks are host ranks");
    if (memory == Memory::kGpu && ngpus_ == 0)
      throw Error("World: WorldOptions::memory is kGpu but no NVIDIA GPU or driver was found, or gpuverbs was built "
                  "without CUDA (use kHost for host ranks)");
    return memory;
  }

  /// Step 1: who, with mismatched options named; then this rank's GPU, published again.
  void who(Memory memory) {
    me_.host = host_identity();
    me_.pid = getpid();
    me_.heap_bytes = m_.opt.heap_bytes;
    me_.lanes = m_.opt.ib_lanes;
    me_.depth = m_.opt.ib_depth;
    me_.transport = static_cast<std::uint32_t>(m_.opt.transport);
    me_.memory = memory == Memory::kGpu ? 1 : 0;
    me_.engine = memory == Memory::kGpu && m_.opt.ib_engine != WorldOptions::Engine::kCpu ? 1 : 0;
    who_.resize(n());
    m_.boot->allgather(&me_, who_.data(), sizeof(me_));
    for (int r = 0; r < m_.size; ++r) {
      const Who& w = who_[static_cast<std::size_t>(r)];
      auto mismatch = [&](const char* what, std::uint64_t a, std::uint64_t b) {
        throw Error(std::string("World: ranks disagree on ") + what + ": rank " + std::to_string(m_.rank) + " has " +
                    std::to_string(a) + ", rank " + std::to_string(r) + " has " + std::to_string(b));
      };
      if (w.heap_bytes != me_.heap_bytes) mismatch("the heap size (bytes)", me_.heap_bytes, w.heap_bytes);
      if (w.memory != me_.memory) mismatch("where heaps live (0 host, 1 GPU)", me_.memory, w.memory);
      if (w.engine != me_.engine) mismatch("the ib engine (0 CPU, 1 GPU)", me_.engine, w.engine);
      if (w.lanes != me_.lanes) mismatch("ib_lanes", me_.lanes, w.lanes);
      if (w.depth != me_.depth) mismatch("ib_depth", me_.depth, w.depth);
      if (w.transport != me_.transport) mismatch("the forced transport", me_.transport, w.transport);
      if (w.host == me_.host) {
        if (r < m_.rank) ++m_.local_rank;
        ++m_.local_size;
      }
    }
    --m_.local_size;  // counted itself
    if (memory == Memory::kGpu) {
      m_.gpu = m_.opt.gpu >= 0 ? m_.opt.gpu : m_.local_rank % ngpus_;
      if (m_.gpu >= ngpus_)
        throw Error("World: rank " + std::to_string(m_.rank) + " asked for GPU " + std::to_string(m_.gpu) + " of " +
                    std::to_string(ngpus_));
      detail::use_gpu(m_.gpu, me_.uuid);
      me_.gpu = m_.gpu;
    }
    m_.boot->allgather(&me_, who_.data(), sizeof(me_));
  }

  /// Step 2: reach[r][q] = rank r can map rank q's heap; the transport to each peer.
  void reach() {
    std::vector<unsigned char> row(n(), 0), all(n() * n());
    for (int q = 0; q < m_.size; ++q) {
      const Who& w = who_[static_cast<std::size_t>(q)];
      if (w.host != me_.host) continue;
      row[static_cast<std::size_t>(q)] = !m_.gpu_mode() || detail::gpu_reaches(m_.gpu, w.uuid, w.pid == me_.pid);
    }
    m_.boot->allgather(row.data(), all.data(), row.size());
    m_.transports.assign(n(), Transport::kNone);
    for (int q = 0; q < m_.size; ++q) {
      const auto i = static_cast<std::size_t>(q);
      const bool both = all[static_cast<std::size_t>(m_.rank) * n() + i] && all[i * n() + static_cast<std::size_t>(m_.rank)];
      Transport t;
      if (q == m_.rank) t = Transport::kSelf;
      else if (m_.opt.transport == Transport::kIb) t = Transport::kIb;
      else if (both) t = Transport::kP2p;
      else if (m_.opt.transport == Transport::kP2p)
        throw Error("World: transport p2p was forced, but ranks " + std::to_string(m_.rank) + " and " + std::to_string(q) +
                    " cannot map each other's heaps (another host, or GPUs without peer access): use ib or auto");
      else t = Transport::kIb;
      m_.transports[i] = t;
      need_ib_ = need_ib_ || t == Transport::kIb;
      ipc_ = ipc_ || (t == Transport::kP2p && who_[i].pid != me_.pid);
    }
  }

  /// Step 3: tables, heap and queues.
  void place() {
    if (m_.gpu_mode()) {
      m_.gpu_memory = detail::gpu_space(m_.gpu);
      m_.space = m_.gpu_memory.get();
    }
    detail::Space& s = *m_.space;
    const std::size_t lanes = n() * m_.opt.ib_lanes;
    m_.peers = static_cast<rma::Peer*>(s.alloc(n() * sizeof(rma::Peer), "peer table"));
    m_.lanes = static_cast<rma::IbLane*>(s.alloc(lanes * sizeof(rma::IbLane), "lanes"));
    m_.lane_states = static_cast<rma::LaneState*>(s.alloc(lanes * sizeof(rma::LaneState), "lane states"));
    m_.abort_flag = s.alloc_flag();

    m_.user_offset = ((sizeof(rma::Reserved) + 8 * n()) + 255) & ~std::size_t{255};
    const std::size_t total = m_.user_offset + ((m_.opt.heap_bytes + 255) & ~std::size_t{255});
    if (need_ib_) {
      // The software HCA reaches only its own device's memory across processes: the heap lives there.
      const std::size_t per_lane = std::size_t{m_.opt.ib_depth} * 1024 + (64u << 10);  // rings, CQ, results
      DeviceOptions d;
      d.arena_bytes = total + (n() - 1) * m_.opt.ib_lanes * per_lane + (std::size_t{16} << 20);
      d.engine = m_.gpu_engine() ? DeviceOptions::Engine::kGpu : DeviceOptions::Engine::kCpu;
      d.map_to_gpus = m_.gpu_mode() && !m_.gpu_engine();  // the CPU engine's memory, reached by kernels
      d.gpu = m_.gpu_mode() ? m_.gpu : 0;
      d.engine_warps = m_.opt.ib_engine_warps;
      const detail::IbProvider ibp = detail::world_ib_provider(d, m_.gpu_mode());  // GV_PROVIDER=soft|mlx5
      m_.dev = Device::open(ibp.name, ibp.options);
      m_.dev->quiesce();  // no engine of this process runs while the setup allocates (EngineGate)
      m_.pd = m_.dev->alloc_pd();
      // A NIC reaches GPU memory (dma-buf, nvidia_peermem): GPU ranks keep their heap there.
      m_.heap = ibp.gpu_heap ? detail::cuda_heap(total, s, ipc_)
                             : detail::device_heap(*m_.dev, total, m_.gpu_engine() ? s : detail::host_space(), ipc_);
      m_.heap_mr = m_.pd->reg_mr(m_.heap->base(), total, kAllAccess);
      create_ib_queues();
    } else if (m_.gpu_mode()) {
      m_.heap = detail::cuda_heap(total, s, ipc_);
    } else {
      m_.heap = detail::shared_heap(total);
    }
    m_.blocks.init(m_.user_offset, total);
  }

  void create_ib_queues() {
    const std::uint32_t L = m_.opt.ib_lanes;
    m_.qps.resize(n() * L);
    m_.cqs.resize(n() * L);
    QpCaps caps;
    caps.sq_depth = m_.opt.ib_depth;
    caps.rq_depth = 1;
    caps.max_inline = World::Impl::kIbInline;
    for (std::size_t q = 0; q < n(); ++q) {
      if (m_.transports[q] != Transport::kIb) continue;
      for (std::uint32_t l = 0; l < L; ++l) {
        const std::size_t k = q * L + l;
        m_.cqs[k] = m_.dev->create_cq(m_.opt.ib_depth * 4);  // every WQE is signaled; a WQE takes >= 1 WQEBB
        m_.qps[k] = m_.pd->create_qp(*m_.cqs[k], *m_.cqs[k], caps);
      }
    }
  }

  /// Step 4: every heap's address and export, then the peers' mapped here.
  void heaps() {
    HeapInfo mine;
    mine.addr = reinterpret_cast<std::uintptr_t>(m_.heap->base());
    if (m_.heap_mr) mine.rkey = m_.heap_mr->rkey();
    mine.exp = m_.heap->exported();
    heaps_.resize(n());
    m_.boot->allgather(&mine, heaps_.data(), sizeof(mine));
    detail::EngineGate gate(nullptr);  // opening CUDA IPC mappings
    m_.peer_heaps = std::make_unique<detail::PeerHeaps>(*m_.space);
    m_.peer_base.assign(n(), nullptr);
    for (int q = 0; q < m_.size; ++q) {
      const auto i = static_cast<std::size_t>(q);
      if (m_.transports[i] == Transport::kSelf) {
        m_.peer_base[i] = m_.heap->base();
      } else if (m_.transports[i] != Transport::kP2p) {
        if (heaps_[i].addr == 0) throw Error("World: rank " + std::to_string(q) + " has no registered heap for ib");
      } else if (who_[i].pid == me_.pid) {
        m_.peer_base[i] = reinterpret_cast<std::byte*>(heaps_[i].addr);  // a rank of this process
      } else if ((m_.peer_base[i] = m_.peer_heaps->map(heaps_[i].exp)) == nullptr) {
        throw Error("World: rank " + std::to_string(q) + "'s heap cannot be mapped by rank " + std::to_string(m_.rank) +
                    ": host ranks of different processes mix p2p and ib peers, which is not supported (set GV_TRANSPORT)");
      }
    }
  }

  /// Step 5: connect every lane, and the result slots of atomics and g (one per send-queue
  /// position of every lane).
  void connect_ib() {
    const std::uint32_t L = m_.opt.ib_lanes;
    const std::size_t k_all = n() * L;
    std::vector<QpInfo> mine(k_all), all(k_all * n());
    for (std::size_t k = 0; k < k_all; ++k)
      if (m_.qps[k]) mine[k] = m_.qps[k]->info();
    m_.boot->allgather(mine.data(), all.data(), k_all * sizeof(QpInfo));
    detail::EngineGate gate(nullptr);  // connecting may open a peer's arena (peer access, CUDA IPC)
    for (std::size_t q = 0; q < n(); ++q) {
      if (m_.transports[q] != Transport::kIb) continue;
      for (std::uint32_t l = 0; l < L; ++l) m_.qps[q * L + l]->connect(all[q * k_all + static_cast<std::size_t>(m_.rank) * L + l]);
    }
    m_.sq_bbs = 0;
    for (const auto& qp : m_.qps)
      if (qp) m_.sq_bbs = qp->device_handle().sq_bbs;
    const std::size_t bytes = k_all * m_.sq_bbs * 8;
    m_.results = static_cast<std::uint64_t*>(m_.dev->alloc(bytes));
    m_.results_mr = m_.pd->reg_mr(m_.results, bytes, kLocalWrite);
  }

  /// The endpoint and the tables it points to.
  void write_tables() {
    const std::uint32_t L = m_.opt.ib_lanes;
    std::vector<rma::Peer> hp(n());
    std::vector<rma::IbLane> hl(n() * L);
    for (std::size_t i = 0; i < n(); ++i) {
      rma::Peer& pr = hp[i];
      pr.transport = m_.transports[i];
      pr.base = m_.peer_base[i];
      if (m_.transports[i] != Transport::kIb) continue;
      pr.lanes = L;
      pr.remote_base = heaps_[i].addr;
      pr.rkey = heaps_[i].rkey;
      pr.ib = m_.lanes + i * L;
      for (std::uint32_t l = 0; l < L; ++l) {
        const std::size_t k = i * L + l;
        rma::IbLane& ln = hl[k];
        ln.qp = m_.qps[k]->device_handle();
        ln.cq = m_.cqs[k]->device_handle();
        ln.state = m_.lane_states + k;
        ln.results = m_.results + k * m_.sq_bbs;
        ln.results_lkey = m_.results_mr->lkey();
      }
    }
    m_.space->copy_in(m_.peers, hp.data(), hp.size() * sizeof(rma::Peer), "World: writing the peer table");
    m_.space->copy_in(m_.lanes, hl.data(), hl.size() * sizeof(rma::IbLane), "World: writing the lanes");
    rma::Endpoint& ep = m_.ep;
    ep = rma::Endpoint{};
    ep.rank = static_cast<std::uint32_t>(m_.rank);
    ep.size = static_cast<std::uint32_t>(m_.size);
    ep.lkey = m_.heap_mr ? m_.heap_mr->lkey() : 0;
    ep.heap = m_.heap->base();
    ep.heap_bytes = m_.heap->bytes();
    ep.user_offset = m_.user_offset;
    ep.peers = m_.peers;
    ep.abort = m_.abort_flag;
    ep.budget = m_.opt.budget;
    ep.arrive_offset = sizeof(rma::Reserved);
    for (std::size_t q = 0; q < n() && q < rma::kNearPeers; ++q)
      if (m_.transports[q] != Transport::kIb) ep.near[q] = m_.peer_base[q];
    // Whether every direct peer's heap is in this GPU's memory (this rank's, p2p ranks' on the
    // same GPU): signals to them are then released at device scope (rma::put_signal, signal).
    bool same_gpu = m_.gpu_mode();
    for (std::size_t q = 0; q < n(); ++q) {
      const Who& w = who_[q];
      if (m_.transports[q] != Transport::kIb)
        same_gpu = same_gpu && w.host == me_.host && std::memcmp(w.uuid, me_.uuid, sizeof(w.uuid)) == 0;
    }
    ep.direct_same_gpu = same_gpu ? 1u : 0u;
  }

  /// Every rank ready together; this World's engine runs from now on, and dead peers are watched.
  void go_live() {
    m_.boot->barrier();
    if (m_.dev) detail::engine_register(m_.dev.get());
    World::Impl* m = &m_;
    m_.boot->watch([m](const std::string& why) { m->on_failure(why); });
  }

  World::Impl& m_;
  int ngpus_ = 0;
  bool need_ib_ = false, ipc_ = false;
  Who me_;
  std::vector<Who> who_;
  std::vector<HeapInfo> heaps_;
};

std::unique_ptr<World::Impl> build(std::unique_ptr<detail::Bootstrap> boot, const WorldOptions& o) {
  auto impl = std::make_unique<World::Impl>();
  impl->boot = std::move(boot);
  try {
    impl->setup(o);
  } catch (const std::exception& e) {
    impl->boot->abandon(e.what());
    throw;
  }
  return impl;
}

}  // namespace

void World::Impl::setup(const WorldOptions& o) { Setup(*this).run(o); }

std::unique_ptr<World> World::init(const WorldOptions& o) {
  return std::unique_ptr<World>(new World(build(detail::bootstrap_from_env(), o)));
}

std::vector<std::unique_ptr<World>> World::create_local(int ranks, const WorldOptions& o) {
  if (ranks < 1 || ranks > 4096) throw Error("World::create_local: ranks must be in 1..4096");
  auto boots = detail::local_bootstraps(ranks, detail::bootstrap_timeout());
  std::vector<std::unique_ptr<Impl>> impls(static_cast<std::size_t>(ranks));
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        impls[static_cast<std::size_t>(r)] = build(std::move(boots[static_cast<std::size_t>(r)]), o);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r)
    if (!errors[static_cast<std::size_t>(r)].empty())
      throw Error("World::create_local: rank " + std::to_string(r) + ": " + errors[static_cast<std::size_t>(r)]);
  std::vector<std::unique_ptr<World>> out;
  for (auto& impl : impls) out.push_back(std::unique_ptr<World>(new World(std::move(impl))));
  return out;
}

}  // namespace gv
