// The experiments of the verbs benchmarks, written once for kernels and host threads (GV_HD):
// what a poster does, over a transport (Tx) that posts and polls for it. gv_gpu_verbs runs them
// in kernels and on host threads; gv_pingpong on host threads.
//
// A transport offers start(), post(k) (work request k of the plan), done() (WRs known to have
// completed), wait_sent(min), wait_recv(k) (the receive completion of the peer's WR k),
// produce(p, v) and consume(p, v) (the application storing the tag v of an outgoing message at
// p, and taking an incoming one whose tag at p must be v) and abort() (the flag that ends every
// wait). DirectTx posts and polls through the device API itself, and its poster stores and
// reads message bytes directly; gv_gpu_verbs adds a proxied transport and a host-controlled one
// (kernels produce and consume, the host posts).
#pragma once
#include <cstdint>

#include <gpuverbs/splitmix.hpp>
#include <gpuverbs/types.hpp>
#include <gpuverbs/ib.hpp>

namespace gv::bench {

using gv::Status;
using gv::ib::Ownership;
using gv::ib::SendWr;
using gv::ib::Sge;
using gv::ib::WrOpcode;

constexpr std::uint64_t kWindow = 64;       ///< WRs in flight per QP at most
constexpr std::uint32_t kSignalEvery = 16;  ///< one signaled WR (one CQE) per this many
constexpr std::uint32_t kRecvAhead = 64;    ///< receives kept posted for WRITE_WITH_IMM
constexpr std::uint32_t kRecvBatch = 32;    ///< ... topped up after this many are consumed
constexpr std::uint32_t kMaxInline = 64;    ///< messages up to this size go inline
constexpr std::uint8_t kPoison = 0xff;      ///< incoming regions before a run (never a tag)
constexpr auto kNotReported = static_cast<Status>(0xffffffffu);

// ---- payloads -------------------------------------------------------------------------------

/// The last byte of ping-pong message k: never 0 and never the poison, and it differs from
/// message k - 1's, so the receiver cannot mistake the previous message for this one.
GV_HD inline std::uint8_t tag(std::uint64_t k) { return static_cast<std::uint8_t>(1 + k % 254); }

inline std::uint64_t seed_of(int endpoint, std::uint64_t bytes) {
  return splitmix64(0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(endpoint) + bytes);
}
/// Byte i of the payload seeded by `seed`.
inline std::uint8_t pattern(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>(splitmix64(seed + (i >> 3)) >> (8 * (i & 7)));
}

// ---- endpoints, work-request plans, the direct transport -------------------------------------

/// One end of a connected QP pair as its poster sees it: the handles, its registered buffer
/// ([0, region): where the peer writes; [region, 2 region): outgoing data) and the peer's.
struct Endpoint {
  gv::ib::QpHandle qp;
  gv::ib::CqHandle scq, rcq;  ///< send completions; receive completions
  std::uint8_t* in = nullptr;
  std::uint8_t* out = nullptr;
  std::uint8_t* peer_in = nullptr;
  std::uint32_t lkey = 0, peer_rkey = 0;
};

/// The work requests of one run. WR k differs from WR 0 only in its immediate (k) and atomic
/// operands (CMP_SWP k -> k + 1, which succeeds every time; FETCH_ADD 1), so a poster and a
/// proxy build the same WR from k alone, and agree on which WRs are signaled.
struct WrPlan {
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  std::uint32_t flags = 0;  ///< kWrInline or 0 (signaling follows signal_every)
  Sge sge;                  ///< the local data (atomics: the word the old value lands in)
  std::uint64_t remote = 0;
  std::uint32_t rkey = 0;
  std::uint64_t n = 0;                        ///< WRs in the run
  std::uint32_t signal_every = kSignalEvery;  ///< one CQE per this many WRs, and one for the last
  bool receives = false;                      ///< the peer's WRs consume our receives

