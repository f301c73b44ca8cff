// The mlx5 provider: a ConnectX HCA through rdma-core. Discovery picks the device and port
// (discovery.hpp), a QueueFactory builds the queues (queues.hpp), registration.hpp registers
// memory, connect.hpp turns QpInfo into state changes, translate.hpp makes the device handles,
// and doorbells are rung by the GPU through the mapped register or by the proxy thread.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <utility>
#include <vector>

#include <infiniband/mlx5dv.h>

#include "../provider.hpp"
#include "connect.hpp"
#include "devx/rdma_seam.hpp"
#include "discovery.hpp"
#include "doorbell_proxy.hpp"
#include "gpu_reach.hpp"
#include "queues.hpp"
#include "registration.hpp"
#include "translate.hpp"

namespace gv::detail {
namespace mlx5 {
namespace {

std::string errno_text(int e) { return std::strerror(e) + std::string(" (errno ") + std::to_string(e) + ")"; }

/// GV_MLX5_DOORBELL=proxy makes the host thread ring doorbells even where the GPU could.
bool proxy_forced() {
  const char* v = std::getenv("GV_MLX5_DOORBELL");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "gpu") == 0) return false;
  if (std::strcmp(v, "proxy") == 0) return true;
  throw Error(std::string("GV_MLX5_DOORBELL='") + v + "' must be 'gpu' or 'proxy'");
}

/// DeviceOptions::ib_queues, or GV_MLX5_QUEUES=host|gpu where set: true for GPU memory.
bool gpu_queues(DeviceOptions::Queues q) {
  const char* v = std::getenv("GV_MLX5_QUEUES");
  if (v == nullptr || *v == '\0') return q == DeviceOptions::Queues::kGpu;
  if (std::strcmp(v, "gpu") == 0) return true;
  if (std::strcmp(v, "host") == 0) return false;
  throw Error(std::string("GV_MLX5_QUEUES='") + v + "' must be 'host' or 'gpu'");
}

class Mlx5Provider final : public Provider {
 public:
  Mlx5Provider(std::string_view name, const DeviceOptions& opt) : opt_(opt), reach_(make_gpu_reach()) {
    const Selection sel = selection_from(std::string(name), opt.ib_port, opt.ib_gid_index);
    const std::vector<HcaInfo> hcas = list_hcas();
    const Choice c = pick_port(hcas, sel);
    const HcaInfo& h = hcas[c.hca];
    const PortInfo& p = h.ports[c.port];
    name_ = h.name;
    ctx_ = open_by_name(h.name);
    try {
      check_device();
      port_.port = p.port;
      port_.link_layer = p.link_layer;
      port_.lid = p.lid;
      port_.active_mtu = p.active_mtu;
      port_.pkey_index = opt.ib_pkey_index;
      port_.gid_index = static_cast<std::uint8_t>(pick_gid(p, sel.gid_index));
      for (const GidInfo& g : p.gids)
        if (g.index == port_.gid_index) std::memcpy(port_.gid, g.gid, sizeof(port_.gid));
      // Asynchronous events are polled, never waited for.
      const int fl = fcntl(ctx_->async_fd, F_GETFL);
      if (fl < 0 || fcntl(ctx_->async_fd, F_SETFL, fl | O_NONBLOCK) != 0)
        throw Error("mlx5: cannot make the async event fd non-blocking: " + errno_text(errno));
      proxy_ = !opt.map_to_gpus || proxy_forced();
      if (!opt.map_to_gpus) proxy_why_ = "host-thread handles";
      else if (proxy_) proxy_why_ = "GV_MLX5_DOORBELL=proxy";
      if (gpu_queues(opt.ib_queues)) {
        if (!opt.map_to_gpus)
          throw Error("mlx5: queues in GPU memory (DeviceOptions::Queues::kGpu, GV_MLX5_QUEUES=gpu) need "
                      "map_to_gpus: host threads cannot reach them; use the host placement");
        if (proxy_)
          throw Error("mlx5: queues in GPU memory need the GPU to ring the doorbell, but " + proxy_why_ +
                      " asks for a host thread, which reads the send record in host memory; use the host "
                      "placement (GV_MLX5_QUEUES=host)");
        ::gv::mlx5::devx::GpuQueueOptions g;
        g.gpu = opt.gpu;
        factory_ = ::gv::mlx5::devx::make_gpu_queue_factory(ctx_, g);
      } else {
        factory_ = make_host_queue_factory(ctx_);
      }
      abort_ = static_cast<std::uint32_t*>(flags_alloc(sizeof(std::uint32_t)));  // the last step that may throw
    } catch (...) {
      ibv_close_device(ctx_);
      throw;
    }
  }

