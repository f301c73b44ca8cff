// World: bootstrap, symmetric heaps, transports per peer, and the rma endpoint.
//
// Setup is a sequence of collective steps, each an allgather of a fixed-size record:
//   1. who: host, process, GPU, options (mismatched options fail here, naming the ranks);
//   2. reach: which peers' heaps this rank can map (p2p needs both directions);
//   3. heaps: how to map each heap (shared-memory name, CUDA IPC handle) and its address;
//   4. ib: every queue pair's connection info, then connect;
// then the endpoint tables are written and a last barrier makes every rank ready together.
#include <gpuverbs/host/world.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <gpuverbs/ib/ring.hpp>

#include "bootstrap.hpp"
#include "memory.hpp"

#if GPUVERBS_HAVE_CUDA
#include <cuda_runtime.h>

#include "../cuda_util.hpp"
#endif

namespace gv {

using rma::Transport;
using Memory = WorldOptions::Memory;

namespace detail {
namespace {

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

std::size_t parse_bytes(const char* name, const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v, &end, 10);
  unsigned long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30;
  else if (*end != '\0') mult = 0;
  if (mult != 1 && *end != '\0' && end[1] != '\0' && !(end[1] == 'B' && end[2] == '\0')) mult = 0;
  if (errno != 0 || end == v || mult == 0 || x == 0 || x > (1ull << 44) / mult)
    throw Error(std::string("World: ") + name + "='" + v + "' is not a size (bytes, or with K/M/G)");
  return static_cast<std::size_t>(x * mult);
}

WorldOptions from_env(WorldOptions o) {
  if (const char* v = std::getenv("GV_HEAP_BYTES"); v && *v) o.heap_bytes = parse_bytes("GV_HEAP_BYTES", v);
  else if (const char* n = std::getenv("NVSHMEM_SYMMETRIC_SIZE"); n && *n)
    o.heap_bytes = parse_bytes("NVSHMEM_SYMMETRIC_SIZE", n);
  if (const char* w = std::getenv("GV_WAIT_TIMEOUT"); w && *w) {
    char* end = nullptr;
    const double sec = std::strtod(w, &end);
    if (*end != '\0' || !(sec > 0) || sec > 1e6) throw Error(std::string("World: GV_WAIT_TIMEOUT='") + w + "' is not a number of seconds");
    o.budget = Budget{static_cast<std::uint64_t>(sec * 1e9)};
  }
  if (const int l = env_int("GV_IB_LANES"); l >= 0) {
    if (l == 0 || l > 32 || !ib::is_pow2(static_cast<std::uint32_t>(l)))
      throw Error("World: GV_IB_LANES='" + std::to_string(l) + "' is not a power of two in 1..32 (queue pairs per ib peer)");
    o.ib_lanes = static_cast<std::uint32_t>(l);
  }
  if (const char* t = std::getenv("GV_TRANSPORT"); t && *t) {
    const std::string s = t;
    if (s == "p2p") o.transport = Transport::kP2p;
    else if (s == "ib") o.transport = Transport::kIb;
    else if (s == "auto") o.transport = Transport::kNone;
    else throw Error("World: GV_TRANSPORT='" + s + "': use p2p, ib or auto");
  }
  return o;
}

void validate(const WorldOptions& o) {
  if (o.heap_bytes == 0) throw Error("World: heap_bytes must be > 0");
  if (!ib::is_pow2(o.ib_lanes) || o.ib_lanes > 32) throw Error("World: ib_lanes must be a power of two in 1..32");
  if (o.ib_depth < 4 || o.ib_depth > 4096) throw Error("World: ib_depth must be in 4..4096");
  if (o.transport == Transport::kSelf) throw Error("World: transport kSelf is not a choice (use kP2p, kIb or kNone)");
}

template <class T>
T* aligned_host_array(std::size_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, std::max<std::size_t>(n, 1) * sizeof(T)) != 0) throw std::bad_alloc();
  std::memset(p, 0, std::max<std::size_t>(n, 1) * sizeof(T));
  return static_cast<T*>(p);
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
  unsigned char uuid[16] = {};  ///< GPU UUID
};

/// Step 3: how to reach a rank's heap.
struct HeapInfo {
  HeapExport exp;
  std::uint64_t addr = 0;       ///< heap address in its own process (ib remote addresses, same-process p2p)
  std::uint32_t rkey = 0;
  std::uint32_t pad = 0;
};

}  // namespace
}  // namespace detail

struct World::Impl {
  std::unique_ptr<detail::Bootstrap> boot;
  WorldOptions opt;
  int rank = 0, size = 1, local_rank = 0, local_size = 1, gpu = -1;
  std::vector<Transport> transports;

