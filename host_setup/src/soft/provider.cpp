// The software HCA provider: an arena (ArenaStore: host or GPU memory), the engine that serves
// it, and the tables of PDs, MRs, CQs and QPs in it. Everything that differs between the CPU
// and the GPU engine lies behind the store and the engine; this file is the same for both.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "../provider.hpp"
#include "arena_store.hpp"

namespace gv::detail {
namespace {

using soft::ArenaHeader;
using soft::CqCtx;
using soft::MrEntry;
using soft::QpCtx;
namespace m5 = ib::mlx5;

using soft::kMaxCqs;
using soft::kMaxMrs;
using soft::kMaxQps;

/// What a create call took from the heap so far: given back if the call fails part-way (the
/// next allocation throws), kept once the object is complete.
class Taken {
 public:
  explicit Taken(ArenaStore& store) : store_(store) {}
  Taken(const Taken&) = delete;
  Taken& operator=(const Taken&) = delete;
  ~Taken() {
    for (const std::uint64_t off : offs_) store_.heap_release(off);
    if (counters_ != nullptr) store_.free_counters(counters_);
  }
  std::uint64_t add(std::uint64_t off) {
    offs_.push_back(off);
    return off;
  }
  void* counters(void* p) { return counters_ = p; }
  void keep() {
    offs_.clear();
    counters_ = nullptr;
  }

 private:
  ArenaStore& store_;
  std::vector<std::uint64_t> offs_;
  void* counters_ = nullptr;
};

class SoftProvider final : public Provider {
 public:
  explicit SoftProvider(const DeviceOptions& opt) : name_("soft") {
    const std::size_t size = opt.arena_bytes;
    if (size < (std::size_t{8} << 20))
      throw Error("Device::open(soft): arena_bytes " + std::to_string(size) +
                  " is too small: use at least 8 MiB");
    if (opt.engine == DeviceOptions::Engine::kGpu) {
      if (opt.engine_warps < 1 || opt.engine_warps > soft::kMaxEngineWarps)
        throw Error("Device::open(soft): engine_warps " + std::to_string(opt.engine_warps) +
                    " is invalid: must be 1.." + std::to_string(soft::kMaxEngineWarps));
      store_ = open_gpu_arena(opt);
    } else {
      store_ = open_host_arena(opt);
    }
    ArenaHeader* h = tab().hdr();
    h->magic = soft::kArenaMagic;
    h->version = soft::kArenaVersion;
    h->pid = getpid();
    h->size = size;
    mr_tags_.assign(kMaxMrs, 0);
    store_->push(tab().base, soft::ArenaLayout::kHeap);
    engine_ = store_->start_engine(opt, EngineSite{mu_, qp_high_,
                                                   [this](AsyncEvent e) {
                                                     std::lock_guard lk(events_mu_);
                                                     engine_events_.push_back(std::move(e));
                                                   },
                                                   [this] { abort(); }});
  }

  /// The engine stops first: nothing may use the arena after.
  ~SoftProvider() override {
    engine_.reset();
    store_.reset();
  }

  const std::string& name() const override { return name_; }
  std::string describe() const override {
    return name_ + (store_->on_gpu() ? " (GPU engine)" : " (CPU engine)") +
           ": queues, doorbell records and alloc() memory in " + store_->placement();
  }

  // ---- memory ----
  void* alloc(std::size_t bytes) override {
    if (bytes == 0) throw Error("Device::alloc: 0 bytes requested");
    std::lock_guard lk(mu_);
    return arena().base + store_->heap_alloc_or_throw("Device::alloc", bytes, bytes >= 4096 ? 4096 : 64);
  }

  void free(void* p) override {
    std::lock_guard lk(mu_);
    const std::uint64_t off = store_->offset_of(p);
    if (off == 0 || store_->heap_size_of(off) == 0)
      throw Error("Device::free: " + hex(reinterpret_cast<std::uintptr_t>(p)) +
                  " was not returned by Device::alloc (or was freed already)");
    const std::uint64_t len = store_->heap_size_of(off);
    for (std::uint32_t i = 0; i < kMaxMrs; ++i) {
      const MrEntry& e = tab().mrs()[i];
      if (e.key != 0 && e.in_arena && e.arena_off < off + len && off < e.arena_off + e.length)
        throw Error("Device::free: memory at " + hex(reinterpret_cast<std::uintptr_t>(p)) +
                    " is still registered (MR key " + hex(e.key) + "); deregister it first");
    }
    store_->heap_release(off);
  }