  ~Mlx5Provider() override {
    qps_.clear();
    cqs_.clear();
    mrs_.clear();
    for (auto& [n, pd] : pds_) (void)ibv_dealloc_pd(pd);
    for (ibv_pd* pd : released_pds_) (void)ibv_dealloc_pd(pd);  // their QPs and MRs are gone now
    for (auto& [p, a] : allocs_) a.mapped ? reach_->free_mapped(p) : std::free(p);
    flags_free(abort_);
    door_.reset();
    factory_.reset();
    ibv_close_device(ctx_);
  }

  const std::string& name() const override { return name_; }
  std::string describe() const override {
    std::scoped_lock lk(mu_);
    char b[96];
    std::snprintf(b, sizeof(b), " port %u, %s, LID 0x%x, GID index %u, MTU %u", port_.port,
                  port_.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", port_.lid, port_.gid_index,
                  mtu_bytes(port_.active_mtu));
    return "mlx5 " + name_ + b + "; queues in " + to_string(factory_->placement()) + "; doorbells " +
           (opt_.map_to_gpus ? "for GPU kernels, " : "for host threads, ") +
           (proxy_ ? "rung by a host thread (proxy: " + proxy_why_ + ")" : "rung by the GPU (mapped UAR)");
  }

  void* alloc(std::size_t bytes) override {
    if (bytes == 0) throw Error("Device::alloc: 0 bytes");
    void* p = opt_.map_to_gpus ? reach_->alloc_mapped(bytes) : std::aligned_alloc(4096, (bytes + 4095) & ~std::size_t{4095});
    if (p == nullptr) throw Error("Device::alloc(" + std::to_string(bytes) + "): out of memory");
    std::scoped_lock lk(mu_);
    allocs_[p] = Alloc{bytes, opt_.map_to_gpus};
    return p;
  }
  void free(void* p) override {
    std::scoped_lock lk(mu_);
    const auto it = allocs_.find(p);
    if (it == allocs_.end()) throw Error("Device::free: " + hex(reinterpret_cast<std::uintptr_t>(p)) + " is not from Device::alloc");
    for (const auto& [k, m] : mrs_)
      if (reinterpret_cast<std::uintptr_t>(m.mr->addr) - reinterpret_cast<std::uintptr_t>(p) < it->second.bytes)
        throw Error("Device::free: memory region " + hex(k) + " still covers it; destroy it first");
    it->second.mapped ? reach_->free_mapped(p) : std::free(p);
    allocs_.erase(it);
  }

  std::uint32_t alloc_pd() override {
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    if (pd == nullptr) throw Error("mlx5: ibv_alloc_pd failed: " + errno_text(errno));
    std::scoped_lock lk(mu_);
    pds_[++last_pdn_] = pd;
    return last_pdn_;
  }
  void dealloc_pd(std::uint32_t pdn) override {
    std::scoped_lock lk(mu_);
    if (const auto it = pds_.find(pdn); it != pds_.end()) {
      // A ProtectionDomain may go before the QPs and MRs made from it (they hold the provider,
      // not the PD): rdma-core then refuses (EBUSY) and the PD is freed with the provider.
      if (ibv_dealloc_pd(it->second) != 0) released_pds_.push_back(it->second);
      pds_.erase(it);
    }
  }

  std::uint32_t reg_mr(std::uint32_t pdn, void* addr, std::size_t len, std::uint32_t access) override {
    ibv_pd* pd = pd_of(pdn);
    ibv_mr* mr = register_memory(pd, *reach_, addr, len, access);
    if (mr->lkey != mr->rkey) {
      (void)ibv_dereg_mr(mr);
      throw Error("reg_mr(mlx5): the device gave lkey != rkey; gpuverbs' MemoryRegion carries one key");
    }
    std::scoped_lock lk(mu_);
    mrs_.emplace(mr->lkey, Mr{mr});
    return mr->lkey;
  }
  void dereg_mr(std::uint32_t key) override {
    std::scoped_lock lk(mu_);
    mrs_.erase(key);
  }

