// gpuverbs host setup: open a provider, register memory, create CQs and QPs, connect them,
// and hand kernels (or host threads) plain device handles.
//
//   auto dev = gv::Device::open("soft");
//   auto pd  = dev->alloc_pd();
//   auto buf = dev->alloc(1 << 20);                          // shareable with other processes
//   auto mr  = pd->reg_mr(buf, 1 << 20, gv::kLocalWrite | gv::kRemoteWrite);
//   auto cq  = dev->create_cq(256);
//   auto qp  = pd->create_qp(*cq, *cq, {});
//   qp->connect(peer_info);                                  // RESET -> INIT -> RTR -> RTS
//   kernel<<<...>>>(qp->device_handle(), cq->device_handle());
//
// Lifetimes: everything created from a Device keeps its provider alive, so the Device may go
// first (its memory, queues and engine stay until the last child is destroyed); a QueuePair /
// CompletionQueue outlives every kernel or thread using its handle.
// Handles: a QP's after it is connected (device_handle() refuses a QP in RESET or INIT, whose
// work would never execute); a CQ's after the QPs that complete into it are created (the handle
// records which queues the CQ retires; create_qp() refuses to bind a queue to a CQ whose handle
// was taken without it). A CQ completes at most one send queue and one receive queue.
// Errors: every call validates its arguments and throws gv::Error with a message that names
// the problem and what to do; nothing here calls exit().
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <gpuverbs/types.hpp>
#include <gpuverbs/ib/handles.hpp>
#include <gpuverbs/ib/poll.hpp>

namespace gv {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* to_string(QpState s);

/// An asynchronous error raised by the provider outside any completion.
struct AsyncEvent {
  /// kEngineFailed: the GPU engine ended or stopped advancing; the device raised abort.
  /// kCopyFailed: a CUDA copy of the CPU engine (GPU memory) failed; the WQE of QP `number`
  /// completed with a local protection error and the QP is in error.
  /// kPortError / kDeviceFatal: a NIC's port went down or the HCA failed (mlx5).
  enum class Type : std::uint32_t {
    kCqOverrun = 1, kQpFatal = 2, kEngineFailed = 3, kCopyFailed = 4, kPortError = 5, kDeviceFatal = 6
  };
  Type type;
  std::uint32_t number;   ///< CQN or QPN
  std::string message;    ///< what happened and what to do
};

struct DeviceOptions {
  /// Bytes of provider memory (rings, tables, and Device::alloc buffers). Reserved sparsely:
  /// pages cost memory only when touched (or when mapped to the GPUs, which pins them).
  std::size_t arena_bytes = std::size_t{64} << 20;
  /// Make the provider's memory (queues, doorbells, Device::alloc buffers) usable from GPU
  /// kernels: pinned and mapped into every GPU at the same addresses, so device handles work
  /// in kernels. Needs a CUDA build and a GPU; open() says so if either is missing.
  bool map_to_gpus = false;
  /// Who executes the work requests of the soft provider:
  /// - kCpu: a host thread; queues and Device::alloc memory in (shareable) host memory. MRs
  ///   may cover host memory and GPU memory of this process (cudaMalloc, any GPU): the thread
  ///   moves GPU bytes with cudaMemcpyAsync on its own non-blocking stream, so a user kernel
  ///   that waits for a completion on any stream cannot block it. Other processes' private
  ///   memory stays unreachable (only Device::alloc memory is shared).
  /// - kGpu: a persistent kernel on GPU `gpu` (`engine_warps` warps, in blocks of up to 8, on
  ///   its own non-blocking stream, for the device's lifetime; every lane of a warp serves
  ///   its own QPs, up to 32 at once per warp, the QPs created one after the other going to
  ///   different warps, and a work request that moves over 512 bytes is executed by its
  ///   whole warp); queues, tables and Device::alloc memory in that GPU's memory, shareable
  ///   with other processes through CUDA IPC. Kernels post and poll; host threads cannot use
  ///   the handles. While it runs, a device-wide synchronisation (cudaDeviceSynchronize,
  ///   cudaFree of device memory) would wait for it forever: call Device::quiesce() first and
  ///   Device::resume() after.
  enum class Engine : std::uint8_t { kCpu, kGpu } engine = Engine::kCpu;
  int gpu = 0;                       ///< kGpu: the CUDA device that holds and runs it; kCpu with
                                     ///< map_to_gpus: the GPU whose NUMA node holds the memory
  std::uint32_t engine_warps = 4;    ///< kGpu: 1..32