  // This rank's heap.
  std::byte* heap = nullptr;
  std::size_t heap_total = 0, user_offset = 0;
  enum class HeapKind { kNone, kShm, kCuda, kDevice } heap_kind = HeapKind::kNone;
  std::string shm_name;

  // Peers' heaps mapped here.
  std::vector<std::pair<void*, std::size_t>> shm_maps;
  std::vector<void*> ipc_opened;

  // ib.
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<MemoryRegion> heap_mr, results_mr;
  std::vector<std::unique_ptr<CompletionQueue>> cqs;
  std::vector<std::unique_ptr<QueuePair>> qps;  ///< [peer * lanes + lane], null for non-ib peers
  std::uint64_t* results = nullptr;             ///< Device::alloc memory, one slot per SQ position
  std::size_t results_bytes = 0;
  std::uint32_t sq_bbs = 0;
  static constexpr std::uint32_t kIbInline = 64;
  std::vector<std::byte*> peer_base;            ///< kSelf / kP2p heaps in this address space

  // Tables the endpoint points to (GPU memory for GPU ranks).
  rma::Peer* peers = nullptr;
  rma::IbLane* lanes = nullptr;
  rma::LaneState* lane_states = nullptr;
  std::uint32_t* abort_flag = nullptr;
  rma::Endpoint ep;
#if GPUVERBS_HAVE_CUDA
  cudaStream_t stream = nullptr;  ///< this World's copies and clears (non-blocking)
#endif

  // Symmetric allocator: free blocks and allocated blocks by offset (user part of the heap).
  std::map<std::uint64_t, std::uint64_t> free_blocks, used_blocks;

  mutable std::mutex fail_mu;
  std::string failure;
  bool user_quiesced = false;  ///< World::quiesce() stopped the engine (guarded by the engine registry)

  ~Impl();
  void setup(const WorldOptions& o);
  void alloc_tables();
  void clear(void* p, std::size_t bytes, const char* what);
  void make_heap(bool need_ib);
  void map_peers(const std::vector<detail::Who>& who, const std::vector<detail::HeapInfo>& heaps);
  void create_ib_queues();
  void connect_ib();
  void write_tables(const std::vector<detail::HeapInfo>& heaps);
  void raise_abort();
  void on_failure(const std::string& why);
  void take_device_events();
  bool gpu_mode() const { return gpu >= 0; }
};

// ---- the GPU engines of this process ------------------------------------------------------------
//
// While a software-HCA GPU engine (a resident kernel) runs, a CUDA allocation or free can wait
// for it forever: seen on an H100 as a World torn down (cudaFreeHost) while another rank's engine
// of the same process ran. So an engine runs only while its World is registered here, and every
// World step that allocates or frees CUDA memory holds an EngineGate, which quiesces every other
// registered engine meanwhile (the registry's lock also keeps two such steps apart). A World's
// own engine stays quiesced from its start until its setup is done.

namespace {
struct EngineRegistry {
  std::mutex mu;
  std::vector<World::Impl*> worlds;
};
EngineRegistry& engines() {
  static EngineRegistry r;
  return r;
}

class EngineGate {
 public:
  explicit EngineGate(const World::Impl* self) : lk_(engines().mu) {
    for (World::Impl* w : engines().worlds) {
      if (w == self || !w->dev || w->user_quiesced) continue;
      try {
        w->dev->quiesce();
        stopped_.push_back(w->dev.get());
      } catch (const Error&) {
        // a failed engine: nothing runs there to wait for
      }
    }
  }
  ~EngineGate() {
    for (Device* d : stopped_) {
      try {
        d->resume();
      } catch (const Error&) {
        // its World reports a failed engine through its own calls
      }
    }
  }
  EngineGate(const EngineGate&) = delete;
  EngineGate& operator=(const EngineGate&) = delete;

 private:
  std::unique_lock<std::mutex> lk_;
  std::vector<Device*> stopped_;
};
}  // namespace

// ---- setup ----------------------------------------------------------------------------------