  CqDesc create_cq(std::uint32_t entries) override {
    auto cq = std::make_unique<Cq>(*this);
    cq->q = factory_->create_cq(entries);
    const CqRings& r = cq->q->rings();
    cq->buf = map(cq->mapped, r.buf, std::size_t{r.cqe_cnt} * r.cqe_size, r.placement);
    cq->dbrec = map(cq->mapped, r.dbrec, sizeof(ib::mlx5::CqDbrec), r.placement);
    cq->state = static_cast<ib::CqCounters*>(counters_alloc(sizeof(ib::CqCounters)));
    cq->error = static_cast<std::uint32_t*>(flags_alloc(sizeof(std::uint32_t)));
    const std::uint32_t cqn = r.cqn;
    std::scoped_lock lk(mu_);
    cqs_[cqn] = std::move(cq);
    return CqDesc{cqn, entries};
  }
  void destroy_cq(std::uint32_t cqn) override {
    std::scoped_lock lk(mu_);
    cqs_.erase(cqn);
  }
  ib::CqHandle cq_handle(std::uint32_t cqn) const override {
    std::scoped_lock lk(mu_);
    const Cq& c = *cqs_.at(cqn);
    return mlx5::cq_handle(c.q->rings(), CqReach{c.buf, c.dbrec, c.state, abort_, c.error});
  }

  std::uint32_t create_qp(const QpLayout& l) override {
    auto qp = std::make_unique<Qp>(*this);
    {
      std::scoped_lock lk(mu_);
      Cq& s = *cqs_.at(l.send_cqn);
      Cq& r = *cqs_.at(l.recv_cqn);
      qp->q = factory_->create_qp(QpRequest{pds_.at(l.pdn), l.caps}, *s.q, *r.q);
    }
    qp->caps = l.caps;
    {
      std::scoped_lock lk(mu_);
      qp->psn = rng_() & 0xffffff;
    }
    const QpRings& r = qp->q->rings();
    map_rings(*qp, r);
    qp->state = static_cast<ib::QpCounters*>(counters_alloc(sizeof(ib::QpCounters)));
    ring_doorbells(*qp, r);
    const std::uint32_t qpn = r.qpn;
    std::scoped_lock lk(mu_);
    qps_[qpn] = std::move(qp);
    return qpn;
  }
  void destroy_qp(std::uint32_t qpn) override {
    std::unique_ptr<Qp> q;
    {
      std::scoped_lock lk(mu_);
      const auto it = qps_.find(qpn);
      if (it == qps_.end()) return;
      q = std::move(it->second);
      qps_.erase(it);
    }
  }
  QpState qp_state(std::uint32_t qpn) const override {
    std::scoped_lock lk(mu_);
    return qps_.at(qpn)->q->query_state();
  }
  QpInfo qp_info(std::uint32_t qpn) const override {
    std::scoped_lock lk(mu_);
    return local_qp_info(qpn, qps_.at(qpn)->psn, port_);
  }
  void modify_to_init(std::uint32_t qpn, std::uint32_t access) override {
    Qp& q = qp(qpn);
    q.q->to_init(init_attr(port_, access));
  }
  void modify_to_rtr(std::uint32_t qpn, const QpConnect& c) override {
    Qp& q = qp(qpn);
    q.q->to_rtr(rtr_attr(c.remote, port_, c.min_rnr_timer));
  }
  void modify_to_rts(std::uint32_t qpn, std::uint8_t rnr_retry) override {
    Qp& q = qp(qpn);
    q.q->to_rts(rts_attr(q.psn, port_, rnr_retry));
  }
  void modify_to_error(std::uint32_t qpn) override {
    Qp& q = qp(qpn);
    q.q->to_error();
  }
  ib::QpHandle qp_handle(std::uint32_t qpn) const override {
    std::scoped_lock lk(mu_);
    const Qp& q = *qps_.at(qpn);
    return mlx5::qp_handle(q.q->rings(), QpReach{q.sq, q.rq, q.dbrec, q.doorbell, q.state, abort_}, q.caps);
  }

