// queues.hpp, placement kHost: rdma-core builds the CQ (mlx5dv_create_cq, 64-byte CQEs, no
// compression) and the RC QP (ibv_create_qp_ex) in host memory; mlx5dv_init_obj exposes their
// rings, records and doorbell register; ibv_modify_qp moves the QP through its states.
#include <cerrno>
#include <cstring>
#include <string>

#include <infiniband/mlx5dv.h>

#include "../provider.hpp"
#include "connect.hpp"
#include "queues.hpp"
#include "translate.hpp"

namespace gv::detail::mlx5 {
namespace {

std::string errno_text(int e) { return std::strerror(e) + std::string(" (errno ") + std::to_string(e) + ")"; }

class HostCq final : public CqQueue {
 public:
  HostCq(ibv_context* ctx, std::uint32_t entries) {
    ibv_cq_init_attr_ex a{};
    a.cqe = entries;
    a.comp_vector = 0;
    a.wc_flags = IBV_WC_STANDARD_FLAGS;
    mlx5dv_cq_init_attr m{};
    m.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
    m.cqe_size = 64;  // the device API reads 64-byte CQEs (libmlx5 may default to 128 on some hosts)
    ibv_cq_ex* cq = mlx5dv_create_cq(ctx, &a, &m);
    if (cq == nullptr)
      throw Error("mlx5: mlx5dv_create_cq(" + std::to_string(entries) + " CQEs of 64 bytes) failed: " + errno_text(errno));
    cq_ = ibv_cq_ex_to_cq(cq);
    mlx5dv_cq dv{};
    mlx5dv_obj obj{};
    obj.cq.in = cq_;
    obj.cq.out = &dv;
    if (const int e = mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ); e != 0) {
      (void)ibv_destroy_cq(cq_);
      throw Error("mlx5: mlx5dv_init_obj(CQ) failed: " + errno_text(e));
    }
    rings_ = cq_rings_from(dv);
    try {
      check_cq_rings(rings_);
    } catch (...) {
      (void)ibv_destroy_cq(cq_);
      throw;
    }
  }
  ~HostCq() override { (void)ibv_destroy_cq(cq_); }
  const CqRings& rings() const override { return rings_; }
  ibv_cq* cq() const { return cq_; }

 private:
  ibv_cq* cq_ = nullptr;
  CqRings rings_;
};

class HostQp final : public QpQueue {
 public:
  HostQp(ibv_context* ctx, const QpRequest& req, HostCq& send, HostCq& recv) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_RC;
    a.send_cq = send.cq();
    a.recv_cq = recv.cq();
    a.cap.max_send_wr = req.caps.sq_depth;
    a.cap.max_recv_wr = req.caps.rq_depth;
    a.cap.max_send_sge = req.caps.max_send_sge;
    a.cap.max_recv_sge = req.caps.max_recv_sge;
    a.cap.max_inline_data = req.caps.max_inline;
    a.sq_sig_all = 0;  // the device API marks signaled WQEs itself (CE in the control segment)
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = req.pd;
    qp_ = ibv_create_qp_ex(ctx, &a);
    if (qp_ == nullptr)
      throw Error("mlx5: ibv_create_qp_ex(RC, sq_depth " + std::to_string(req.caps.sq_depth) + ", rq_depth " +
                  std::to_string(req.caps.rq_depth) + ", max_inline " + std::to_string(req.caps.max_inline) +
                  ") failed: " + errno_text(errno) + "; smaller depths or inline size may fit the device");
    mlx5dv_qp dv{};
    mlx5dv_obj obj{};
    obj.qp.in = qp_;
    obj.qp.out = &dv;
    if (const int e = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP); e != 0) {
      (void)ibv_destroy_qp(qp_);
      throw Error("mlx5: mlx5dv_init_obj(QP) failed: " + errno_text(e));
    }
    rings_ = qp_rings_from(dv, qp_->qp_num);
    try {
      check_qp_rings(rings_);
    } catch (...) {
      (void)ibv_destroy_qp(qp_);
      throw;
    }
  }
  ~HostQp() override { (void)ibv_destroy_qp(qp_); }
  const QpRings& rings() const override { return rings_; }
  QpState query_state() const override {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    if (const int e = ibv_query_qp(qp_, &a, IBV_QP_STATE, &init); e != 0)
      throw Error("mlx5: ibv_query_qp(QP " + hex(qp_->qp_num) + ") failed: " + errno_text(e));
    return from_ibv(a.qp_state);
  }
  void to_init(const InitAttr& a) override { modify(to_ibv(a), "INIT"); }
  void to_rtr(const RtrAttr& a) override { modify(to_ibv(a), "RTR"); }
  void to_rts(const RtsAttr& a) override { modify(to_ibv(a), "RTS"); }
  void to_error() override {
    ibv_qp_attr q{};
    q.qp_state = IBV_QPS_ERR;
    modify({q, IBV_QP_STATE}, "ERR");
  }

 private:
  void modify(std::pair<ibv_qp_attr, int> a, const char* to) {
    if (const int e = ibv_modify_qp(qp_, &a.first, a.second); e != 0)
      throw Error("mlx5: ibv_modify_qp(QP " + hex(qp_->qp_num) + " -> " + to + ") failed: " + errno_text(e) +
                  (std::string(to) == "RTR"
                       ? "; check the peer's QpInfo (QPN, LID or GID), the GID index (GV_IB_GID_INDEX) and the MTU"
                       : ""));
  }
  ibv_qp* qp_ = nullptr;
  QpRings rings_;
};

class HostQueueFactory final : public QueueFactory {
 public:
  explicit HostQueueFactory(ibv_context* ctx) : ctx_(ctx) {}
  Placement placement() const override { return Placement::kHost; }
  std::unique_ptr<CqQueue> create_cq(std::uint32_t entries) override { return std::make_unique<HostCq>(ctx_, entries); }
  std::unique_ptr<QpQueue> create_qp(const QpRequest& req, CqQueue& send, CqQueue& recv) override {
    auto* s = dynamic_cast<HostCq*>(&send);
    auto* r = dynamic_cast<HostCq*>(&recv);
    if (s == nullptr || r == nullptr) throw Error("mlx5: a host-memory QP needs CQs in host memory");
    return std::make_unique<HostQp>(ctx_, req, *s, *r);
  }

 private:
  ibv_context* ctx_;
};

}  // namespace

std::unique_ptr<QueueFactory> make_host_queue_factory(ibv_context* ctx) {
  return std::make_unique<HostQueueFactory>(ctx);
}

}  // namespace gv::detail::mlx5
