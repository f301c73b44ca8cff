#include "queues.hpp"

#include <algorithm>
#include <bit>
#include <vector>

#include <gpuverbs/ib/cqe.hpp>
#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/ring.hpp>

#include "../../provider.hpp"

namespace gv::mlx5::devx {
namespace dm = detail::mlx5;
namespace {

constexpr std::size_t kQueueAlign = std::size_t{64} << 10;  // GPU pages: 64 KiB
/// Queue memory is registered in 64 KiB pages; cqc/qpc.log_page_size count from 4 KiB.
constexpr std::uint32_t kLogPageSize = 16 - prm::kPageShiftBase;
/// A record's offset in its queue memory: after the ring, on its own cache line.
constexpr std::size_t kRecordAlign = 64;

constexpr std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }
std::uint32_t log2u(std::uint32_t v) { return static_cast<std::uint32_t>(std::countr_zero(v)); }
std::uint32_t log2_ceil(std::uint32_t v) { return v <= 1 ? 0 : static_cast<std::uint32_t>(std::bit_width(v - 1)); }

/// RoCE v2 UDP source port of a flow label (rdma-core's ibv_flow_label_to_udp_sport: the
/// label's 20 bits folded into 14, in 0xC000..0xFFFF); without a label, spread by QP pair.
std::uint16_t udp_sport(std::uint32_t flow_label, std::uint32_t local_qpn, std::uint32_t remote_qpn) {
  std::uint32_t fl = flow_label ? flow_label : (local_qpn ^ remote_qpn);
  fl = (fl & 0x3fff) ^ ((fl & 0xfc000) >> 14);
  return static_cast<std::uint16_t>(0xc000 | fl);
}

}  // namespace

const char* to_string(UarType t) {
  switch (t) {
    case UarType::kNcDedicated: return "nc_dedicated";
    case UarType::kNc: return "nc";
    case UarType::kBf: return "bf";
  }
  return "?";
}

/// What a CQ and a QP both hold: queue memory with its UMEM, a UAR, and the DEVX object, released
/// in reverse order (also when a constructor throws halfway).
struct DevxResources {
  explicit DevxResources(GpuQueueFactory& factory) : f(factory) {}
  ~DevxResources() {
    if (obj) (void)f.seam_.obj_destroy(obj);
    if (uar.handle) f.seam_.free_uar(uar);
    f.release(mem);
  }
  DevxResources(const DevxResources&) = delete;
  DevxResources& operator=(const DevxResources&) = delete;

  /// CREATE_CQ / CREATE_QP; returns the object's number (cqn and qpn share their place in the
  /// outputs), or throws with the command's status and syndrome.
  std::uint32_t create(std::span<const std::uint8_t> in, const char* name) {
    ShortOut out{};
    const int err = f.seam_.obj_create(in, out, &obj);
    if (err != 0 || read_status(out).status != 0) throw Error(describe_failure(name, out, err));
    static_assert(prm::create_cq_out::cqn.bit == prm::create_qp_out::qpn.bit);
    return static_cast<std::uint32_t>(prm::get(out, prm::create_cq_out::cqn));
  }

  GpuQueueFactory& f;
  GpuQueueFactory::Memory mem;
  Uar uar;
  void* obj = nullptr;
};

/// A CQ in GPU memory: ring at 0, record after it, one UMEM; its UAR is only named in CREATE_CQ.
class GpuCq final : public dm::CqQueue {
 public:
  GpuCq(GpuQueueFactory& f, std::uint32_t entries) : r_(f) {
    const std::size_t ring = std::size_t{entries} * ib::mlx5::kCqeSize;
    r_.mem = f.alloc_registered(ring + kRecordAlign, "CQ");
    // Every CQE invalid before the NIC's first lap: no poller takes zeros for a completion.
    const std::vector<ib::mlx5::Cqe> invalid(entries, ib::make_invalid_cqe());
    f.seam_.write_queue_memory(r_.mem.base, invalid.data(), ring);
    r_.uar = f.alloc_uar("CQ");
    CqParams p;
    p.log_cq_size = log2u(entries);
    p.uar_page = r_.uar.page_id;
    p.eqn = f.eqn_;
    p.log_page_size = kLogPageSize;
    p.cq_umem_id = r_.mem.umem.id;
    p.dbr_umem_id = r_.mem.umem.id;
    p.dbr_offset = ring;
    p.overrun_ignore = f.opt_.cq_overrun_ignore;
    rings_.cqn = r_.create(build_create_cq(p), "CREATE_CQ");
    rings_.buf = r_.mem.base;
    rings_.cqe_cnt = entries;
    rings_.cqe_size = ib::mlx5::kCqeSize;
    rings_.dbrec = reinterpret_cast<std::uint32_t*>(static_cast<std::byte*>(r_.mem.base) + ring);
    rings_.placement = dm::Placement::kGpu;
  }
  const dm::CqRings& rings() const override { return rings_; }