  GV_HD bool signaled(std::uint64_t k) const { return k % signal_every == signal_every - 1 || k + 1 == n; }
  /// WRs [0, done(c)) have completed once c send CQEs were polled (CQEs arrive in order).
  GV_HD std::uint64_t done(std::uint64_t cqes) const {
    const std::uint64_t d = cqes * signal_every;
    return d < n ? d : n;
  }
  /// WR k; it points at this plan's SGE.
  GV_HD SendWr wr(std::uint64_t k) const {
    SendWr w;
    w.opcode = opcode;
    w.flags = flags | (signaled(k) ? gv::ib::kWrSignaled : 0u);
    w.sg_list = &sge;
    w.num_sge = 1;
    w.imm = static_cast<std::uint32_t>(k);
    w.remote_addr = remote;
    w.rkey = rkey;
    w.compare_add = opcode == WrOpcode::kAtomicCmpSwp ? k : 1;
    w.swap = k + 1;
    return w;
  }
};

/// A transport whose poster stores message bytes itself and reads them where it needs them (the
/// last-byte wait compares the tag): nothing more to consume.
struct PosterBytes {
  GV_HD Status produce(std::uint8_t* p, std::uint8_t v) {
    *p = v;
    return Status::kOk;
  }
  GV_HD Status consume(const std::uint8_t*, std::uint8_t) { return Status::kOk; }
};

/// Posting through the device API: WR k of the plan, exclusive ownership of the QP and CQs.
/// Receives (for plans that take them) are kept kRecvAhead ahead, topped up in batches. With
/// kOwner, the QP and its send CQ are held by a gv::ib::QpOwner from start() to the end of the
/// transport's life (their positions in registers, the fast path for one thread that posts and
/// polls); receive completions are polled on the receive CQ as without it.
template <bool kOwner = false>
class DirectTx : public PosterBytes {
 public:
  GV_HD DirectTx(const Endpoint& ep, const WrPlan& plan) : ep_(&ep), plan_(plan) {}
  DirectTx(const DirectTx&) = delete;  // one owner gives the queues back once
  DirectTx& operator=(const DirectTx&) = delete;
  GV_HD ~DirectTx() {
    if constexpr (kOwner)
      if (taken_) own_.give_back();
  }

  GV_HD Status start() {
    if constexpr (kOwner) {
      if (const Status st = own_.take(ep_->qp, ep_->scq); st != Status::kOk) return st;
      taken_ = true;
    }
    return plan_.receives ? top_up_receives() : Status::kOk;
  }
  GV_HD Status post(std::uint64_t k) {
    const SendWr wr = plan_.wr(k);
    if constexpr (kOwner) return own_.post_send(wr);
    else return gv::ib::post_send<Ownership::kExclusive>(ep_->qp, wr);
  }
  /// WRs known to have completed.
  GV_HD std::uint64_t done() const { return plan_.done(cqes_); }
  GV_HD Status wait_sent(std::uint64_t min) {
    while (done() < min)
      if (const Status st = reap(true); st != Status::kOk) return st;
    return Status::kOk;
  }
  /// Wait for the receive completion of the peer's WR k.
  GV_HD Status wait_recv(std::uint64_t k) {
    while (received_ <= k)
      if (const Status st = receive(true); st != Status::kOk) return st;
    return Status::kOk;
  }
  GV_HD const std::uint32_t* abort() const { return ep_->qp.abort; }

  // One step at a time (the proxy's loop): kEmpty when nothing was ready.
  GV_HD std::uint64_t received() const { return received_; }
  GV_HD Status reap(bool wait) {
    gv::ib::Completion c;
    Status st;
    if constexpr (kOwner) st = wait ? own_.poll(c) : own_.try_poll(c);
    else
      st = wait ? gv::ib::poll_cq<Ownership::kExclusive>(ep_->scq, c)
                : gv::ib::try_poll_cq<Ownership::kExclusive>(ep_->scq, c);
    if (st == Status::kOk) ++cqes_;
    return st;
  }
  GV_HD Status receive(bool wait) {
    gv::ib::Completion c;
    const Status st = wait ? gv::ib::poll_cq<Ownership::kExclusive>(ep_->rcq, c)
                           : gv::ib::try_poll_cq<Ownership::kExclusive>(ep_->rcq, c);
    if (st != Status::kOk) return st;
    ++received_;
    return received_ % kRecvBatch == 0 ? top_up_receives() : Status::kOk;
  }