  std::optional<AsyncEvent> poll_async_event() override;
  void abort() override { std::atomic_ref<std::uint32_t>(*abort_).store(1, std::memory_order_release); }
  void quiesce() override {}  // no engine: the NIC needs nothing stopped for device-wide synchronisation
  void resume() override {}

 private:
  struct Mr {
    ibv_mr* mr;
    explicit Mr(ibv_mr* m) : mr(m) {}
    Mr(Mr&& o) noexcept : mr(std::exchange(o.mr, nullptr)) {}
    ~Mr() {
      if (mr != nullptr) (void)ibv_dereg_mr(mr);
    }
  };
  struct Cq {
    explicit Cq(Mlx5Provider& p) : pv(p) {}
    ~Cq() {
      for (void* p : mapped) pv.reach_->unmap_host(p, 0);  // before rdma-core frees the pages
      pv.counters_free(state);
      pv.flags_free(error);
    }
    Mlx5Provider& pv;
    std::unique_ptr<CqQueue> q;
    void* buf = nullptr;
    void* dbrec = nullptr;
    ib::CqCounters* state = nullptr;
    std::uint32_t* error = nullptr;
    std::vector<void*> mapped;  ///< host addresses mapped for the GPUs
  };
  struct Qp {
    explicit Qp(Mlx5Provider& p) : pv(p) {}
    ~Qp();
    Mlx5Provider& pv;
    std::unique_ptr<QpQueue> q;
    QpCaps caps;
    std::uint32_t psn = 0;
    void* sq = nullptr;
    void* rq = nullptr;
    void* dbrec = nullptr;
    std::vector<void*> mapped;
    ib::QpCounters* state = nullptr;
    std::uint64_t* doorbell = nullptr;
    std::uint64_t* word = nullptr;  ///< proxy mode: where posters leave the doorbell value
    void* db_reg = nullptr;  ///< the register mapped for the GPU (null: proxied)
  };

  static ibv_context* open_by_name(const std::string& name);
  void check_device();
  ibv_pd* pd_of(std::uint32_t pdn) {
    std::scoped_lock lk(mu_);
    const auto it = pds_.find(pdn);
    if (it == pds_.end()) throw Error("mlx5: no PD " + std::to_string(pdn));
    return it->second;
  }
  Qp& qp(std::uint32_t qpn) {
    std::scoped_lock lk(mu_);
    return *qps_.at(qpn);
  }
  void map_rings(Qp& q, const QpRings& r);
  void ring_doorbells(Qp& q, const QpRings& r);
  /// The address users of the handles reach host-placed queue memory at (the device address
  /// when kernels use them), remembering what to unmap.
  void* map(std::vector<void*>& mapped, void* p, std::size_t n, Placement where) {
    if (!opt_.map_to_gpus || where != Placement::kHost) return p;
    void* d = reach_->map_host(p, n);
    mapped.push_back(p);
    return d;
  }
  /// Counters posters and pollers update atomically: GPU memory for kernels, host memory otherwise.
  void* counters_alloc(std::size_t n) {
    if (opt_.map_to_gpus) return reach_->alloc_device(n);
    void* p = ::operator new(n, std::align_val_t{64});
    std::memset(p, 0, n);
    return p;
  }
  void counters_free(void* p) {
    if (p == nullptr) return;
    opt_.map_to_gpus ? reach_->free_device(p) : ::operator delete(p, std::align_val_t{64});
  }
  /// Words the host writes or reads while users of the handles run: mapped host memory for kernels.
  void* flags_alloc(std::size_t n) { return opt_.map_to_gpus ? reach_->alloc_mapped(n) : counters_alloc(n); }
  void flags_free(void* p) {
    if (p == nullptr) return;
    opt_.map_to_gpus ? reach_->free_mapped(p) : counters_free(p);
  }