 private:
  DevxResources r_;
  dm::CqRings rings_;
};

/// An RC QP in GPU memory: RQ at 0, SQ right after it (on a WQEBB), record after the SQ.
class GpuQp final : public dm::QpQueue {
 public:
  GpuQp(GpuQueueFactory& f, const dm::QpRequest& req, const dm::CqRings& send, const dm::CqRings& recv)
      : f_(f), pd_(req.pd), r_(f) {
    const HcaCaps& caps = f_.caps_;
    const std::uint32_t sq_bbs = ::gv::detail::sq_wqebbs(req.caps);
    const auto rq_wqes = static_cast<std::uint32_t>(ib::round_up_pow2(req.caps.rq_depth));
    const std::uint32_t rq_shift = 4 + ib::log2_pow2(ib::round_up_pow2(req.caps.max_recv_sge));
    if (log2u(sq_bbs) > caps.log_max_qp_sz || log2u(rq_wqes) > caps.log_max_qp_sz)
      throw Error("mlx5 GPU placement: a QP of " + std::to_string(sq_bbs) + " send WQEBBs and " +
                  std::to_string(rq_wqes) + " receive WQEs exceeds the device's 2^" +
                  std::to_string(caps.log_max_qp_sz) + ": ask for smaller depths");
    std::uint32_t pdn = 0;
    if (const int err = f_.seam_.pdn(pd_, &pdn))
      throw Error("mlx5dv_init_obj(PD) failed: errno " + std::to_string(err));
    const std::size_t sq_off = round_up(std::size_t{rq_wqes} << rq_shift, ib::mlx5::kSendWqeBB);
    const std::size_t rec_off = round_up(sq_off + std::size_t{sq_bbs} * ib::mlx5::kSendWqeBB, kRecordAlign);
    r_.mem = f_.alloc_registered(rec_off + kRecordAlign, "QP");
    r_.uar = f_.alloc_uar("QP");
    QpParams p;
    p.pdn = pdn;
    p.uar_page = r_.uar.page_id;
    p.cqn_snd = send.cqn;
    p.cqn_rcv = recv.cqn;
    p.log_sq_size = log2u(sq_bbs);
    p.log_rq_size = log2u(rq_wqes);
    p.log_rq_stride = rq_shift - 4;
    p.log_page_size = kLogPageSize;
    p.ts_format = caps.sq_ts_format ? prm::kTsDefault : prm::kTsFreeRunning;
    p.wq_umem_id = r_.mem.umem.id;
    p.dbr_umem_id = r_.mem.umem.id;
    p.dbr_offset = rec_off;
    rings_.qpn = r_.create(build_create_qp(p), "CREATE_QP");
    auto* base = static_cast<std::byte*>(r_.mem.base);
    rings_.rq_buf = base;
    rings_.rq_wqe_cnt = rq_wqes;
    rings_.rq_stride = 1u << rq_shift;
    rings_.sq_buf = base + sq_off;
    rings_.sq_wqe_cnt = sq_bbs;
    rings_.sq_stride = ib::mlx5::kSendWqeBB;
    rings_.dbrec = reinterpret_cast<std::uint32_t*>(base + rec_off);
    rings_.bf_reg = r_.uar.reg_addr;
    rings_.bf_size = r_.uar.type == UarType::kBf ? 1u << caps.log_bf_reg_size : 0;
    rings_.placement = dm::Placement::kGpu;
  }
  const dm::QpRings& rings() const override { return rings_; }

  QpState query_state() const override {
    const QueryQpIn in = build_query_qp(rings_.qpn);
    QueryQpOut out{};
    const int err = f_.seam_.obj_query(r_.obj, in, out);
    if (err != 0 || read_status(out).status != 0)
      throw Error("QP " + detail::hex(rings_.qpn) + ": " + describe_failure("QUERY_QP", out, err));
    return read_qp_state(out);
  }

