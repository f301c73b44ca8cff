// Public host-setup objects: argument validation, lifetimes, and forwarding to the provider.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib/encode.hpp>

#include "provider.hpp"

namespace gv {

namespace detail {

// Every child holds its provider: a Device destroyed before its PDs, MRs, CQs and QPs leaves
// the provider (its arena, its engine) running until the last of them is gone.

struct PdImpl {
  std::shared_ptr<Provider> provider;
  std::uint32_t pdn;
};

struct MrImpl {
  std::shared_ptr<Provider> provider;
  std::uint32_t key;
  void* addr;
  std::size_t length;
};

/// Shared by the CompletionQueue and the QPs completing into it, so the CQ's storage lives
/// as long as any of them.
struct CqImpl {
  std::shared_ptr<Provider> provider;
  CqDesc desc;
  std::mutex mu;
  std::uint32_t send_qpn = 0;  ///< the QP whose send queue completes here
  std::uint32_t recv_qpn = 0;  ///< the QP whose receive queue completes here
  /// A device handle was taken while no send (receive) queue completed here: that handle
  /// cannot free the ring space of a queue bound later, so binding one is refused.
  bool handle_without_send = false, handle_without_recv = false;
  ~CqImpl() {
    if (desc.cqn != 0) provider->destroy_cq(desc.cqn);  // 0: the provider refused to create it
  }
};

struct QpImpl {
  std::shared_ptr<Provider> provider;
  std::uint32_t qpn;
  std::shared_ptr<CqImpl> send_cq, recv_cq;
};

}  // namespace detail

namespace {

using detail::hex;

void check_range(const char* who, const char* what, std::uint64_t v, std::uint64_t lo,
                 std::uint64_t hi) {
  if (v < lo || v > hi)
    throw Error(std::string(who) + ": " + what + " " + std::to_string(v) + " is invalid: must be " +
                std::to_string(lo) + ".." + std::to_string(hi));
}

}  // namespace

const char* to_string(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kError: return "ERR";
  }
  return "?";
}

// ---- Device ----------------------------------------------------------------------------

Device::Device(std::unique_ptr<detail::Provider> p) : provider_(std::move(p)) {}
Device::~Device() = default;

std::unique_ptr<Device> Device::open(std::string_view name, const DeviceOptions& opt) {
  if (name == "soft") return std::unique_ptr<Device>(new Device(detail::open_soft_provider(opt)));
  if (name.empty()) throw Error("Device::open: empty name; use \"soft\", \"mlx5\" or an RDMA device name");
  // Every other name is an RDMA device (names like mlx5_0, or rocep1s0f0 where udev renames them).
  return std::unique_ptr<Device>(new Device(detail::open_mlx5_provider(name, opt)));
}

std::vector<std::string> Device::list() {
  std::vector<std::string> v{"soft"};
  for (std::string& n : detail::list_mlx5_devices()) v.push_back(std::move(n));
  return v;
}

const std::string& Device::name() const { return provider_->name(); }
std::string Device::describe() const { return provider_->describe(); }

std::unique_ptr<ProtectionDomain> Device::alloc_pd() {
  return std::unique_ptr<ProtectionDomain>(new ProtectionDomain(
      std::make_unique<detail::PdImpl>(detail::PdImpl{provider_, provider_->alloc_pd()})));
}

std::unique_ptr<CompletionQueue> Device::create_cq(std::uint32_t depth) {
  check_range("create_cq", "depth", depth, 1, std::uint32_t{1} << 22);
  const auto entries = static_cast<std::uint32_t>(ib::round_up_pow2(depth));
  auto impl = std::make_shared<detail::CqImpl>();
  impl->provider = provider_;
  impl->desc = provider_->create_cq(entries);
  return std::unique_ptr<CompletionQueue>(new CompletionQueue(std::move(impl)));
}

void* Device::alloc(std::size_t bytes) { return provider_->alloc(bytes); }
void Device::free(void* p) { provider_->free(p); }
std::optional<AsyncEvent> Device::poll_async_event() { return provider_->poll_async_event(); }
void Device::abort() { provider_->abort(); }
void Device::quiesce() { provider_->quiesce(); }
void Device::resume() { provider_->resume(); }

// ---- ProtectionDomain ------------------------------------------------------------------