void World::Impl::setup(const WorldOptions& o) {
  opt = detail::from_env(o);
  detail::validate(opt);
  rank = boot->rank();
  size = boot->size();

  // Step 1: who.
  Memory memory = opt.memory;
  int ngpus = 0;
#if GPUVERBS_HAVE_CUDA
  // Host ranks never touch CUDA (a process may fork them, or have no driver).
  if (memory != Memory::kHost && cudaGetDeviceCount(&ngpus) != cudaSuccess) {
    (void)cudaGetLastError();
    ngpus = 0;
  }
#endif
  if (memory == Memory::kAuto) memory = ngpus > 0 ? Memory::kGpu : Memory::kHost;
  if (memory == Memory::kGpu && ngpus == 0) {
#if GPUVERBS_HAVE_CUDA
    throw Error("World: WorldOptions::memory is kGpu but no NVIDIA GPU or driver was found (use kHost for host ranks)");
#else
    throw Error("World: WorldOptions::memory is kGpu but gpuverbs was built without CUDA");
#endif
  }
  detail::Who me;
  me.host = detail::host_identity();
  me.pid = getpid();
  me.heap_bytes = opt.heap_bytes;
  me.lanes = opt.ib_lanes;
  me.depth = opt.ib_depth;
  me.transport = static_cast<std::uint32_t>(opt.transport);
  me.memory = memory == Memory::kGpu ? 1 : 0;
  std::vector<detail::Who> who(static_cast<std::size_t>(size));
  boot->allgather(&me, who.data(), sizeof(me));
  for (int r = 0; r < size; ++r) {
    const detail::Who& w = who[static_cast<std::size_t>(r)];
    auto mismatch = [&](const char* what, std::uint64_t a, std::uint64_t b) {
      throw Error(std::string("World: ranks disagree on ") + what + ": rank " + std::to_string(rank) + " has " +
                  std::to_string(a) + ", rank " + std::to_string(r) + " has " + std::to_string(b));
    };
    if (w.heap_bytes != me.heap_bytes) mismatch("the heap size (bytes)", me.heap_bytes, w.heap_bytes);
    if (w.memory != me.memory) mismatch("where heaps live (0 host, 1 GPU)", me.memory, w.memory);
    if (w.lanes != me.lanes) mismatch("ib_lanes", me.lanes, w.lanes);
    if (w.depth != me.depth) mismatch("ib_depth", me.depth, w.depth);
    if (w.transport != me.transport) mismatch("the forced transport", me.transport, w.transport);
    if (w.host == me.host) {
      if (r < rank) ++local_rank;
      ++local_size;
    }
  }
  --local_size;  // counted itself

  // This rank's GPU, then step 1b: publish it.
#if GPUVERBS_HAVE_CUDA
  if (memory == Memory::kGpu) {
    gpu = opt.gpu >= 0 ? opt.gpu : local_rank % ngpus;
    if (gpu >= ngpus)
      throw Error("World: rank " + std::to_string(rank) + " asked for GPU " + std::to_string(gpu) + " of " +
                  std::to_string(ngpus));
    detail::cuda_check(cudaSetDevice(gpu), "World: cudaSetDevice(" + std::to_string(gpu) + ")");
    cudaDeviceProp prop{};
    detail::cuda_check(cudaGetDeviceProperties(&prop, gpu), "World: cudaGetDeviceProperties");
    me.gpu = gpu;
    std::memcpy(me.uuid, &prop.uuid, sizeof(me.uuid));
  }
#endif
  boot->allgather(&me, who.data(), sizeof(me));

  // Step 2: reach. reach[r][q] = rank r can map rank q's heap.
  std::vector<unsigned char> row(static_cast<std::size_t>(size), 0), reach(static_cast<std::size_t>(size) * size);
  for (int q = 0; q < size; ++q) {
    const detail::Who& w = who[static_cast<std::size_t>(q)];
    if (w.host != me.host) continue;
    if (!gpu_mode()) {
      row[static_cast<std::size_t>(q)] = 1;
      continue;
    }
#if GPUVERBS_HAVE_CUDA
    int ordinal = -1;  // q's GPU among this process's devices
    for (int d = 0; d < ngpus && ordinal < 0; ++d) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, d) == cudaSuccess && std::memcmp(&p.uuid, w.uuid, 16) == 0) ordinal = d;
    }
    int can = ordinal == gpu ? 1 : 0;
    if (ordinal >= 0 && ordinal != gpu && cudaDeviceCanAccessPeer(&can, gpu, ordinal) != cudaSuccess) can = 0;
    (void)cudaGetLastError();
    row[static_cast<std::size_t>(q)] = static_cast<unsigned char>(can);
    if (can && ordinal != gpu && w.pid == me.pid) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(ordinal, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        detail::cuda_check(e, "World: cudaDeviceEnablePeerAccess(" + std::to_string(ordinal) + ")");
      (void)cudaGetLastError();
    }
