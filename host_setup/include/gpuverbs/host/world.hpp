// gpuverbs World: N ranks, a symmetric heap on each, and the rma endpoint kernels (or host
// threads) use to reach the others.
//
//   auto world = gv::World::init();                       // from the launch environment
//   auto* buf  = static_cast<float*>(world->alloc(n * sizeof(float)));   // same offset on every rank
//   kernel<<<grid, block>>>(world->endpoint(), buf);       // gv::rma::put(ep, buf, ..., peer)
//
// Ranks come from, in this order:
//   - MPI, when gpuverbs is built with it and the process was started by mpirun (or MPI is
//     already initialised): MPI finds the ranks, the collectives and liveness then run over the
//     TCP rendezvous (rank 0 listens on a port of its host; the others must reach it);
//   - the built-in TCP rendezvous: GV_RANK, GV_SIZE and GV_ROOT=host:port (rank 0 listens
//     there), e.g. as `gvrun -n 4 ./app` sets them;
//   - otherwise a single rank.
// World::create_local(n) makes n ranks in this process instead (rank i on GPU i % GPUs, or on
// host threads with Memory::kHost).
//
// Transports per peer: kSelf for this rank, kP2p where the peer's heap can be mapped here (the
// same GPU, a GPU with peer access, CUDA IPC on this host; shared memory for host ranks), kIb
// otherwise (the software HCA: the GPU engine for GPU heaps, the CPU engine for host heaps;
// WorldOptions::ib_engine chooses).
// WorldOptions::transport (or GV_TRANSPORT=p2p|ib) forces one.
//
// Failures (the rma side: the table in <gpuverbs/rma.hpp>):
//   failure                          host calls (check, barrier,      the rank's rma          left behind
//                                    allgather)                       operations
//   a collective step runs past      throw, naming the ranks that     unaffected              every later collective
//   GV_BOOTSTRAP_TIMEOUT (60 s)      did not arrive                                           throws too
//   a peer's process dies (gvrun     throw, naming the dead rank,     kAborted (waits end,    ~World waits for nobody:
//   or mpirun: the TCP rendezvous    within about a second            new ones refused)       its last collective fails
//   beside MPI notices it)                                                                    at once; an MPI the World
//                                                                                             started is not finalized
//   World::abort()                   throw "World::abort() was        kAborted, every         irreversible; ~World waits
//                                    called"                          transport               for nobody (the rank has
//                                                                                             left: peers see it go as
//                                                                                             they see a death)
//   the software HCA's asynchronous  throw with the reason            kAborted                the HCA stopped
//   error (engine stopped, overrun)
// Bad arguments to host calls (null buffers, impossible sizes, bad environment values) throw an
// Error saying what to pass; nothing is sent. Nothing here calls exit(), and no destructor
// waits without a bound (the last collective has the bootstrap's time limit).
//
// Lifetime: the World outlives every kernel or thread using its endpoint and heap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/rma/endpoint.hpp>