ProtectionDomain::ProtectionDomain(std::unique_ptr<detail::PdImpl> impl) : impl_(std::move(impl)) {}
ProtectionDomain::~ProtectionDomain() { impl_->provider->dealloc_pd(impl_->pdn); }
std::uint32_t ProtectionDomain::pdn() const { return impl_->pdn; }

std::unique_ptr<MemoryRegion> ProtectionDomain::reg_mr(void* addr, std::size_t length,
                                                       std::uint32_t access) {
  if (addr == nullptr) throw Error("reg_mr: address is null");
  if (length == 0) throw Error("reg_mr: length is 0");
  // ibv_reg_mr refuses a range that wraps (EINVAL); so does every provider here, before it
  // compares the range with anything.
  if (length > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(addr))
    throw Error("reg_mr: [" + hex(reinterpret_cast<std::uintptr_t>(addr)) + ", +" + std::to_string(length) +
                ") wraps around the end of the address space; register a range that lies in memory");
  if (access & ~kAllAccess)
    throw Error("reg_mr: unknown access bits " + hex(access));
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite))
    throw Error("reg_mr: remote write or atomic access needs kLocalWrite too (as in ibv_reg_mr)");
  const std::uint32_t key = impl_->provider->reg_mr(impl_->pdn, addr, length, access);
  return std::unique_ptr<MemoryRegion>(new MemoryRegion(
      std::make_unique<detail::MrImpl>(detail::MrImpl{impl_->provider, key, addr, length})));
}

std::unique_ptr<QueuePair> ProtectionDomain::create_qp(CompletionQueue& send_cq,
                                                       CompletionQueue& recv_cq,
                                                       const QpCaps& caps) {
  check_range("create_qp", "sq_depth", caps.sq_depth, 1, 4096);
  check_range("create_qp", "rq_depth", caps.rq_depth, 1, 4096);
  check_range("create_qp", "max_send_sge", caps.max_send_sge, 1, 16);
  check_range("create_qp", "max_recv_sge", caps.max_recv_sge, 1, 16);
  check_range("create_qp", "max_inline", caps.max_inline, 0, 512);
  if (send_cq.impl_->provider != impl_->provider || recv_cq.impl_->provider != impl_->provider)
    throw Error("create_qp: the CQs belong to another device");

  detail::QpLayout l;
  l.pdn = impl_->pdn;
  l.caps = caps;
  l.sq_bbs = detail::sq_wqebbs(caps);
  l.rq_wqes = static_cast<std::uint32_t>(ib::round_up_pow2(caps.rq_depth));
  l.rq_stride_shift = 4 + ib::log2_pow2(ib::round_up_pow2(caps.max_recv_sge));
  l.send_cqn = send_cq.cqn();
  l.recv_cqn = recv_cq.cqn();

  // A CQ retires at most one send queue and one receive queue (its handle frees their
  // space as completions are polled). Both CQs are locked together (no lock-order deadlock
  // between two threads passing the same CQs the other way round).
  std::unique_lock ls(send_cq.impl_->mu, std::defer_lock), lr(recv_cq.impl_->mu, std::defer_lock);
  if (&send_cq == &recv_cq) {
    ls.lock();
  } else {
    std::lock(ls, lr);
  }
  if (send_cq.impl_->send_qpn != 0)
    throw Error("create_qp: CQ " + std::to_string(send_cq.cqn()) +
                " already completes the send queue of QP " + hex(send_cq.impl_->send_qpn) +
                "; give each QP's send queue its own CQ (one CQ may serve one send and one "
                "receive queue)");
  if (recv_cq.impl_->recv_qpn != 0)
    throw Error("create_qp: CQ " + std::to_string(recv_cq.cqn()) +
                " already completes the receive queue of QP " + hex(recv_cq.impl_->recv_qpn) +
                "; give each QP's receive queue its own CQ");
  const auto taken_early = [](const CompletionQueue& cq, const char* queue) {
    return Error("create_qp: the device handle of CQ " + std::to_string(cq.cqn()) + " was taken before any " +
                 queue + " queue completed into it, and that handle could never free this QP's " + queue +
                 "-queue slots (posts would end in kQueueFull). Create the QPs first, then take the CQ's handle");
  };
  if (send_cq.impl_->handle_without_send) throw taken_early(send_cq, "send");
  if (recv_cq.impl_->handle_without_recv) throw taken_early(recv_cq, "receive");
  const std::uint32_t qpn = impl_->provider->create_qp(l);
  send_cq.impl_->send_qpn = qpn;
  recv_cq.impl_->recv_qpn = qpn;
  return std::unique_ptr<QueuePair>(new QueuePair(std::make_unique<detail::QpImpl>(
      detail::QpImpl{impl_->provider, qpn, send_cq.impl_, recv_cq.impl_})));
}