#endif
  }
  boot->allgather(row.data(), reach.data(), row.size());
  transports.assign(static_cast<std::size_t>(size), Transport::kNone);
  bool need_ib = false;
  for (int q = 0; q < size; ++q) {
    const bool both = reach[static_cast<std::size_t>(rank) * size + q] && reach[static_cast<std::size_t>(q) * size + rank];
    Transport t;
    if (q == rank) t = Transport::kSelf;
    else if (opt.transport == Transport::kIb) t = Transport::kIb;
    else if (both) t = Transport::kP2p;
    else if (opt.transport == Transport::kP2p)
      throw Error("World: transport p2p was forced, but ranks " + std::to_string(rank) + " and " + std::to_string(q) +
                  " cannot map each other's heaps (another host, or GPUs without peer access): use ib or auto");
    else t = Transport::kIb;
    transports[static_cast<std::size_t>(q)] = t;
    need_ib = need_ib || t == Transport::kIb;
  }

  // Step 3: heaps, tables and queues: every CUDA allocation of the setup, with no engine of this
  // process running (EngineGate; no collective inside, or two ranks of one process would wait
  // for each other).
  {
    EngineGate gate(this);
    alloc_tables();
    make_heap(need_ib);
    if (need_ib) create_ib_queues();
  }
  detail::HeapInfo mine;
  mine.addr = reinterpret_cast<std::uintptr_t>(heap);
  if (heap_mr) mine.rkey = heap_mr->rkey();
  if (heap_kind == HeapKind::kShm) {
    mine.exp.kind = detail::HeapExport::kShm;
    mine.exp.bytes = heap_total;
    std::snprintf(mine.exp.shm_name, sizeof(mine.exp.shm_name), "%s", shm_name.c_str());
  }
#if GPUVERBS_HAVE_CUDA
  bool any_ipc = false;
  for (int q = 0; q < size; ++q)
    any_ipc = any_ipc || (transports[static_cast<std::size_t>(q)] == Transport::kP2p && who[static_cast<std::size_t>(q)].pid != me.pid);
  if (gpu_mode() && any_ipc) mine.exp = detail::export_gpu_heap(heap, heap_total);
#endif
  std::vector<detail::HeapInfo> heaps(static_cast<std::size_t>(size));
  boot->allgather(&mine, heaps.data(), sizeof(mine));
  {
    EngineGate gate(this);  // opening CUDA IPC mappings
    map_peers(who, heaps);
  }
  if (need_ib) {
    for (int q = 0; q < size; ++q)
      if (transports[static_cast<std::size_t>(q)] == Transport::kIb && heaps[static_cast<std::size_t>(q)].addr == 0)
        throw Error("World: rank " + std::to_string(q) + " has no registered heap for ib");
    connect_ib();
  }
  write_tables(heaps);
  boot->barrier();  // every peer mapped this rank's heap: its name may go
  detail::unlink_shared_heap(shm_name);
  shm_name.clear();
  if (dev) {
    // From now on this World's engine runs, and other Worlds' CUDA steps stop it meanwhile.
    std::lock_guard lk(engines().mu);
    engines().worlds.push_back(this);
    dev->resume();
  }
  boot->watch([this](const std::string& why) { on_failure(why); });
}

void World::Impl::alloc_tables() {
  const std::size_t n = static_cast<std::size_t>(size) * opt.ib_lanes;
  if (gpu_mode()) {
#if GPUVERBS_HAVE_CUDA
    // Every later copy and clear goes through this stream, never the legacy one.
    detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "World: cudaStreamCreate");
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, static_cast<std::size_t>(size) * sizeof(rma::Peer)), "World: cudaMalloc (peer table)");
    peers = static_cast<rma::Peer*>(p);
    detail::cuda_check(cudaMalloc(&p, n * sizeof(rma::IbLane)), "World: cudaMalloc (lanes)");
    lanes = static_cast<rma::IbLane*>(p);
    detail::cuda_check(cudaMalloc(&p, n * sizeof(rma::LaneState)), "World: cudaMalloc (lane states)");
    lane_states = static_cast<rma::LaneState*>(p);
    clear(lane_states, n * sizeof(rma::LaneState), "World: clearing lane states");
    detail::cuda_check(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable), "World: cudaHostAlloc (abort flag)");
    std::memset(p, 0, 64);
    abort_flag = static_cast<std::uint32_t*>(p);
#endif
  } else {
    peers = detail::aligned_host_array<rma::Peer>(static_cast<std::size_t>(size));
    lanes = detail::aligned_host_array<rma::IbLane>(n);
    lane_states = detail::aligned_host_array<rma::LaneState>(n);
    abort_flag = detail::aligned_host_array<std::uint32_t>(16);
  }
}