 private:
  /// Post receives until kRecvAhead are outstanding. Counted from the QP's own counters (an
  /// owner keeps the receive queue's reserved count current when another CQ completes it), so
  /// the count carries over from one run to the next.
  GV_HD Status top_up_receives() {
    gv::ib::WqCounters* rq = &ep_->qp.state->rq;
    const std::uint64_t outstanding = gv::sync::load_relaxed(&rq->reserved) - gv::sync::load_acquire(&rq->completed);
    const Sge none{reinterpret_cast<std::uint64_t>(ep_->in), 0, ep_->lkey};  // WRITE_WITH_IMM scatters nothing
    for (std::uint64_t i = outstanding; i < kRecvAhead; ++i) {
      Status st;
      if constexpr (kOwner) st = own_.post_recv(&none, 1);
      else st = gv::ib::post_recv<Ownership::kExclusive>(ep_->qp, &none, 1);
      if (st != Status::kOk) return st;
    }
    return Status::kOk;
  }

  const Endpoint* ep_;
  WrPlan plan_;
  std::uint64_t cqes_ = 0;      ///< send CQEs polled
  std::uint64_t received_ = 0;  ///< receive CQEs polled
  gv::ib::QpOwner own_;         ///< kOwner: the QP and its send CQ, from start()
  bool taken_ = false;
};

// ---- experiments ----------------------------------------------------------------------------

/// An experiment's step over the transport Tx, for the GPU and the host; with a host-only
/// transport (gv_gpu_verbs's host-controlled one) it is host code, which nvcc is told not to
/// check as device code.
#if defined(__CUDACC__)
#define GV_TX_STEP _Pragma("nv_exec_check_disable")
#else
#define GV_TX_STEP
#endif

/// pingpong: roles 0 and 1 on endpoints 0 and 1. Role 0 starts every exchange and times it
/// (rtt_ns[k]); each side's message k ends with tag(k).
struct PingPong {
  std::uint32_t bytes;
  std::uint64_t n;  ///< exchanges, warm-up included
  bool completion;  ///< WRITE_WITH_IMM awaited on the receive CQ; otherwise the last byte

  GV_HD int endpoint(int role) const { return role; }
  GV_HD WrPlan plan(const Endpoint& ep) const {
    WrPlan p;
    p.opcode = completion ? WrOpcode::kRdmaWriteImm : WrOpcode::kRdmaWrite;
    p.flags = bytes <= kMaxInline ? gv::ib::kWrInline : 0u;
    p.sge = Sge{reinterpret_cast<std::uint64_t>(ep.out), bytes, ep.lkey};
    p.remote = reinterpret_cast<std::uint64_t>(ep.peer_in);
    p.rkey = ep.peer_rkey;
    p.n = n;
    p.receives = completion;
    return p;
  }
  GV_TX_STEP
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint& ep, int role, std::uint64_t* rtt_ns) const {
    Status st = tx.start();
    for (std::uint64_t k = 0; k < n && st == Status::kOk; ++k) {
      const std::uint64_t t0 = gv::sync::now_ns();
      if (role == 0) {
        st = send(tx, ep, k);
        if (st == Status::kOk) st = receive(tx, ep, k);
        rtt_ns[k] = gv::sync::now_ns() - t0;
      } else {
        st = receive(tx, ep, k);
        if (st == Status::kOk) st = send(tx, ep, k);
      }
    }
    return st == Status::kOk ? tx.wait_sent(n) : st;  // leave no completion behind for the next run
  }
  GV_TX_STEP
  template <class Tx>
  GV_HD Status send(Tx& tx, const Endpoint& ep, std::uint64_t k) const {
    // The peer has taken message k - 1: the buffer is ours again.
    if (const Status st = tx.produce(ep.out + bytes - 1, tag(k)); st != Status::kOk) return st;
    if (k >= kWindow)
      if (const Status st = tx.wait_sent(k + 1 - kWindow); st != Status::kOk) return st;
    return tx.post(k);
  }
  GV_TX_STEP
  template <class Tx>
  GV_HD Status receive(Tx& tx, const Endpoint& ep, std::uint64_t k) const {
    if (completion) {
      const Status st = tx.wait_recv(k);
      return st == Status::kOk ? tx.consume(ep.in + bytes - 1, tag(k)) : st;
    }
    // The executor of the peer's WRITEs stores the last byte last, with release at the scope
    // our QP records for it (rq_executor: the GPU for an engine on this GPU, else the system).
    const std::uint8_t want = tag(k);
    const std::uint8_t* last = ep.in + bytes - 1;
    return gv::sync::bounded_wait([&] { return gv::sync::load_acquire(last, ep.qp.rq_executor) == want; },
                                  gv::Budget{}, tx.abort());
  }
};