// ---- MemoryRegion ----------------------------------------------------------------------

MemoryRegion::MemoryRegion(std::unique_ptr<detail::MrImpl> impl) : impl_(std::move(impl)) {}
MemoryRegion::~MemoryRegion() { impl_->provider->dereg_mr(impl_->key); }
std::uint32_t MemoryRegion::lkey() const { return impl_->key; }
std::uint32_t MemoryRegion::rkey() const { return impl_->key; }
void* MemoryRegion::addr() const { return impl_->addr; }
std::size_t MemoryRegion::length() const { return impl_->length; }

// ---- CompletionQueue -------------------------------------------------------------------

CompletionQueue::CompletionQueue(std::shared_ptr<detail::CqImpl> impl) : impl_(std::move(impl)) {}
CompletionQueue::~CompletionQueue() = default;
std::uint32_t CompletionQueue::cqn() const { return impl_->desc.cqn; }
std::uint32_t CompletionQueue::entries() const { return impl_->desc.entries; }

ib::CqHandle CompletionQueue::device_handle() const {
  ib::CqHandle h = impl_->provider->cq_handle(impl_->desc.cqn);
  std::scoped_lock lk(impl_->mu);
  if (impl_->send_qpn == 0 && impl_->recv_qpn == 0)
    throw Error("CompletionQueue::device_handle: no queue completes into CQ " + std::to_string(impl_->desc.cqn) +
                " yet; create the QPs that use it first (the handle records the queues whose slots its polls free)");
  impl_->handle_without_send |= impl_->send_qpn == 0;
  impl_->handle_without_recv |= impl_->recv_qpn == 0;
  if (impl_->send_qpn != 0) {
    const ib::QpHandle q = impl_->provider->qp_handle(impl_->send_qpn);
    h.send_qp = q.state;
    h.send_sq = q.sq;
    h.send_sq_bbs = q.sq_bbs;
    h.send_qpn = q.qpn;
    h.executor = std::max(h.executor, q.executor);
  }
  if (impl_->recv_qpn != 0) {
    // Receive CQEs are written by whoever takes our receive WQEs (the peer's executor).
    const ib::QpHandle q = impl_->provider->qp_handle(impl_->recv_qpn);
    h.recv_qp = q.state;
    h.recv_qpn = impl_->recv_qpn;
    h.executor = std::max(h.executor, q.rq_executor);
  }
  return h;
}

// ---- QueuePair -------------------------------------------------------------------------

QueuePair::QueuePair(std::unique_ptr<detail::QpImpl> impl) : impl_(std::move(impl)) {}

QueuePair::~QueuePair() {
  {
    std::scoped_lock lk(impl_->send_cq->mu);
    if (impl_->send_cq->send_qpn == impl_->qpn) impl_->send_cq->send_qpn = 0;
  }
  {
    std::scoped_lock lk(impl_->recv_cq->mu);
    if (impl_->recv_cq->recv_qpn == impl_->qpn) impl_->recv_cq->recv_qpn = 0;
  }
  impl_->provider->destroy_qp(impl_->qpn);
}

std::uint32_t QueuePair::qpn() const { return impl_->qpn; }
QpState QueuePair::state() const { return impl_->provider->qp_state(impl_->qpn); }
QpInfo QueuePair::info() const { return impl_->provider->qp_info(impl_->qpn); }

void QueuePair::modify_to_init(std::uint32_t access) {
  if (access & ~std::uint32_t{kRemoteWrite | kRemoteRead | kRemoteAtomic | kLocalWrite})
    throw Error("modify_to_init: unknown access bits " + hex(access));
  impl_->provider->modify_to_init(impl_->qpn, access);
}