  // ---- protection domains and memory regions ----
  std::uint32_t alloc_pd() override {
    std::lock_guard lk(mu_);
    return ++last_pdn_;
  }
  void dealloc_pd(std::uint32_t) override {}

  std::uint32_t reg_mr(std::uint32_t pdn, void* addr, std::size_t len,
                       std::uint32_t access) override {
    std::lock_guard lk(mu_);
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uint64_t off = store_->offset_of(addr);
    const bool in_arena = off != 0;
    if (in_arena && !store_->heap_inside_live(off, len))
      throw Error("reg_mr: [" + hex(a) + ", +" + std::to_string(len) +
                  ") lies in the device's memory but not inside one live Device::alloc "
                  "allocation (freed, or past its end)");
    const int gpu = in_arena ? -1 : store_->reachable(addr, len, access);
    std::uint32_t slot = 0;
    while (slot < kMaxMrs && tab().mrs()[slot].key != 0) ++slot;
    if (slot == kMaxMrs)
      throw Error("reg_mr: all " + std::to_string(kMaxMrs) +
                  " memory-region slots are in use; deregister some first");
    mr_tags_[slot] = static_cast<std::uint8_t>(mr_tags_[slot] % 255 + 1);  // 1..255, never 0
    MrEntry& e = tab().mrs()[slot];
    e.access = access;
    e.pdn = pdn;
    e.in_arena = in_arena ? 1 : 0;
    e.addr = a;
    e.length = len;
    e.arena_off = off;
    store_->push(&e, sizeof(e));  // key still 0: the engine ignores the slot
    if (gpu >= 0) store_->admit_gpu_mr(slot, a, len, gpu);  // before the key: the engine then finds it
    const std::uint32_t key = (slot << 8) | mr_tags_[slot];
    sync::store_release(&e.key, key);
    store_->push(&e.key, sizeof(e.key));
    return key;
  }

  void dereg_mr(std::uint32_t key) override {
    {
      std::lock_guard lk(mu_);
      const std::uint32_t slot = soft::mr_slot(key);
      std::uint32_t* k = &tab().mrs()[slot].key;
      sync::store_release(k, std::uint32_t{0});
      (void)store_->try_push(k, sizeof(*k));  // fails only with the engine's context dead
      store_->forget_gpu_mr(slot);
    }
    outlast_kept();
  }

  // ---- completion queues ----
  CqDesc create_cq(std::uint32_t entries) override {
    std::lock_guard lk(mu_);
    std::uint32_t slot = 0;
    while (slot < kMaxCqs && tab().cqs()[slot].cqn != 0) ++slot;
    if (slot == kMaxCqs) throw Error("create_cq: all " + std::to_string(kMaxCqs) + " CQ slots are in use");
    Taken taken(*store_);
    const std::string ring_of = "create_cq: the ring of " + std::to_string(entries) + " CQEs of 64 bytes";
    const std::uint64_t ring =
        taken.add(store_->heap_alloc_or_throw(ring_of.c_str(), std::uint64_t{entries} * m5::kCqeSize, 4096));
    const std::uint64_t dbrec = taken.add(store_->heap_alloc_or_throw("create_cq: the doorbell record", 64, 64));
    const std::vector<m5::Cqe> cqes(entries, ib::make_invalid_cqe());
    store_->write_at(ring, cqes.data(), cqes.size() * sizeof(m5::Cqe));
    store_->zero_at(dbrec, 64);
    void* const counters = taken.counters(store_->alloc_counters("create_cq", sizeof(ib::CqCounters)));
    taken.keep();
    cq_state_[slot] = counters;
    CqCtx& c = tab().cqs()[slot];
    c.cqn = 0;
    c.log_cqes = ib::log2_pow2(entries);
    c.ring_off = ring;
    c.dbrec_off = dbrec;
    c.produced = 0;
    c.error = 0;
    store_->push(&c, sizeof(c));
    sync::store_release(&c.cqn, slot + 1);
    store_->push(&c.cqn, sizeof(c.cqn));
    return CqDesc{slot + 1, entries};
  }