  void to_init(const dm::InitAttr& a) override {
    Rst2InitParams p;
    p.qpn = rings_.qpn;
    p.port = a.port;
    p.pkey_index = a.pkey_index;
    p.remote_read = a.access & kRemoteRead;
    p.remote_write = a.access & kRemoteWrite;
    p.remote_atomic = a.access & kRemoteAtomic;
    command(build_rst2init(p), "RST2INIT_QP");
  }

  void to_rtr(const dm::RtrAttr& a) override {
    Init2RtrParams p;
    p.qpn = rings_.qpn;
    p.remote_qpn = a.remote_qpn;
    p.mtu = a.path_mtu;  // IBV_MTU_* and the PRM's mtu share the encoding 1..5
    p.log_msg_max = f_.caps_.log_max_msg;
    p.next_rcv_psn = a.rq_psn;
    p.min_rnr_nak = a.min_rnr_timer;
    p.log_rra_max = static_cast<std::uint8_t>(std::min(log2_ceil(a.max_dest_rd_atomic), f_.caps_.log_max_ra_res_qp));
    AddressPath& path = p.path;
    path.port = a.path.port;
    path.roce = f_.caps_.port_type == prm::kPortTypeEth;
    path.rlid = a.path.dlid;
    path.sl = a.path.sl;  // RoCE: the Ethernet priority
    if (path.roce) {
      if (!a.path.global) throw Error("QP " + detail::hex(rings_.qpn) + ": RoCE needs the peer's GID (a global path)");
      std::copy(std::begin(a.path.dgid), std::end(a.path.dgid), path.rgid.begin());
      path.src_addr_index = a.path.sgid_index;
      path.hop_limit = a.path.hop_limit;
      path.traffic_class = a.path.traffic_class;
      path.udp_sport = udp_sport(a.path.flow_label, rings_.qpn, a.remote_qpn);
      if (const int err = f_.seam_.resolve_rmac(pd_, a.path.port, a.path.sgid_index, path.rgid, a.path.hop_limit, &path.rmac))
        throw Error("QP " + detail::hex(rings_.qpn) + ": resolving the peer's MAC through an address handle failed (errno " +
                    std::to_string(err) + "): check the GID index (GV_IB_GID_INDEX; `show_gids` lists them)");
    } else if (a.path.global) {
      throw Error("QP " + detail::hex(rings_.qpn) +
                  ": a global (GRH) path on InfiniBand is not supported by the GPU placement; use a LID");
    }
    command(build_init2rtr(p), "INIT2RTR_QP");
  }

  void to_rts(const dm::RtsAttr& a) override {
    Rtr2RtsParams p;
    p.qpn = rings_.qpn;
    p.next_send_psn = a.sq_psn;
    p.retry_count = a.retry_cnt;
    p.rnr_retry = a.rnr_retry;
    p.ack_timeout = a.timeout;
    p.log_sra_max = static_cast<std::uint8_t>(std::min(log2_ceil(a.max_rd_atomic), f_.caps_.log_max_ra_req_qp));
    command(build_rtr2rts(p), "RTR2RTS_QP");
  }

  void to_error() override { command(build_2err(rings_.qpn), "2ERR_QP"); }

 private:
  template <class In>
  void command(const In& in, const char* name) {
    ShortOut out{};
    const int err = f_.seam_.obj_modify(r_.obj, in, out);
    if (err != 0 || read_status(out).status != 0)
      throw Error("QP " + detail::hex(rings_.qpn) + ": " + describe_failure(name, out, err));
  }
  GpuQueueFactory& f_;
  ibv_pd* pd_;
  DevxResources r_;
  dm::QpRings rings_;
};