void World::Impl::clear(void* p, std::size_t bytes, const char* what) {
#if GPUVERBS_HAVE_CUDA
  if (gpu_mode()) {
    detail::cuda_check(cudaMemsetAsync(p, 0, bytes, stream), what);
    detail::cuda_check(cudaStreamSynchronize(stream), what);
    return;
  }
#endif
  (void)what;
  std::memset(p, 0, bytes);
}

void World::Impl::make_heap(bool need_ib) {
  user_offset = ((sizeof(rma::Reserved) + 8 * static_cast<std::size_t>(size)) + 255) & ~std::size_t{255};
  heap_total = user_offset + ((opt.heap_bytes + 255) & ~std::size_t{255});
  free_blocks[user_offset] = heap_total - user_offset;
  if (need_ib) {
    // The software HCA reaches only its own device's memory across processes: the heap lives there.
    const std::uint32_t peers = static_cast<std::uint32_t>(size - 1);
    const std::size_t per_lane = std::size_t{opt.ib_depth} * 1024 + (64u << 10);  // rings, CQ, results
    DeviceOptions d;
    d.arena_bytes = heap_total + std::size_t{peers} * opt.ib_lanes * per_lane + (std::size_t{16} << 20);
    d.engine = gpu_mode() ? DeviceOptions::Engine::kGpu : DeviceOptions::Engine::kCpu;
    d.gpu = gpu_mode() ? gpu : 0;
    d.engine_warps = opt.ib_engine_warps;
    dev = Device::open("soft", d);
    dev->quiesce();  // no engine of this process runs while the setup allocates (EngineGate)
    pd = dev->alloc_pd();
    heap = static_cast<std::byte*>(dev->alloc(heap_total));
    heap_kind = HeapKind::kDevice;
    heap_mr = pd->reg_mr(heap, heap_total, kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic);
  } else if (gpu_mode()) {
#if GPUVERBS_HAVE_CUDA
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, heap_total), "World: cudaMalloc of a " + std::to_string(heap_total) + "-byte heap");
    heap = static_cast<std::byte*>(p);
    heap_kind = HeapKind::kCuda;
#endif
  } else {
    heap = detail::create_shared_heap(heap_total, shm_name);
    heap_kind = HeapKind::kShm;
  }
  if (heap_kind != HeapKind::kShm) clear(heap, heap_total, "World: clearing the heap");  // a new shm file is zero
}

void World::Impl::map_peers(const std::vector<detail::Who>& who, const std::vector<detail::HeapInfo>& heaps) {
  const std::int32_t pid = getpid();
  peer_base.assign(static_cast<std::size_t>(size), nullptr);
  for (int q = 0; q < size; ++q) {
    const auto i = static_cast<std::size_t>(q);
    const detail::HeapInfo& h = heaps[i];
    if (transports[i] == Transport::kSelf) {
      peer_base[i] = heap;
    } else if (transports[i] != Transport::kP2p) {
      continue;
    } else if (who[i].pid == pid) {
      peer_base[i] = reinterpret_cast<std::byte*>(h.addr);  // a rank of this process
    } else if (h.exp.kind == detail::HeapExport::kShm) {
      peer_base[i] = detail::map_shared_heap(h.exp);
      shm_maps.emplace_back(peer_base[i] - h.exp.offset, h.exp.offset + h.exp.bytes);
#if GPUVERBS_HAVE_CUDA
    } else if (h.exp.kind == detail::HeapExport::kCudaIpc) {
      void* base = nullptr;
      peer_base[i] = detail::open_gpu_heap(h.exp, base);
      ipc_opened.push_back(base);
#endif
    } else {
      throw Error("World: rank " + std::to_string(q) + "'s heap cannot be mapped by rank " + std::to_string(rank) +
                  ": host ranks of different processes mix p2p and ib peers, which is not supported (set GV_TRANSPORT)");
    }
  }
}

void World::Impl::create_ib_queues() {
  const std::uint32_t L = opt.ib_lanes;
  const std::size_t n = static_cast<std::size_t>(size) * L;
  qps.resize(n);
  cqs.resize(n);
  QpCaps caps;
  caps.sq_depth = opt.ib_depth;
  caps.rq_depth = 1;
  caps.max_inline = kIbInline;
  for (int q = 0; q < size; ++q) {
    if (transports[static_cast<std::size_t>(q)] != Transport::kIb) continue;
    for (std::uint32_t l = 0; l < L; ++l) {
      const std::size_t k = static_cast<std::size_t>(q) * L + l;
      cqs[k] = dev->create_cq(opt.ib_depth * 4);  // every WQE is signaled; a WQE takes >= 1 WQEBB
      qps[k] = pd->create_qp(*cqs[k], *cqs[k], caps);
    }
  }
}