  void destroy_cq(std::uint32_t cqn) override {
    std::lock_guard lk(mu_);
    CqCtx& c = tab().cqs()[cqn - 1];
    sync::store_release(&c.cqn, std::uint32_t{0});
    if (!store_->try_push(&c.cqn, sizeof(c.cqn))) return;  // the engine may not know: keep the ring
    store_->heap_release(c.ring_off);
    store_->heap_release(c.dbrec_off);
    store_->free_counters(cq_state_[cqn - 1]);
  }

  ib::CqHandle cq_handle(std::uint32_t cqn) const override {
    const CqCtx& c = tab().cqs()[cqn - 1];
    ib::CqHandle h;
    h.cqn = cqn;
    h.ring = arena().at<m5::Cqe>(c.ring_off);
    h.dbrec = arena().at<m5::CqDbrec>(c.dbrec_off);
    h.state = static_cast<ib::CqCounters*>(cq_state_[cqn - 1]);
    h.abort = store_->engine_ptr(tab().hdr()->abort);
    h.error = store_->engine_ptr(tab().cqs()[cqn - 1].error);
    h.log_cqes = c.log_cqes;
    h.executor = on_gpu() ? sync::Scope::kGpu : sync::Scope::kSystem;
    return h;
  }

  // ---- queue pairs ----
  std::uint32_t create_qp(const QpLayout& l) override {
    std::lock_guard lk(mu_);
    std::uint32_t slot = 0;
    while (slot < kMaxQps && tab().qps()[slot].qpn != 0) ++slot;
    if (slot == kMaxQps) throw Error("create_qp: all " + std::to_string(kMaxQps) + " QP slots are in use");
    Taken taken(*store_);
    const std::uint64_t sq =
        taken.add(store_->heap_alloc_zeroed("create_qp: the send queue", std::uint64_t{l.sq_bbs} * m5::kSendWqeBB, 4096));
    const std::uint64_t rq = taken.add(
        store_->heap_alloc_zeroed("create_qp: the receive queue", std::uint64_t{l.rq_wqes} << l.rq_stride_shift, 4096));
    const std::uint64_t dbrec = taken.add(store_->heap_alloc_zeroed("create_qp: the doorbell record", 64, 64));
    const std::uint64_t doorbell = taken.add(store_->heap_alloc_zeroed("create_qp: the doorbell", 64, 64));
    void* const counters = taken.counters(store_->alloc_counters("create_qp", sizeof(ib::QpCounters)));
    taken.keep();
    QpCtx& q = tab().qps()[slot];
    std::memset(&q, 0, sizeof(q));
    q.sq_off = sq;
    q.rq_off = rq;
    q.dbrec_off = dbrec;
    q.doorbell_off = doorbell;
    qp_state_[slot] = counters;
    q.state = static_cast<std::uint32_t>(QpState::kReset);
    q.pdn = l.pdn;
    q.send_cq = l.send_cqn - 1;
    q.recv_cq = l.recv_cqn - 1;
    q.sq_bbs = l.sq_bbs;
    q.rq_wqes = l.rq_wqes;
    q.rq_stride_shift = l.rq_stride_shift;
    q.max_recv_sge = l.caps.max_recv_sge;
    q.max_send_sge = l.caps.max_send_sge;
    q.max_inline = l.caps.max_inline;
    store_->push(&q, sizeof(q));
    const std::uint32_t qpn = soft::kQpnBase + slot;
    sync::store_release(&q.qpn, qpn);
    store_->push(&q.qpn, sizeof(q.qpn));
    ++tab().hdr()->qps_created;  // the GPU engine's warps fence (L1 may hold the slot's earlier QP)
    store_->push(&tab().hdr()->qps_created, sizeof(std::uint32_t));
    engine_->forget_stale();
    if (slot + 1 > qp_high_.load()) {
      qp_high_.store(slot + 1);
      tab().hdr()->qp_high = slot + 1;
      store_->push(&tab().hdr()->qp_high, sizeof(std::uint32_t));
    }
    return qpn;
  }