/// bw and msgrate: role r streams n WRITEs from endpoint 2r into endpoint 2r + 1, at most
/// kWindow in flight. t[2g] is when group g (the WRs one CQE covers) was first posted,
/// t[2g + 1] when its completion was seen.
struct Stream {
  std::uint32_t bytes;
  std::uint64_t n;

  GV_HD int endpoint(int role) const { return 2 * role; }
  GV_HD WrPlan plan(const Endpoint& ep) const {
    WrPlan p;
    p.flags = bytes <= kMaxInline ? gv::ib::kWrInline : 0u;
    p.sge = Sge{reinterpret_cast<std::uint64_t>(ep.out), bytes, ep.lkey};
    p.remote = reinterpret_cast<std::uint64_t>(ep.peer_in);
    p.rkey = ep.peer_rkey;
    p.n = n;
    return p;
  }
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t* t) const {
    Status st = tx.start();
    std::uint64_t timed = 0;  // groups whose completion time is recorded
    const auto settle = [&](std::uint64_t min) {
      st = tx.wait_sent(min);
      const std::uint64_t now = gv::sync::now_ns();
      for (; timed * kSignalEvery < tx.done(); ++timed) t[2 * timed + 1] = now;
    };
    for (std::uint64_t k = 0; k < n && st == Status::kOk; ++k) {
      if (k >= tx.done() + kWindow) {
        settle(k + 1 - kWindow);
        if (st != Status::kOk) break;
      }
      if (k % kSignalEvery == 0) t[2 * (k / kSignalEvery)] = gv::sync::now_ns();
      st = tx.post(k);
    }
    if (st == Status::kOk) settle(n);
    return st;
  }
};

/// atomics: role 0 (endpoint 0) applies n atomics to the first word of endpoint 1's buffer, one
/// at a time; lat_ns[k] is atomic k's post-to-completion time. The old value lands in the
/// first word of endpoint 0's outgoing region.
struct Atomic {
  bool cas;
  std::uint64_t n;

  GV_HD int endpoint(int) const { return 0; }
  GV_HD WrPlan plan(const Endpoint& ep) const {
    WrPlan p;
    p.opcode = cas ? WrOpcode::kAtomicCmpSwp : WrOpcode::kAtomicFetchAdd;
    p.sge = Sge{reinterpret_cast<std::uint64_t>(ep.out), 8, ep.lkey};
    p.remote = reinterpret_cast<std::uint64_t>(ep.peer_in);
    p.rkey = ep.peer_rkey;
    p.n = n;
    p.signal_every = 1;
    return p;
  }
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t* lat_ns) const {
    Status st = tx.start();
    for (std::uint64_t k = 0; k < n && st == Status::kOk; ++k) {
      const std::uint64_t t0 = gv::sync::now_ns();
      st = tx.post(k);
      if (st == Status::kOk) st = tx.wait_sent(k + 1);
      lat_ns[k] = gv::sync::now_ns() - t0;
    }
    return st;
  }
};

/// Where the roles of a run report: role r's status, and its samples at
/// [r * cap, (r + 1) * cap) (memory the roles' kernels or threads write).
struct RoleResults {
  Status* status = nullptr;
  std::uint64_t* samples = nullptr;
  std::uint64_t cap = 0;
  GV_HD std::uint64_t* samples_of(int role) const { return samples + static_cast<std::uint64_t>(role) * cap; }
};

}  // namespace gv::bench