void QueuePair::modify_to_rtr(const QpInfo& remote, std::uint8_t min_rnr_timer) {
  if (remote.qpn == 0) throw Error("modify_to_rtr: the remote QpInfo is empty (qpn 0)");
  // A QpInfo arrives from a peer as bytes: its path must end inside its field.
  if (std::memchr(remote.arena, '\0', sizeof(remote.arena)) == nullptr)
    throw Error("modify_to_rtr: the remote QpInfo's arena name is not terminated within its " +
                std::to_string(sizeof(remote.arena)) + " bytes (a corrupted or foreign QpInfo)");
  check_range("modify_to_rtr", "min_rnr_timer", min_rnr_timer, 0, 31);
  impl_->provider->modify_to_rtr(impl_->qpn, detail::QpConnect{remote, min_rnr_timer});
}

void QueuePair::modify_to_rts(std::uint8_t rnr_retry) {
  check_range("modify_to_rts", "rnr_retry", rnr_retry, 0, 7);
  impl_->provider->modify_to_rts(impl_->qpn, rnr_retry);
}

void QueuePair::modify_to_error() { impl_->provider->modify_to_error(impl_->qpn); }

void QueuePair::connect(const QpInfo& remote, const ConnectAttr& attr) {
  const QpState s = state();
  if (s != QpState::kReset)
    throw Error("connect: QP " + hex(impl_->qpn) + " is in " + to_string(s) +
                "; connect() starts from RESET and an RC QP connects once: create a new QP");
  check_range("connect", "min_rnr_timer", attr.min_rnr_timer, 0, 31);
  check_range("connect", "rnr_retry", attr.rnr_retry, 0, 7);
  modify_to_init(attr.access);
  modify_to_rtr(remote, attr.min_rnr_timer);
  modify_to_rts(attr.rnr_retry);
}

ib::QpHandle QueuePair::device_handle() const {
  const QpState s = state();
  if (s == QpState::kReset || s == QpState::kInit)
    throw Error("QueuePair::device_handle: QP " + hex(impl_->qpn) + " is in " + to_string(s) +
                ", not connected: work posted through a handle now would never execute. connect() it "
                "(RESET -> INIT -> RTR -> RTS) first, then take its handle");
  return impl_->provider->qp_handle(impl_->qpn);
}

// ---- Completions -----------------------------------------------------------------------

namespace {
const char* syndrome_text(std::uint8_t s) {
  namespace m5 = ib::mlx5;
  switch (s) {
    case m5::kSyndLocalLengthErr: return "local length error";
    case m5::kSyndLocalQpOpErr: return "local QP operation error (malformed WQE)";
    case m5::kSyndLocalProtErr: return "local protection error (bad lkey, bounds or rights)";
    case m5::kSyndWrFlushErr: return "flushed: the QP is in error";
    case m5::kSyndMwBindErr: return "memory window bind error";
    case m5::kSyndBadRespErr: return "bad response";
    case m5::kSyndLocalAccessErr: return "local access error";
    case m5::kSyndRemoteInvalReqErr: return "remote invalid request (length or alignment)";
    case m5::kSyndRemoteAccessErr: return "remote access error (bad rkey, bounds or rights)";
    case m5::kSyndRemoteOpErr: return "remote operation error";
    case m5::kSyndTransportRetryExcErr: return "transport retry counter exceeded (peer unreachable or not ready)";
    case m5::kSyndRnrRetryExcErr: return "RNR retry counter exceeded (no receive posted at the peer)";
    case m5::kSyndRemoteAbortedErr: return "remote aborted";
  }
  return "unknown syndrome";
}
}  // namespace

std::string describe(const ib::Completion& c) {
  char b[200];
  if (c.status == Status::kCompletionError) {
    std::snprintf(b, sizeof(b), "QP 0x%x %s WQE %u: %s (syndrome 0x%02x, vendor 0x%02x)", c.qpn,
                  c.is_send() ? "send" : "receive", c.wqe_counter, syndrome_text(c.syndrome),
                  c.syndrome, c.vendor_syndrome);
  } else {
    std::snprintf(b, sizeof(b), "QP 0x%x %s WQE %u: %s, %u bytes", c.qpn,
                  c.is_send() ? "send" : "receive", c.wqe_counter, to_string(c.status), c.byte_len);
  }
  return b;
}

}  // namespace gv