  void destroy_qp(std::uint32_t qpn) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    sync::store_release(&q.qpn, std::uint32_t{0});
    const bool pushed = store_->try_push(&q.qpn, sizeof(q.qpn));
    // Under the lock, so that no create_qp takes the slot while the peer's requester may still
    // use what it kept of this QP (its receive queue's offsets among them).
    outlast_kept();
    // Free the rings only once no engine warp can still hold them; otherwise they stay
    // allocated (a failed engine, or a dead context, is not waited for).
    if (!pushed || !engine_->swept()) return;
    store_->heap_release(q.sq_off);
    store_->heap_release(q.rq_off);
    store_->heap_release(q.dbrec_off);
    store_->heap_release(q.doorbell_off);
    store_->free_counters(qp_state_[qpn - soft::kQpnBase]);
  }

  QpState qp_state(std::uint32_t qpn) const override {
    return static_cast<QpState>(store_->pull(ctx(qpn).state));
  }

  QpInfo qp_info(std::uint32_t qpn) const override {
    QpInfo i;
    i.qpn = qpn;
    i.pid = getpid();
    std::snprintf(i.arena, sizeof(i.arena), "%s", store_->path().c_str());
    store_->describe(i);
    return i;
  }

  void modify_to_init(std::uint32_t qpn, std::uint32_t access) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    expect_state(q, QpState::kReset, "modify_to_init", "INIT");
    q.access = access;
    store_->push(&q.access, sizeof(q.access));
    set_state(q, QpState::kInit);
  }