  // mlx5 (a ConnectX HCA through rdma-core). map_to_gpus above picks who uses the handles:
  // kernels (queues mapped for the GPUs, counters in GPU memory) or host threads.
  /// HCA port, 1-based; 0: the first ACTIVE port. GV_IB_PORT overrides.
  std::uint8_t ib_port = 0;
  /// Source GID index; -1: 0 on InfiniBand, on RoCE the first RoCE v2 GID (IPv4-mapped first).
  /// GV_IB_GID_INDEX overrides.
  int ib_gid_index = -1;
  /// P_Key index of the QPs (0 is the default partition; partitioned fabrics need theirs).
  std::uint16_t ib_pkey_index = 0;
  /// Where the mlx5 provider keeps rings and doorbell records: kHost (host memory rdma-core
  /// allocates, mapped for the GPUs) or kGpu (memory of GPU `gpu`, the CQ and QP made with PRM
  /// commands through DEVX; needs map_to_gpus and a doorbell the GPU rings). GV_MLX5_QUEUES=host|gpu
  /// overrides. describe() says which.
  enum class Queues : std::uint8_t { kHost, kGpu } ib_queues = Queues::kHost;
};

struct QpCaps {
  std::uint32_t sq_depth = 128;     ///< send WQEs of the largest size the caps allow; 1..4096
  std::uint32_t rq_depth = 128;     ///< receive WQEs; 1..4096
  std::uint32_t max_send_sge = 1;   ///< 1..16
  std::uint32_t max_recv_sge = 1;   ///< 1..16
  std::uint32_t max_inline = 64;    ///< bytes; 0..512
};

/// What a peer needs to connect to a QP: plain bytes, send it through any channel.
struct QpInfo {
  std::uint32_t qpn = 0;
  std::int32_t pid = 0;
  char arena[64] = {};
  unsigned char ipc[64] = {};  ///< GPU engine: CUDA IPC handle of the arena, for other processes
  // A NIC (mlx5): how the peer's HCA reaches this QP over the fabric.
  std::uint32_t psn = 0;        ///< first PSN this QP sends (the peer expects it)
  std::uint16_t lid = 0;        ///< InfiniBand: the port's LID (0 on RoCE)
  std::uint8_t port = 0;        ///< HCA port, 1-based (0: soft)
  std::uint8_t gid_index = 0;   ///< the source GID index this QP sends from
  std::uint8_t mtu = 0;         ///< the port's active MTU, IB encoding (1 = 256 .. 5 = 4096)
  std::uint8_t link_layer = 0;  ///< 1 InfiniBand, 2 Ethernet (RoCE), as IBV_LINK_LAYER_*
  std::uint8_t reserved[2] = {};
  unsigned char gid[16] = {};   ///< the port's GID at gid_index (RoCE v2 needs it; IB may)
};

struct ConnectAttr {
  std::uint32_t access = kRemoteWrite | kRemoteRead | kRemoteAtomic;  ///< granted to the peer
  std::uint8_t min_rnr_timer = 12;  ///< IB encoding 0..31 (12 = 0.64 ms): how long peers back off
  std::uint8_t rnr_retry = 6;       ///< 0..7; 7 = retry forever
};

class ProtectionDomain;
class MemoryRegion;
class CompletionQueue;
class QueuePair;

namespace detail {
class Provider;
struct PdImpl;
struct MrImpl;
struct CqImpl;
struct QpImpl;
}  // namespace detail

class Device {
 public:
  /// Open a provider by name. "soft" (the software HCA) is always available; "mlx5" opens the
  /// first ConnectX device with an ACTIVE port (GV_IB_HCA names another), "mlx5_0" (any RDMA
  /// device name) that device. Throws, saying how to list devices, when there is none.
  static std::unique_ptr<Device> open(std::string_view name = "soft", const DeviceOptions& = {});
  /// Names open() accepts on this machine: "soft", then every mlx5 device with an ACTIVE port.
  static std::vector<std::string> list();

  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const;
  /// One line: the provider and where queues, doorbell records and alloc() memory live — for a
  /// soft device mapped into the GPUs, on which NUMA node (the GPU's) or why not; for a NIC the
  /// device, port, link layer, GID index and who rings the doorbells (the GPU, or a host thread).
  std::string describe() const;
  std::unique_ptr<ProtectionDomain> alloc_pd();
  /// depth 1..4194304, rounded up to a power of two; its ring takes 64 bytes an entry of the
  /// soft device's arena (a CQ that does not fit is refused, naming DeviceOptions::arena_bytes).
  std::unique_ptr<CompletionQueue> create_cq(std::uint32_t depth);

  /// Memory other processes' QPs can reach once registered (64-byte aligned). Throws when
  /// `bytes` does not fit in the arena (the message gives its size and what to set).
  void* alloc(std::size_t bytes);
  /// Free memory from alloc(); throws if a memory region still covers it.
  void free(void* p);

  /// The next asynchronous error, if any (CQ overrun, fatal QP error).
  std::optional<AsyncEvent> poll_async_event();