GpuQueueFactory::GpuQueueFactory(Seam& seam, const GpuQueueOptions& opt) : seam_(seam), opt_(opt) {
  const auto query = [&](std::uint16_t type, const char* name, void (*read)(std::span<const std::uint8_t>, HcaCaps&)) {
    const QueryHcaCapIn in = build_query_hca_cap(type);
    QueryHcaCapOut out{};
    const int err = seam_.general_cmd(in, out);
    if (err != 0 || read_status(out).status != 0)
      throw Error(describe_failure(name, out, err) +
                  ": DEVX is not usable here (in a container it needs the host's /dev/infiniband devices and "
                  "permission for DEVX commands, e.g. CAP_NET_RAW); the host placement works without it");
    read(out, caps_);
  };
  query(prm::kCapGeneral, "QUERY_HCA_CAP(general)", read_general_caps);
  query(prm::kCapAtomic, "QUERY_HCA_CAP(atomic)", read_atomic_caps);
  if (const std::string why = check_caps(caps_); !why.empty()) throw Error("mlx5 GPU placement: " + why);
  if (opt_.cq_overrun_ignore && !caps_.cq_oi)
    throw Error("mlx5 GPU placement: the device cannot ignore CQ overruns (cq_oi 0): leave cq_overrun_ignore off");
  if (const int err = seam_.query_eqn(opt_.eq_vector, &eqn_))
    throw Error("mlx5dv_devx_query_eqn(" + std::to_string(opt_.eq_vector) + ") failed: errno " + std::to_string(err));
}

std::string GpuQueueFactory::describe() const {
  return "placement gpu: rings and records in GPU memory (DEVX); UMEM " + umem_path_ + "; UAR " + uar_type_ +
         "; CQE version " + std::to_string(caps_.cqe_version) + "; BlueFlame register 2^" +
         std::to_string(caps_.log_bf_reg_size) + " B; 8-byte atomics (endianness mode " +
         std::to_string(caps_.atomic_endianness_mode) + ")";
}

std::unique_ptr<dm::CqQueue> GpuQueueFactory::create_cq(std::uint32_t entries) {
  const std::uint32_t n = static_cast<std::uint32_t>(ib::round_up_pow2(std::max<std::uint32_t>(entries, 2)));
  if (log2u(n) > caps_.log_max_cq_sz)
    throw Error("mlx5 GPU placement: a CQ of " + std::to_string(entries) + " entries exceeds the device's 2^" +
                std::to_string(caps_.log_max_cq_sz));
  return std::make_unique<GpuCq>(*this, n);
}

std::unique_ptr<dm::QpQueue> GpuQueueFactory::create_qp(const dm::QpRequest& req, dm::CqQueue& send,
                                                        dm::CqQueue& recv) {
  if (send.rings().placement != dm::Placement::kGpu || recv.rings().placement != dm::Placement::kGpu)
    throw Error("mlx5 GPU placement: create_qp with CQs of another placement");
  return std::make_unique<GpuQp>(*this, req, send.rings(), recv.rings());
}

GpuQueueFactory::Memory GpuQueueFactory::alloc_registered(std::size_t bytes, const char* what) {
  Memory m;
  m.bytes = round_up(bytes, kQueueAlign);
  m.base = seam_.alloc_queue_memory(m.bytes);
  std::string dmabuf_why;
  int err = seam_.umem_reg_dmabuf(m.base, m.bytes, &m.umem, &dmabuf_why);
  if (err == 0) {
    umem_path_ = "dma-buf";
    return m;
  }
  if (dmabuf_why.empty()) dmabuf_why = "mlx5dv_devx_umem_reg_ex failed: errno " + std::to_string(err);
  err = seam_.umem_reg(m.base, m.bytes, &m.umem);
  if (err == 0) {
    umem_path_ = "nvidia_peermem";
    return m;
  }
  seam_.free_queue_memory(m.base);
  throw Error(std::string("cannot register the GPU memory of a ") + what + " with the NIC: dma-buf: " + dmabuf_why +
              "; nvidia_peermem: mlx5dv_devx_umem_reg failed with errno " + std::to_string(err) +
              " (load it with `modprobe nvidia_peermem`, or use Linux >= 6.1 with an NVIDIA driver that exports "
              "dma-bufs); the host placement needs neither");
}

void GpuQueueFactory::release(Memory& m) {
  if (m.umem.handle) (void)seam_.umem_dereg(m.umem);
  if (m.base) seam_.free_queue_memory(m.base);
  m = Memory{};
}

Uar GpuQueueFactory::alloc_uar(const char* what) {
  Uar u;
  std::string tried;
  for (UarType t : {UarType::kNcDedicated, UarType::kNc, UarType::kBf}) {
    const int err = seam_.alloc_uar(t, &u);
    if (err == 0) {
      u.type = t;
      uar_type_ = to_string(t);
      return u;
    }
    tried += std::string(tried.empty() ? "" : ", ") + to_string(t) + ": errno " + std::to_string(err);
  }
  throw Error(std::string("mlx5dv_devx_alloc_uar for a ") + what + " failed (" + tried + ")");
}

}  // namespace gv::mlx5::devx
