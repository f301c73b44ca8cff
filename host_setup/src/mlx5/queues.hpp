// Where the mlx5 provider's queues come from: the seam between the provider (discovery, memory
// registration, connection, device handles, doorbells) and whoever builds CQ and QP rings.
//
// Two placements stand behind it:
// - kHost: rdma-core builds the queues (ibv_create_cq_ex, mlx5dv_create_qp); libmlx5 puts rings
//   and doorbell records in host memory and mlx5dv_init_obj exposes them (host_queues.cpp).
// - kGpu: rings and records in GPU memory registered as DEVX UMEM, CQ and QP created with PRM
//   commands (the DEVX path; it implements this interface without changing the provider).
//
// A factory hands out queues as views of plain addresses and sizes (QpRings / CqRings: what
// mlx5dv_init_obj reports, or what DEVX allocated) plus the state changes of a QP, expressed in
// fabric terms (InitAttr / RtrAttr / RtsAttr, connect.hpp) so each placement encodes them its
// own way (ibv_modify_qp, or DEVX RST2INIT / INIT2RTR / RTR2RTS).
// Internal to host_setup. Every call throws gv::Error with a message that says what to do.
#pragma once
#include <cstdint>
#include <memory>

#include <infiniband/verbs.h>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail::mlx5 {

/// Where a queue's rings and doorbell records live.
enum class Placement : std::uint8_t {
  kHost,  ///< host memory, mapped for GPUs with cudaHostRegister (rdma-core builds the queues)
  kGpu,   ///< GPU memory, registered as DEVX UMEM (PRM commands build the queues)
};
const char* to_string(Placement p);

/// One CQ as the device API reads it. Addresses are the process's own (host virtual addresses
/// for kHost, device addresses for kGpu).
struct CqRings {
  std::uint32_t cqn = 0;
  void* buf = nullptr;            ///< cqe_cnt * cqe_size bytes
  std::uint32_t cqe_cnt = 0;      ///< a power of two
  std::uint32_t cqe_size = 0;     ///< 64 (the device API reads 64-byte CQEs only)
  std::uint32_t* dbrec = nullptr; ///< {set_ci, arm}, big-endian
  Placement placement = Placement::kHost;
};

/// One RC QP as the device API writes it.
struct QpRings {
  std::uint32_t qpn = 0;
  void* sq_buf = nullptr;
  std::uint32_t sq_wqe_cnt = 0;   ///< in 64-byte WQEBBs; a power of two
  std::uint32_t sq_stride = 0;    ///< 64
  void* rq_buf = nullptr;
  std::uint32_t rq_wqe_cnt = 0;   ///< a power of two
  std::uint32_t rq_stride = 0;    ///< bytes per receive WQE; a power of two, >= 16
  std::uint32_t* dbrec = nullptr; ///< {receive counter, send counter}, big-endian
  void* bf_reg = nullptr;         ///< the doorbell (BlueFlame) register in the UAR page
  std::uint32_t bf_size = 0;      ///< BlueFlame buffer size; 0: doorbell only
  Placement placement = Placement::kHost;
};

/// What create_qp asks of a factory: the caller's caps (already validated by verbs.cpp) and PD.
struct QpRequest {
  ibv_pd* pd = nullptr;
  QpCaps caps;
};

/// RESET -> INIT.
struct InitAttr {
  std::uint8_t port = 1;
  std::uint16_t pkey_index = 0;
  std::uint32_t access = 0;  ///< IBV_ACCESS_REMOTE_* granted to the peer (the same bits as gv::Access)
};

/// The address of the peer: a LID on InfiniBand, a GID (global route) on RoCE.
struct PathAttr {
  std::uint8_t port = 1;
  std::uint16_t dlid = 0;
  std::uint8_t sl = 0;
  bool global = false;
  std::uint8_t dgid[16] = {};
  std::uint8_t sgid_index = 0;
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
};

/// INIT -> RTR.
struct RtrAttr {
  std::uint32_t remote_qpn = 0;
  std::uint32_t rq_psn = 0;           ///< the peer's first send PSN
  std::uint8_t path_mtu = 0;          ///< IB encoding (IBV_MTU_*: 1 = 256 .. 5 = 4096)
  std::uint8_t max_dest_rd_atomic = 0;
  std::uint8_t min_rnr_timer = 12;
  PathAttr path;
};

/// RTR -> RTS.
struct RtsAttr {
  std::uint32_t sq_psn = 0;           ///< our first send PSN (what the peer put in rq_psn)
  std::uint8_t timeout = 14;          ///< 4.096 us * 2^timeout per try
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 6;
  std::uint8_t max_rd_atomic = 0;
};

class CqQueue {
 public:
  virtual ~CqQueue() = default;
  virtual const CqRings& rings() const = 0;
};

/// A QP's rings and its state machine.
class QpQueue {
 public:
  virtual ~QpQueue() = default;
  virtual const QpRings& rings() const = 0;
  /// The state the HCA holds (it moves a QP to ERR on its own after an error completion).
  virtual QpState query_state() const = 0;
  virtual void to_init(const InitAttr& a) = 0;
  virtual void to_rtr(const RtrAttr& a) = 0;
  virtual void to_rts(const RtsAttr& a) = 0;
  virtual void to_error() = 0;
};

/// Builds the queues of one opened device (one ibv_context) in one placement. The queues a
/// factory returns must be destroyed before it; a QP before the CQs it completes into.
class QueueFactory {
 public:
  virtual ~QueueFactory() = default;
  virtual Placement placement() const = 0;
  /// A CQ of at least `entries` 64-byte CQEs (a power of two).
  virtual std::unique_ptr<CqQueue> create_cq(std::uint32_t entries) = 0;
  /// An RC QP in RESET with the caps asked for; `send` and `recv` were made by this factory.
  virtual std::unique_ptr<QpQueue> create_qp(const QpRequest& req, CqQueue& send, CqQueue& recv) = 0;
};

/// rdma-core builds the queues in host memory (host_queues.cpp).
std::unique_ptr<QueueFactory> make_host_queue_factory(ibv_context* ctx);

}  // namespace gv::detail::mlx5