  void modify_to_rtr(std::uint32_t qpn, const QpConnect& c) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    if (q.peer_qpn != 0)
      throw Error("modify_to_rtr: QP " + hex(qpn) + " is already connected to QP " +
                  hex(q.peer_qpn) + "; an RC QP connects once: create a new QP");
    expect_state(q, QpState::kInit, "modify_to_rtr", "RTR");
    q.peer_base = store_->peer_base(qpn, c.remote);
    q.peer_qpn = c.remote.qpn;
    q.peer_pid = c.remote.pid;
    std::snprintf(q.peer_arena, sizeof(q.peer_arena), "%s", c.remote.arena);
    q.min_rnr_timer = c.min_rnr_timer;
    store_->push(&q, sizeof(q));  // the engine does not touch a QP in INIT
    set_state(q, QpState::kRtr);
    connected_.store(true);
  }

  void modify_to_rts(std::uint32_t qpn, std::uint8_t rnr_retry) override {
    std::lock_guard lk(mu_);
    QpCtx& q = ctx(qpn);
    expect_state(q, QpState::kRtr, "modify_to_rts", "RTS");
    q.rnr_retry = rnr_retry;
    store_->push(&q.rnr_retry, sizeof(q.rnr_retry));
    set_state(q, QpState::kRts);
  }

  void modify_to_error(std::uint32_t qpn) override {
    {
      std::lock_guard lk(mu_);
      set_state(ctx(qpn), QpState::kError);
    }
    outlast_kept();
  }

  ib::QpHandle qp_handle(std::uint32_t qpn) const override {
    const QpCtx& q = ctx(qpn);
    ib::QpHandle h;
    h.qpn = qpn;
    h.sq = arena().at<std::byte>(q.sq_off);
    h.rq = arena().at<std::byte>(q.rq_off);
    h.dbrec = arena().at<m5::QpDbrec>(q.dbrec_off);
    h.doorbell = arena().at<std::uint64_t>(q.doorbell_off);
    h.state = static_cast<ib::QpCounters*>(qp_state_[qpn - soft::kQpnBase]);
    h.abort = store_->engine_ptr(tab().hdr()->abort);
    h.sq_bbs = q.sq_bbs;
    h.rq_wqes = q.rq_wqes;
    h.rq_stride_shift = q.rq_stride_shift;
    h.max_recv_sge = q.max_recv_sge;
    h.max_send_sge = q.max_send_sge;
    h.max_inline = q.max_inline;
    // Our engine reads the send queue; the peer's engine takes our receive WQEs (until the QP
    // is connected, assume it sits elsewhere).
    const bool gpu = on_gpu();
    h.executor = gpu ? sync::Scope::kGpu : sync::Scope::kSystem;
    h.rq_executor = gpu && q.peer_base == reinterpret_cast<std::uintptr_t>(arena().base)
                        ? sync::Scope::kGpu
                        : sync::Scope::kSystem;
    h.record_polled = 1;  // both engines execute what the record covers (Hca::serve)
    return h;
  }

  // ---- asynchronous events, abort, quiescence ----
  std::optional<AsyncEvent> poll_async_event() override {
    std::lock_guard lk(events_mu_);  // the read cursor is shared by the host's threads
    if (!engine_events_.empty()) {
      AsyncEvent e = std::move(engine_events_.front());
      engine_events_.pop_front();
      return e;
    }
    ArenaHeader* h = tab().hdr();
    const std::uint64_t head = store_->pull(h->events_head);
    if (events_read_ >= head) return std::nullopt;
    if (head - events_read_ > soft::kAsyncEventSlots) {
      const std::uint64_t lost = head - events_read_ - soft::kAsyncEventSlots;
      events_read_ += lost;
      return AsyncEvent{AsyncEvent::Type::kQpFatal, 0,
                        std::to_string(lost) + " asynchronous events were lost (ring of " +
                            std::to_string(soft::kAsyncEventSlots) + "); poll more often"};
    }
    soft::AsyncEvent& slot = h->events[events_read_ % soft::kAsyncEventSlots];
    const soft::AsyncEventType type = store_->pull(slot.type);
    if (static_cast<std::uint32_t>(type) == 0) return std::nullopt;  // being written
    const soft::AsyncEvent e = store_->pull(slot);  // written before its type
    ++events_read_;
    const std::uint32_t n = e.number;
    if (type == soft::AsyncEventType::kCqOverrun)
      return AsyncEvent{AsyncEvent::Type::kCqOverrun, n,
                        "CQ " + std::to_string(n) + " overran at CQE " + std::to_string(e.detail) +
                            ": a completion was lost, the CQ and its QPs are in error; poll it "
                            "more often or create it deeper"};
    return AsyncEvent{AsyncEvent::Type::kQpFatal, n,
                      "QP " + hex(n) + " rang a doorbell (" + hex(e.detail) +
                          ") that does not name it; the QP is in error"};
  }

  void abort() override {
    std::uint32_t* a = &tab().hdr()->abort;
    sync::store_release(a, std::uint32_t{1});
    store_->push(a, sizeof(*a));
  }

  void quiesce() override {
    if (!on_gpu()) return;
    std::lock_guard lk(mu_);
    engine_->quiesce();
  }

  void resume() override {
    if (!on_gpu()) return;
    std::lock_guard lk(mu_);
    engine_->resume();
  }

 private:
  bool on_gpu() const { return store_->on_gpu(); }
  /// After a change a peer's requester may have kept (soft::kKeptNs), made and published: wait
  /// until no requester uses what it kept from before it. Nothing to wait for before a QP of
  /// this device was ever connected.
  void outlast_kept() const {
    if (connected_.load()) std::this_thread::sleep_for(std::chrono::nanoseconds(2 * soft::kKeptNs));
  }
  const soft::Arena& arena() const { return store_->arena(); }
  const soft::Arena& tab() const { return store_->tables(); }

  void set_state(QpCtx& q, QpState s) {
    sync::store_release(&q.state, static_cast<std::uint32_t>(s));
    store_->push(&q.state, sizeof(q.state));
  }
  QpCtx& ctx(std::uint32_t qpn) const { return tab().qps()[qpn - soft::kQpnBase]; }

  void expect_state(const QpCtx& q, QpState want, const char* who, const char* target) const {
    const auto have = static_cast<QpState>(store_->pull(q.state));
    if (have != want)
      throw Error(std::string(who) + ": QP " + hex(q.qpn) + " is in " + to_string(have) + "; " +
                  target + " needs " + to_string(want));
  }

  std::string name_;
  std::unique_ptr<ArenaStore> store_;
  std::unique_ptr<Engine> engine_;
  std::vector<std::uint8_t> mr_tags_;
  void* cq_state_[kMaxCqs] = {};
  void* qp_state_[kMaxQps] = {};
  std::uint32_t last_pdn_ = 0;
  std::mutex events_mu_;
  std::uint64_t events_read_ = 0;
  std::deque<AsyncEvent> engine_events_;  ///< raised by the engines (failed copies, the GPU watchdog)
  std::atomic<std::uint32_t> qp_high_{0};
  std::mutex mu_;  ///< guards tables and heap; the CPU engine holds it for each sweep
  std::atomic<bool> connected_{false};  ///< a QP of this device was connected (outlast_kept())
};

}  // namespace

std::unique_ptr<Provider> open_soft_provider(const DeviceOptions& opt) {
  return std::make_unique<SoftProvider>(opt);
}

}  // namespace gv::detail