  DeviceOptions opt_;
  std::unique_ptr<GpuReach> reach_;
  std::string name_;
  ibv_context* ctx_ = nullptr;
  LocalPort port_;
  std::unique_ptr<QueueFactory> factory_;
  std::uint32_t* abort_ = nullptr;
  bool proxy_ = true;
  std::string proxy_why_;
  std::unique_ptr<DoorbellProxy> door_ = std::make_unique<DoorbellProxy>();
  std::mt19937 rng_{std::random_device{}()};  ///< first PSNs, random per QP as perftest's
  mutable std::mutex mu_;
  std::map<std::uint32_t, ibv_pd*> pds_;
  std::vector<ibv_pd*> released_pds_;  ///< released by their ProtectionDomain while still in use
  std::uint32_t last_pdn_ = 0;
  std::map<std::uint32_t, Mr> mrs_;
  std::map<std::uint32_t, std::unique_ptr<Cq>> cqs_;
  std::map<std::uint32_t, std::unique_ptr<Qp>> qps_;
  struct Alloc {
    std::size_t bytes;
    bool mapped;  ///< cudaHostAlloc (map_to_gpus), else aligned_alloc
  };
  std::map<void*, Alloc> allocs_;  ///< Device::alloc memory
};

Mlx5Provider::Qp::~Qp() {
  // The thread and the GPU mapping let go of the queue before rdma-core destroys it (q, below).
  if (word != nullptr) pv.door_->remove(q->rings().qpn);
  if (db_reg != nullptr) pv.reach_->unmap_doorbell(db_reg);
  for (void* p : mapped) pv.reach_->unmap_host(p, 0);
  pv.flags_free(word);
  pv.counters_free(state);
}

ibv_context* Mlx5Provider::open_by_name(const std::string& name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) throw Error("mlx5: ibv_get_device_list failed: " + errno_text(errno));
  ibv_context* ctx = nullptr;
  int err = ENODEV;
  for (int i = 0; i < n && ctx == nullptr; ++i) {
    if (name != ibv_get_device_name(list[i])) continue;
    ctx = ibv_open_device(list[i]);
    err = errno;
  }
  ibv_free_device_list(list);
  if (ctx == nullptr) throw Error("mlx5: cannot open " + name + ": " + errno_text(err));
  return ctx;
}

void Mlx5Provider::check_device() {
  mlx5dv_context dv{};
  if (const int e = mlx5dv_query_device(ctx_, &dv); e != 0)
    throw Error("mlx5: mlx5dv_query_device(" + name_ + ") failed: " + errno_text(e));
  if (!(dv.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1))
    throw Error("mlx5: " + name_ + " uses CQE version 0; gpuverbs reads CQE version 1 (ConnectX-4 and later "
                "with a current driver): update the firmware or the mlx5_ib driver");
  ibv_device_attr a{};
  if (ibv_query_device(ctx_, &a) != 0) throw Error("mlx5: ibv_query_device(" + name_ + ") failed: " + errno_text(errno));
  port_.max_rd_atomic = static_cast<std::uint8_t>(std::min(a.max_qp_rd_atom, 16));
  port_.max_dest_rd_atomic = static_cast<std::uint8_t>(std::min(a.max_qp_init_rd_atom, 16));
}

void Mlx5Provider::map_rings(Qp& q, const QpRings& r) {
  q.sq = r.sq_buf;
  q.rq = r.rq_buf;
  q.dbrec = r.dbrec;
  if (!opt_.map_to_gpus || r.placement != Placement::kHost) return;
  const auto sq = reinterpret_cast<std::uintptr_t>(r.sq_buf);
  const std::uintptr_t sq_end = sq + std::uintptr_t{r.sq_wqe_cnt} * r.sq_stride;
  const auto rq = reinterpret_cast<std::uintptr_t>(r.rq_buf);
  const std::uintptr_t rq_end = rq + std::uintptr_t{r.rq_wqe_cnt} * r.rq_stride;
  // libmlx5 puts both rings in one buffer: one registration covers them (two over shared pages
  // would leave the second's tail unregistered).
  if (r.rq_wqe_cnt != 0 && std::max(sq, rq) <= std::min(sq_end, rq_end) + 4096) {
    const std::uintptr_t lo = std::min(sq, rq), hi = std::max(sq_end, rq_end);
    auto* d = static_cast<char*>(map(q.mapped, reinterpret_cast<void*>(lo), hi - lo, r.placement));
    q.sq = d + (sq - lo);
    q.rq = d + (rq - lo);
  } else {
    q.sq = map(q.mapped, r.sq_buf, sq_end - sq, r.placement);
    if (r.rq_wqe_cnt != 0) q.rq = map(q.mapped, r.rq_buf, rq_end - rq, r.placement);
  }
  q.dbrec = map(q.mapped, r.dbrec, sizeof(ib::mlx5::QpDbrec), r.placement);
}