void World::Impl::connect_ib() {
  const std::uint32_t L = opt.ib_lanes;
  const std::size_t n = static_cast<std::size_t>(size) * L;
  std::vector<QpInfo> mine(n), all(n * static_cast<std::size_t>(size));
  for (std::size_t k = 0; k < n; ++k)
    if (qps[k]) mine[k] = qps[k]->info();
  boot->allgather(mine.data(), all.data(), n * sizeof(QpInfo));
  EngineGate gate(this);  // connecting may open a peer's arena (peer access, CUDA IPC)
  for (int q = 0; q < size; ++q) {
    if (transports[static_cast<std::size_t>(q)] != Transport::kIb) continue;
    for (std::uint32_t l = 0; l < L; ++l) {
      const std::size_t theirs = static_cast<std::size_t>(q) * n + static_cast<std::size_t>(rank) * L + l;
      qps[static_cast<std::size_t>(q) * L + l]->connect(all[theirs]);
    }
  }
  // Result slots of atomics and g: one per send-queue position of every lane.
  sq_bbs = 0;
  for (const auto& qp : qps)
    if (qp) sq_bbs = qp->device_handle().sq_bbs;
  results_bytes = n * sq_bbs * 8;
  results = static_cast<std::uint64_t*>(dev->alloc(results_bytes));
  results_mr = pd->reg_mr(results, results_bytes, kLocalWrite);
}

void World::Impl::write_tables(const std::vector<detail::HeapInfo>& heaps) {
  const std::uint32_t L = opt.ib_lanes;
  const std::size_t n = static_cast<std::size_t>(size) * L;
  std::vector<rma::Peer> hp(static_cast<std::size_t>(size));
  std::vector<rma::IbLane> hl(n);
  for (int q = 0; q < size; ++q) {
    const auto i = static_cast<std::size_t>(q);
    rma::Peer& pr = hp[i];
    pr.transport = transports[i];
    pr.base = peer_base[i];
    if (transports[i] != Transport::kIb) continue;
    pr.lanes = L;
    pr.remote_base = heaps[i].addr;
    pr.rkey = heaps[i].rkey;
    pr.ib = lanes + i * L;
    for (std::uint32_t l = 0; l < L; ++l) {
      const std::size_t k = i * L + l;
      rma::IbLane& ln = hl[k];
      ln.qp = qps[k]->device_handle();
      ln.cq = cqs[k]->device_handle();
      ln.state = lane_states + k;
      ln.results = results + k * sq_bbs;
      ln.results_lkey = results_mr->lkey();
    }
  }
  if (gpu_mode()) {
#if GPUVERBS_HAVE_CUDA
    detail::cuda_check(cudaMemcpyAsync(peers, hp.data(), hp.size() * sizeof(rma::Peer), cudaMemcpyHostToDevice, stream),
                       "World: peer table");
    detail::cuda_check(cudaMemcpyAsync(lanes, hl.data(), n * sizeof(rma::IbLane), cudaMemcpyHostToDevice, stream), "World: lanes");
    detail::cuda_check(cudaStreamSynchronize(stream), "World: writing the tables");
#endif
  } else {
    std::copy(hp.begin(), hp.end(), peers);
    std::copy(hl.begin(), hl.end(), lanes);
  }
  ep = rma::Endpoint{};
  ep.rank = static_cast<std::uint32_t>(rank);
  ep.size = static_cast<std::uint32_t>(size);
  ep.lkey = heap_mr ? heap_mr->lkey() : 0;
  ep.heap = heap;
  ep.heap_bytes = heap_total;
  ep.user_offset = user_offset;
  ep.peers = peers;
  ep.abort = abort_flag;
  ep.budget = opt.budget;
  ep.arrive_offset = sizeof(rma::Reserved);
  for (int q = 0; q < size && q < static_cast<int>(rma::kNearPeers); ++q)
    if (transports[static_cast<std::size_t>(q)] != Transport::kIb) ep.near[q] = peer_base[static_cast<std::size_t>(q)];
}

void World::Impl::raise_abort() {
  if (abort_flag != nullptr) __atomic_store_n(abort_flag, 1u, __ATOMIC_RELEASE);
  if (dev) dev->abort();
}

void World::Impl::on_failure(const std::string& why) {
  {
    std::lock_guard lk(fail_mu);
    if (failure.empty()) failure = why;
  }
  raise_abort();
}