  /// Raise the abort flag every handle of this device watches: all device-side waits end
  /// with Status::kAborted. Irreversible for this device.
  void abort();

  /// GPU engine: stop the engine kernel (its queues keep their state) so that device-wide
  /// synchronising CUDA calls can return; work posted meanwhile waits for resume(). Nothing
  /// to do for the CPU engine. Not reentrant: one quiesce() per resume(). resume() waits up to
  /// 5 s for the engine to start and throws if kernels filling the GPU keep it out (call it
  /// again once they have ended). Both throw once the engine failed (AsyncEvent::kEngineFailed).
  void quiesce();
  void resume();

 private:
  explicit Device(std::unique_ptr<detail::Provider> p);
  std::shared_ptr<detail::Provider> provider_;  ///< shared with every child (see Lifetimes)
  friend class ProtectionDomain;
};

class ProtectionDomain {
 public:
  ~ProtectionDomain();
  /// Register [addr, addr + length) with the given access. Remote write or atomic access
  /// requires kLocalWrite too (as in ibv_reg_mr). Refused where ibv_reg_mr fails: a range that
  /// wraps around the address space; host memory with a page not mapped in this process, or
  /// not writable under write access (EFAULT there; probed once, at registration); in the
  /// device's own memory, a range not inside one live Device::alloc block. What the engine reaches: see
  /// DeviceOptions::engine. Atomics (FETCH_ADD, CMP_SWP) are atomic with respect to every other
  /// verbs atomic of this process (IBV_ATOMIC_HCA); on GPU memory under the CPU engine they are
  /// read-modify-writes through CUDA copies, not atomic with respect to GPU threads' own
  /// atomics or stores to the same word. Deregister before freeing the memory, and only when
  /// no work request targeting it is in flight.
  std::unique_ptr<MemoryRegion> reg_mr(void* addr, std::size_t length, std::uint32_t access);
  /// A QP whose send queue completes into `send_cq` and receive queue into `recv_cq` (the same
  /// CQ may take both). A CQ completes at most one send queue and one receive queue: its handle
  /// frees their ring space as completions are polled, so give each QP its own send CQ.
  std::unique_ptr<QueuePair> create_qp(CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                       const QpCaps& caps = {});
  std::uint32_t pdn() const;

 private:
  friend class Device;
  explicit ProtectionDomain(std::unique_ptr<detail::PdImpl> impl);
  std::unique_ptr<detail::PdImpl> impl_;
};

class MemoryRegion {
 public:
  /// Deregisters: later uses of the keys fail with protection errors. On a soft device whose
  /// QPs were ever connected it returns after 200 us, once no peer's engine still uses the
  /// translation it kept (soft::kKeptNs); likewise ~QueuePair and modify_to_error.
  ~MemoryRegion();
  std::uint32_t lkey() const;
  std::uint32_t rkey() const;
  void* addr() const;
  std::size_t length() const;

 private:
  friend class ProtectionDomain;
  explicit MemoryRegion(std::unique_ptr<detail::MrImpl> impl);
  std::unique_ptr<detail::MrImpl> impl_;
};

class CompletionQueue {
 public:
  ~CompletionQueue();
  std::uint32_t cqn() const;
  std::uint32_t entries() const;  ///< depth rounded up to a power of two
  /// The handle kernels poll with. Take it after creating the QPs that complete into this CQ;
  /// throws while none does.
  ib::CqHandle device_handle() const;

 private:
  friend class Device;
  friend class ProtectionDomain;
  explicit CompletionQueue(std::shared_ptr<detail::CqImpl> impl);
  std::shared_ptr<detail::CqImpl> impl_;
};

class QueuePair {
 public:
  ~QueuePair();
  std::uint32_t qpn() const;
  QpState state() const;
  QpInfo info() const;

  void modify_to_init(std::uint32_t access = kRemoteWrite | kRemoteRead | kRemoteAtomic);
  void modify_to_rtr(const QpInfo& remote, std::uint8_t min_rnr_timer = 12);
  void modify_to_rts(std::uint8_t rnr_retry = 6);
  void modify_to_error();
  /// RESET -> INIT -> RTR -> RTS towards `remote`. A QP connects once.
  void connect(const QpInfo& remote, const ConnectAttr& attr = {});

  /// The handle kernels post with; throws unless the QP is connected (RTR, RTS, or ERR after).
  ib::QpHandle device_handle() const;

 private:
  friend class ProtectionDomain;
  explicit QueuePair(std::unique_ptr<detail::QpImpl> impl);
  std::unique_ptr<detail::QpImpl> impl_;
};

/// "QP 0x41 WQE 12: remote access error (syndrome 0x13)": for printing completions.
std::string describe(const ib::Completion& c);

}  // namespace gv