void Mlx5Provider::ring_doorbells(Qp& q, const QpRings& r) {
  if (!proxy_) {
    std::string why;
    if (void* d = reach_->map_doorbell(r.bf_reg, why)) {
      q.db_reg = r.bf_reg;
      q.doorbell = static_cast<std::uint64_t*>(d);
      return;
    }
    std::scoped_lock lk(mu_);
    proxy_ = true;
    proxy_why_ = why;
    std::fprintf(stderr, "gpuverbs mlx5 %s: doorbells will be rung by a host thread (slower): %s\n", name_.c_str(),
                 why.c_str());
  }
  if (r.placement != Placement::kHost)
    throw Error("mlx5: the proxy doorbell reads the send record in host memory; queues in GPU memory need the "
                "GPU to map the doorbell register (" + proxy_why_ + ")");
  q.word = static_cast<std::uint64_t*>(flags_alloc(sizeof(std::uint64_t)));
  q.doorbell = q.word;
  door_->add(r.qpn, q.word, r.dbrec + 1, r.bf_reg);  // the send counter is the record's second word
}

std::optional<AsyncEvent> Mlx5Provider::poll_async_event() {
  for (;;) {
    ibv_async_event ev{};
    if (ibv_get_async_event(ctx_, &ev) != 0) return std::nullopt;  // EAGAIN: none pending
    std::optional<AsyncEvent> out;
    const std::string what = ibv_event_type_str(ev.event_type);
    switch (ev.event_type) {
      case IBV_EVENT_CQ_ERR: {
        mlx5dv_cq dv{};
        mlx5dv_obj obj{};
        obj.cq.in = ev.element.cq;
        obj.cq.out = &dv;
        const std::uint32_t cqn = mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == 0 ? dv.cqn : 0;
        std::scoped_lock lk(mu_);
        if (const auto it = cqs_.find(cqn); it != cqs_.end())
          std::atomic_ref<std::uint32_t>(*it->second->error).store(1, std::memory_order_release);
        out = AsyncEvent{AsyncEvent::Type::kCqOverrun, cqn,
                         "CQ " + std::to_string(cqn) + ": " + what + " (overrun: poll faster or make the CQ deeper)"};
        break;
      }
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR: {
        const std::uint32_t qpn = ev.element.qp->qp_num;
        out = AsyncEvent{AsyncEvent::Type::kQpFatal, qpn,
                         "QP " + hex(qpn) + ": " + what + "; the QP is in error: destroy it and connect a new one"};
        break;
      }
      case IBV_EVENT_PORT_ERR:
        out = AsyncEvent{AsyncEvent::Type::kPortError, static_cast<std::uint32_t>(ev.element.port_num),
                         name_ + " port " + std::to_string(ev.element.port_num) + ": " + what +
                             " (link down: check the cable, the switch and the subnet manager)"};
        break;
      case IBV_EVENT_DEVICE_FATAL:
        abort();
        out = AsyncEvent{AsyncEvent::Type::kDeviceFatal, 0,
                         name_ + ": " + what + "; every wait was aborted: reset the HCA or reload mlx5_ib"};
        break;
      default:  // informational (COMM_EST, PORT_ACTIVE, LID/GID change, ...): nothing to report
        break;
    }
    ibv_ack_async_event(&ev);
    if (out) return out;
  }
}

}  // namespace
}  // namespace mlx5

std::unique_ptr<Provider> open_mlx5_provider(std::string_view name, const DeviceOptions& opt) {
  return std::make_unique<mlx5::Mlx5Provider>(name, opt);
}

std::vector<std::string> list_mlx5_devices() {
  std::vector<std::string> v;
  for (const mlx5::HcaInfo& h : mlx5::list_hcas()) {
    if (!h.mlx5 || !h.error.empty()) continue;
    for (const mlx5::PortInfo& p : h.ports)
      if (p.state == IBV_PORT_ACTIVE) {
        v.push_back(h.name);
        break;
      }
  }
  return v;
}

}  // namespace gv::detail