World::Impl::~Impl() {
  if (boot) boot->unwatch();
  {
    std::lock_guard lk(engines().mu);
    auto& v = engines().worlds;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  EngineGate gate(this);  // this World's frees, with no other engine of the process running
  // The engine first: it may still touch queues, tables and heaps.
  qps.clear();
  cqs.clear();
  results_mr.reset();
  heap_mr.reset();
  pd.reset();
  dev.reset();
#if GPUVERBS_HAVE_CUDA
  if (gpu_mode()) {
    (void)cudaSetDevice(gpu);
    for (void* b : ipc_opened) detail::close_gpu_heap(b);
    (void)cudaFree(peers);
    (void)cudaFree(lanes);
    (void)cudaFree(lane_states);
    (void)cudaFreeHost(abort_flag);
    if (heap_kind == HeapKind::kCuda) (void)cudaFree(heap);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    (void)cudaGetLastError();
  }
#endif
  if (!gpu_mode()) {
    std::free(peers);
    std::free(lanes);
    std::free(lane_states);
    std::free(abort_flag);
  }
  for (auto& [p, n] : shm_maps) detail::unmap_heap(p, n);
  if (heap_kind == HeapKind::kShm) detail::unmap_heap(heap, heap_total);
  detail::unlink_shared_heap(shm_name);
}

// ---- World ----------------------------------------------------------------------------------

World::World(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

World::~World() {
  if (!impl_) return;
  impl_->boot->unwatch();
  try {
    impl_->boot->finalize();  // nobody frees its heap while a peer may still write into it
  } catch (const Error&) {
  }
}

namespace {
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

int World::rank() const { return impl_->rank; }
int World::size() const { return impl_->size; }
int World::local_rank() const { return impl_->local_rank; }
int World::local_size() const { return impl_->local_size; }
int World::gpu() const { return impl_->gpu; }
const std::string& World::bootstrap_name() const { return impl_->boot->name(); }
const rma::Endpoint& World::endpoint() const { return impl_->ep; }

void* World::ptr(const void* sym, int pe) const {
  const Impl& m = *impl_;
  const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(sym) - m.heap);
  if (pe < 0 || pe >= m.size || static_cast<const std::byte*>(sym) < m.heap + m.user_offset || off >= m.heap_total)
    return nullptr;
  std::byte* base = m.peer_base[static_cast<std::size_t>(pe)];
  return base == nullptr ? nullptr : base + off;
}

rma::Transport World::transport_to(int pe) const {
  if (pe < 0 || pe >= impl_->size) return Transport::kNone;
  return impl_->transports[static_cast<std::size_t>(pe)];
}

void* World::alloc(std::size_t bytes, std::size_t align) {
  if (align == 0 || (align & (align - 1)) != 0) throw Error("World::alloc: align must be a power of two");
  const std::uint64_t need = bytes == 0 ? 1 : bytes;
  auto& fb = impl_->free_blocks;
  for (auto it = fb.begin(); it != fb.end(); ++it) {
    const std::uint64_t off = it->first, len = it->second;
    const std::uint64_t at = (off + align - 1) & ~static_cast<std::uint64_t>(align - 1);
    if (at < off || at - off > len || need > len - (at - off)) continue;
    fb.erase(it);
    if (at > off) fb[off] = at - off;
    if (at + need < off + len) fb[at + need] = off + len - (at + need);
    impl_->used_blocks[at] = need;
    std::byte* p = impl_->heap + at;
#if GPUVERBS_HAVE_CUDA
    std::optional<detail::DeviceGuard> g;
    if (impl_->gpu_mode()) g.emplace(impl_->gpu);
#endif
    impl_->clear(p, need, "World::alloc: clearing the block");
    return p;
  }
  throw Error("World::alloc: the symmetric heap is exhausted: " + std::to_string(bytes) + " bytes asked, " +
              std::to_string(heap_free()) + " of " + std::to_string(heap_bytes()) +
              " free (in pieces, aligned to " + std::to_string(align) +
              "): raise WorldOptions::heap_bytes (GV_HEAP_BYTES, NVSHMEM_SYMMETRIC_SIZE)");
}

void World::free(void* p) {
  if (p == nullptr) return;
  const std::uint64_t off = static_cast<std::uint64_t>(static_cast<std::byte*>(p) - impl_->heap);
  auto it = impl_->used_blocks.find(off);
  if (static_cast<std::byte*>(p) < impl_->heap || it == impl_->used_blocks.end())
    throw Error("World::free: the pointer is not a block World::alloc returned");
  std::uint64_t start = off, len = it->second;
  impl_->used_blocks.erase(it);
  auto& fb = impl_->free_blocks;
  auto next = fb.lower_bound(start);
  if (next != fb.end() && next->first == start + len) {
    len += next->second;
    next = fb.erase(next);
  }
  if (next != fb.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      fb.erase(prev);
    }
  }
  fb[start] = len;
}

std::size_t World::heap_bytes() const { return impl_->heap_total - impl_->user_offset; }
std::size_t World::heap_free() const {
  std::size_t f = 0;
  for (const auto& [o, n] : impl_->free_blocks) f += n;
  return f;
}

void World::barrier() {
  check();
  impl_->boot->barrier();
}

void World::allgather(const void* mine, void* all, std::size_t bytes) {
  check();
  impl_->boot->allgather(mine, all, bytes);
}

// The provider's asynchronous errors (the GPU engine stopped, a CQ overran, a QP failed
// outside a completion) end this rank's waits (the provider raised its abort, or the lane's
// completions carry the error); the World names them as its failure, so check() and describe()
// say why a kernel saw kAborted.
void World::Impl::take_device_events() {
  if (!dev) return;
  while (auto e = dev->poll_async_event())
    on_failure("rank " + std::to_string(rank) + ": the software HCA reported: " + e->message);
}

void World::check() const {
  impl_->take_device_events();
  std::lock_guard lk(impl_->fail_mu);
  if (!impl_->failure.empty()) throw Error(impl_->failure);
}

std::string World::describe() const {
  impl_->take_device_events();
  const Impl& m = *impl_;
  std::string out = "rank " + std::to_string(m.rank) + " of " + std::to_string(m.size) + " (" + m.boot->name() + ")\n";
  {
    std::lock_guard lk(m.fail_mu);
    if (!m.failure.empty()) out += "  failed: " + m.failure + "\n";
  }
  const std::uint32_t L = m.opt.ib_lanes;
  for (int q = 0; q < m.size; ++q) {
    const auto i = static_cast<std::size_t>(q);
    out += "  peer " + std::to_string(q) + ": " + rma::to_string(m.transports[i]) + "\n";
    if (m.transports[i] != Transport::kIb) continue;
    for (std::uint32_t l = 0; l < L; ++l) {
      const std::size_t k = i * L + l;
      const ib::QpHandle qh = m.qps[k]->device_handle();
      const ib::CqHandle ch = m.cqs[k]->device_handle();
      ib::QpCounters qs{};
      ib::CqCounters cs{};
      rma::LaneState ls{};
      auto fetch = [&](void* dst, const void* src, std::size_t n) {
#if GPUVERBS_HAVE_CUDA
        if (m.gpu_mode()) {
          detail::DeviceGuard g(m.gpu);
          if (cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, m.stream) != cudaSuccess ||
              cudaStreamSynchronize(m.stream) != cudaSuccess)
            (void)cudaGetLastError();
          return;
        }
#endif
        std::memcpy(dst, src, n);  // a racy snapshot, for diagnosis only
      };
      fetch(&qs, qh.state, sizeof(qs));
      fetch(&cs, ch.state, sizeof(cs));
      fetch(&ls, m.lane_states + k, sizeof(ls));
      char line[320];
      std::snprintf(line, sizeof(line),
                    "    lane %u: QP 0x%x sq reserved %llu published %llu completed %llu (ring %u WQEBBs); checked to %llu; "
                    "CQ 0x%x taken %llu; %s%s\n",
                    l, qh.qpn, static_cast<unsigned long long>(qs.sq.reserved), static_cast<unsigned long long>(qs.sq.published),
                    static_cast<unsigned long long>(qs.sq.completed), qh.sq_bbs, static_cast<unsigned long long>(ls.done), ch.cqn,
                    static_cast<unsigned long long>(cs.claimed), ls.first_bad ? "failed at WQEBB " : "healthy",
                    ls.first_bad ? (std::to_string(ls.first_bad - 1) + " (" + to_string(static_cast<Status>(ls.status)) +
                                    ", syndrome " + std::to_string(ls.syndrome) + ")").c_str()
                                 : "");
      out += line;
    }
  }
  return out;
}

void World::abort() { impl_->raise_abort(); }

void World::quiesce() {
  std::lock_guard lk(engines().mu);
  if (impl_->dev && !impl_->user_quiesced) {
    impl_->dev->quiesce();
    impl_->user_quiesced = true;
  }
}
void World::resume() {
  std::lock_guard lk(engines().mu);
  if (impl_->dev && impl_->user_quiesced) {
    impl_->dev->resume();
    impl_->user_quiesced = false;
  }
}

}  // namespace gv