namespace gv {

struct WorldOptions {
  /// Bytes of symmetric heap per rank (user allocations; the rma layer's own words come on top).
  /// GV_HEAP_BYTES (or NVSHMEM_SYMMETRIC_SIZE, with K/M/G suffixes) overrides the default.
  std::size_t heap_bytes = std::size_t{64} << 20;
  /// Who uses the endpoint and where heaps live: kernels on GPUs (kGpu), host threads (kHost),
  /// or kAuto: kGpu when a GPU is present, else kHost.
  enum class Memory : std::uint8_t { kAuto, kGpu, kHost } memory = Memory::kAuto;
  /// kNone = choose per peer (see above); kP2p or kIb force one for every peer.
  rma::Transport transport = rma::Transport::kNone;
  /// ib: queue pairs per peer (a power of two, 1..32; GV_IB_LANES overrides it) and their depth
  /// in WQEs.
  std::uint32_t ib_lanes = 4;
  std::uint32_t ib_depth = 128;
  /// ib: who executes the software HCA's work requests (GV_IB_ENGINE=auto|cpu|gpu overrides).
  /// kAuto: the GPU engine for GPU heaps, the CPU engine for host heaps. kCpu on GPU ranks: a
  /// host thread, with the heaps in pinned host memory mapped into the GPU (kernels reach them
  /// over PCIe): nothing resident runs on the GPU, so a device-wide synchronisation
  /// (cudaDeviceSynchronize) never waits for an engine. kGpu: a resident engine kernel, fast,
  /// but cudaDeviceSynchronize and cudaFree wait for it forever unless quiesce() comes first.
  enum class Engine : std::uint8_t { kAuto, kCpu, kGpu } ib_engine = Engine::kAuto;
  /// ib: the software HCA engine's warps (GPU engine), see DeviceOptions::engine_warps.
  std::uint32_t ib_engine_warps = 4;
  /// kGpu: the CUDA device of this rank; -1 = local rank modulo the visible GPUs.
  int gpu = -1;
  /// Bound of every wait an rma operation makes (kTimeout after it). Generous: a peer may
  /// compute for long before it signals; a dead peer ends waits through the abort flag much
  /// sooner. GV_WAIT_TIMEOUT (seconds) overrides it.
  Budget budget{60'000'000'000ull};
};

class World {
 public:
  /// One rank of the job this process was launched in (MPI, GV_* variables, or alone).
  static std::unique_ptr<World> init(const WorldOptions& = {});
  /// `ranks` ranks in this process, made together (on threads of their own). Host collectives
  /// (barrier) must then be called from one thread per rank; alloc/free need not be.
  static std::vector<std::unique_ptr<World>> create_local(int ranks, const WorldOptions& = {});

  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const;
  int size() const;
  /// Ranks on this host and this rank among them.
  int local_rank() const;
  int local_size() const;
  /// kGpu: the CUDA device of this rank; -1 for host ranks.
  int gpu() const;
  bool on_gpu() const { return gpu() >= 0; }
  rma::Transport transport_to(int pe) const;
  /// rma::ptr on the host: PE pe's copy of symmetric `sym` in this address space (p2p and
  /// self peers), else null. (The endpoint's tables of a GPU World are GPU memory.)
  void* ptr(const void* sym, int pe) const;
  /// "mpi", "tcp", "local" or "single".
  const std::string& bootstrap_name() const;

  /// The handle kernels (kGpu) or host threads (kHost) take.
  const rma::Endpoint& endpoint() const;

  /// A block of the symmetric heap: every rank that makes the same sequence of alloc/free
  /// calls gets the same offsets. Memory is zeroed. Throws when the heap is exhausted. No
  /// communication: call barrier() before peers write into a new block if they might race
  /// ahead of this rank's use of it.
  void* alloc(std::size_t bytes, std::size_t align = 256);
  void free(void* p);
  std::size_t heap_bytes() const;
  std::size_t heap_free() const;

  /// Host barrier over all ranks (the bootstrap); throws if a rank died or did not arrive.
  void barrier();
  /// Every rank contributes `bytes` at `mine`; `all` gets size() * bytes, in rank order. Throws
  /// (sending nothing) when a buffer is null with bytes > 0 or size() * bytes exceeds 1 TiB.
  void allgather(const void* mine, void* all, std::size_t bytes);

  /// Throws if a peer died (its message names the rank) or this rank's software HCA reported
  /// an asynchronous error (its GPU engine stopped, a CQ overran, a QP failed outside a
  /// completion): either ends this rank's waits with kAborted, and the message says why.
  void check() const;
  /// The failure, if any (see check()), then one line per ib lane: its QP, send-queue counters
  /// (reserved, published, completed; where the queue broke, if a reservation was abandoned:
  /// rma operations on that lane then return kQueueBroken), how far completions are checked,
  /// CQEs taken, and its first error. For diagnosing a stuck or
  /// failing wait; reads the counters while kernels may run.
  std::string describe() const;
  /// End every wait of this rank's endpoint with kAborted, and make every later rma operation
  /// of this rank return kAborted at once; check() throws from now on (irreversible). The rank
  /// has left: ~World then ends without the last collective, whose peers may never come.
  void abort();

  /// GPU engine (ib peers of a kGpu World): see Device::quiesce(). Needed around device-wide
  /// synchronising calls (cudaDeviceSynchronize, cudaFree) while the engine runs.
  void quiesce();
  void resume();

  struct Impl;

 private:
  explicit World(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gv
