// The software HCA's semantics: one implementation, compiled into the CPU engine (a host
// thread) and the GPU engine (a persistent kernel). It parses mlx5 WQEs exactly as posted by
// device_api/ib, checks them (format, keys, bounds, access, protection domain, QP state),
// executes them with RC semantics and writes mlx5 CQEs, including error CQEs with the
// syndrome ConnectX would report, QP transitions to error and flush completions.
//
// RC ordering: an engine executes one QP's WQEs one at a time, in order, each to completion
// before the next starts, so the fence bit (FM) is satisfied by construction.
//
// The engine supplies an Env:
//   Arena&   env.own()                    this engine's arena
//   Arena*   env.peer(const QpCtx&)       the peer QP's arena, or null if unreachable
//   void     env.copy(void* d, const void* s, uint64_t n, bool publish)
//              move n bytes; with `publish` the last byte is stored last, with release, so
//              a receiver polling the last byte sees the whole message (PCIe write order)
//   uint64_t env.fetch_add(uint64_t* t, uint64_t v)
//   uint64_t env.compare_swap(uint64_t* t, uint64_t expected, uint64_t desired)
//              the responder's 8-byte atomics on a resolved target; both return the value
//              found. Atomic with respect to every other verbs atomic of this process's engines
//              (IBV_ATOMIC_HCA), not necessarily with respect to other stores to the target
//   uint8_t  env.take_fault()            0, or the syndrome of a data movement that failed
//              since the last call (a CPU engine's CUDA copy); finish() fails the WQE with it
//   uint64_t env.now_ns()
//   int32_t  env.self_pid()              process whose private (non-arena) memory we reach
//   Scope    env.scope(const Arena&)     scope whose observers must see this engine's stores to
//              that arena: its own GPU for a GPU engine's own arena, the system otherwise
#pragma once
#include <cstdint>
#include <cstring>

#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/mlx5_format.hpp>
#include <gpuverbs/ib/ring.hpp>
#include <gpuverbs/sync.hpp>

#include "contexts.hpp"

namespace gv::soft {

namespace m5 = gv::ib::mlx5;

/// One arena as mapped into the executing engine's address space.
struct Arena {
  std::byte* base = nullptr;
  GV_HD ArenaHeader* hdr() const { return reinterpret_cast<ArenaHeader*>(base); }
  template <class T>
  GV_HD T* at(std::uint64_t off) const { return reinterpret_cast<T*>(base + off); }
  GV_HD MrEntry* mrs() const { return at<MrEntry>(ArenaLayout::kMrs); }
  GV_HD QpCtx* qps() const { return at<QpCtx>(ArenaLayout::kQps); }
  GV_HD CqCtx* cqs() const { return at<CqCtx>(ArenaLayout::kCqs); }
  GV_HD QpCtx* qp(std::uint32_t qpn) const {
    const std::uint32_t slot = qpn - kQpnBase;
    if (qpn < kQpnBase || slot >= kMaxQps) return nullptr;
    QpCtx* q = qps() + slot;
    return sync::load_acquire(&q->qpn) == qpn ? q : nullptr;
  }
};

/// Minimum qpn-to-slot and key-to-slot mappings, shared with the host library.
GV_HD GV_INLINE constexpr std::uint32_t mr_slot(std::uint32_t key) { return key >> 8; }

GV_HD GV_INLINE QpState qp_state(const QpCtx& q) {
  return static_cast<QpState>(sync::load_acquire(&q.state));
}
GV_HD GV_INLINE void set_qp_error(QpCtx& q) {
  sync::store_release(&q.state, static_cast<std::uint32_t>(QpState::kError));
}

GV_HD GV_INLINE void raise_async(const Arena& a, AsyncEventType type, std::uint32_t number,
                                 std::uint64_t detail) {
  ArenaHeader* h = a.hdr();
  const std::uint64_t i = sync::fetch_add(&h->events_head, std::uint64_t{1});
  AsyncEvent* e = &h->events[i % kAsyncEventSlots];
  sync::store_relaxed(&e->number, number);
  sync::store_relaxed(&e->detail, detail);
  sync::store_release(reinterpret_cast<std::uint32_t*>(&e->type), static_cast<std::uint32_t>(type));
}

/// IB encoding of the minimal RNR NAK timer (IBA table 45), in nanoseconds.
GV_HD GV_INLINE constexpr std::uint64_t rnr_timer_ns(std::uint32_t code) {
  constexpr std::uint32_t us[32] = {655360, 10,    20,    30,    40,    60,    80,    120,
                                    160,    240,   320,   480,   640,   960,   1280,  1920,
                                    2560,   3840,  5120,  7680,  10240, 15360, 20480, 30720,
                                    40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::uint64_t{us[code & 31]} * 1000;
}

// ---- Memory translation ----------------------------------------------------------------------

enum class MemCheck : std::uint8_t { kOk, kNoKey, kPd, kBounds, kAccess, kUnreachable };

/// Resolve [addr, addr+len) under `key` of arena `a` to a pointer of this engine, checking
/// the key, protection domain, bounds and access rights. len == 0 needs no key (IB).
GV_HD GV_INLINE MemCheck resolve(const Arena& a, std::int32_t self_pid, std::uint32_t key,
                                 std::uint64_t addr, std::uint64_t len, std::uint32_t pdn,
                                 std::uint32_t need, std::byte*& out) {
  out = nullptr;
  if (len == 0) return MemCheck::kOk;
  const std::uint32_t slot = mr_slot(key);
  if (slot >= kMaxMrs) return MemCheck::kNoKey;
  const MrEntry* entry = a.mrs() + slot;
  if (sync::load_acquire(&entry->key) != key || key == 0) return MemCheck::kNoKey;
  const MrEntry e = *entry;  // one round of independent loads, not one per check
  const MrEntry* mr = &e;
  if (mr->pdn != pdn) return MemCheck::kPd;
  if (addr < mr->addr || len > mr->length || addr - mr->addr > mr->length - len)
    return MemCheck::kBounds;
  if ((mr->access & need) != need) return MemCheck::kAccess;
  if (mr->in_arena) {
    out = a.base + mr->arena_off + (addr - mr->addr);
  } else if (a.hdr()->pid == self_pid) {
    out = reinterpret_cast<std::byte*>(addr);
  } else {
    return MemCheck::kUnreachable;  // private memory of another process
  }
  return MemCheck::kOk;
}

// ---- Completions ---------------------------------------------------------------------------

/// Append a CQE to CQ `cq_slot` of arena `a`. Returns false on overrun, after declaring it:
/// the CQ's error flag is raised, an asynchronous event is queued in the CQ's arena and every
/// QP of that arena using the CQ moves to the error state.
GV_HD GV_INLINE bool push_cqe(const Arena& a, std::uint32_t cq_slot, m5::Cqe cqe, sync::Scope scope) {
  CqCtx* cq = a.cqs() + cq_slot;
  // Claiming a slot publishes nothing (the tail store below does): relaxed.
  const std::uint64_t p = sync::fetch_add_relaxed(&cq->produced, std::uint64_t{1});
  const auto* dbrec = a.at<m5::CqDbrec>(cq->dbrec_off);
  const std::uint32_t ci24 = byteswap(sync::load_acquire(&dbrec->set_ci.raw)) & m5::kCqCiMask;
  const std::uint64_t ci = ib::widen_below(p, ci24, 24);
  if (p - ci >= (std::uint64_t{1} << cq->log_cqes)) {
    std::uint32_t expected = 0;
    if (sync::compare_exchange(&cq->error, expected, std::uint32_t{1})) {
      raise_async(a, AsyncEventType::kCqOverrun, cq->cqn, p);
      for (std::uint32_t i = 0; i < kMaxQps; ++i) {
        QpCtx& q = a.qps()[i];
        if (sync::load_acquire(&q.qpn) != 0 && (q.send_cq == cq_slot || q.recv_cq == cq_slot))
          set_qp_error(q);
      }
    }
    return false;
  }
  m5::Cqe* slot = a.at<m5::Cqe>(cq->ring_off) + (p & ((std::uint64_t{1} << cq->log_cqes) - 1));
  cqe.op_own = static_cast<std::uint8_t>((cqe.op_own & 0xfe) | ib::owner_bit(p, cq->log_cqes));
  std::memcpy(slot, &cqe, 60);
  std::uint32_t tail;
  std::memcpy(&tail, reinterpret_cast<const std::byte*>(&cqe) + 60, 4);
  // The owner bit goes last: a poller that sees it sees the whole CQE.
  sync::store_release(reinterpret_cast<std::uint32_t*>(&slot->wqe_counter), tail, scope);
  return true;
}

GV_HD GV_INLINE m5::Cqe make_req_cqe(std::uint32_t qpn, std::uint8_t opcode, std::uint16_t idx,
                                     std::uint32_t byte_len) {
  m5::Cqe c{};
  c.byte_cnt = be32::from(byte_len);
  c.sop_drop_qpn = be32::from((std::uint32_t{opcode} << 24) | qpn);
  c.wqe_counter = be16::from(idx);
  c.op_own = static_cast<std::uint8_t>(m5::kCqeReq << 4);
  return c;
}

GV_HD GV_INLINE m5::Cqe make_err_cqe(bool requester, std::uint32_t qpn, std::uint8_t opcode,
                                     std::uint16_t idx, std::uint8_t syndrome) {
  m5::ErrCqe e{};
  e.syndrome = syndrome;
  e.s_wqe_opcode_qpn = be32::from((std::uint32_t{opcode} << 24) | qpn);
  e.wqe_counter = be16::from(idx);
  e.op_own = static_cast<std::uint8_t>((requester ? m5::kCqeReqErr : m5::kCqeRespErr) << 4);
  m5::Cqe c;
  std::memcpy(&c, &e, sizeof(c));
  return c;
}

// ---- WQE parsing ---------------------------------------------------------------------------

inline constexpr std::uint32_t kMaxSge = 60;  ///< data segments one WQE can hold (ds <= 63)

struct ParsedWqe {
  std::uint8_t opcode = 0;
  std::uint8_t fm_ce_se = 0;
  std::uint32_t ds = 0;
  std::uint32_t nbb = 1;
  be32 imm{0};
  std::uint64_t raddr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0, compare = 0;
  std::uint32_t first_payload_oct = 0;  ///< octoword index where SGEs / inline data start
  bool inl = false;
  std::uint32_t inline_len = 0;
  std::uint32_t num_sge = 0;
  std::uint64_t length = 0;             ///< message length (sum of SGEs or inline length)
};

/// Octoword k of the WQE at WQEBB counter `start`.
GV_HD GV_INLINE ib::Octoword sq_oct(const std::byte* sq, std::uint32_t sq_bbs, std::uint64_t start,
                                    std::uint32_t k) {
  return ib::load_octoword(sq + ib::sq_octoword_offset(start, k, sq_bbs));
}

GV_HD GV_INLINE m5::DataSeg as_data_seg(const ib::Octoword& o) {
  m5::DataSeg d;
  std::memcpy(&d, &o, sizeof(d));
  return d;
}

/// Parse and check the WQE at `start`; `avail` WQEBBs from `start` are published.
/// Returns 0 or the syndrome of a malformed WQE (LOCAL_QP_OP_ERR / LOCAL_LENGTH_ERR).
GV_HD GV_INLINE std::uint8_t parse_wqe(const QpCtx& q, const std::byte* sq, std::uint64_t start,
                                       std::uint64_t avail, ParsedWqe& w) {
  const ib::Octoword c = sq_oct(sq, q.sq_bbs, start, 0);
  const std::uint32_t opmod_idx_opcode = byteswap(c.w[0]);
  const std::uint32_t qpn_ds = byteswap(c.w[1]);
  w.opcode = static_cast<std::uint8_t>(opmod_idx_opcode);
  w.ds = qpn_ds & 0x3f;
  w.fm_ce_se = static_cast<std::uint8_t>(c.w[2] >> 24);
  w.imm = be32{c.w[3]};
  w.nbb = ib::wqe_bbs(w.ds == 0 ? 1 : w.ds);
  if (((opmod_idx_opcode >> 8) & 0xffff) != (start & 0xffff) || (qpn_ds >> 8) != q.qpn ||
      w.ds == 0 || w.nbb > avail)
    return m5::kSyndLocalQpOpErr;
  std::uint32_t head;
  switch (w.opcode) {
    case m5::kOpNop: return w.ds == 1 ? 0 : m5::kSyndLocalQpOpErr;
    case m5::kOpSend: case m5::kOpSendImm: head = 1; break;
    case m5::kOpRdmaWrite: case m5::kOpRdmaWriteImm: case m5::kOpRdmaRead: head = 2; break;
    case m5::kOpAtomicCs: case m5::kOpAtomicFa: head = 3; break;
    default: return m5::kSyndLocalQpOpErr;
  }
  if (w.ds < head) return m5::kSyndLocalQpOpErr;
  if (head >= 2) {
    const ib::Octoword r = sq_oct(sq, q.sq_bbs, start, 1);
    m5::RaddrSeg rs;
    std::memcpy(&rs, &r, sizeof(rs));
    w.raddr = rs.raddr.get();
    w.rkey = rs.rkey.get();
  }
  if (head == 3) {
    const ib::Octoword at = sq_oct(sq, q.sq_bbs, start, 2);
    m5::AtomicSeg as;
    std::memcpy(&as, &at, sizeof(as));
    w.swap_add = as.swap_add.get();
    w.compare = as.compare.get();
  }
  w.first_payload_oct = head;
  const std::uint32_t rest = w.ds - head;
  if (rest == 0) return 0;
  const ib::Octoword first = sq_oct(sq, q.sq_bbs, start, head);
  const std::uint32_t bc = byteswap(first.w[0]);
  if (bc & m5::kInlineSeg) {
    if (w.opcode == m5::kOpRdmaRead || head == 3) return m5::kSyndLocalQpOpErr;
    w.inl = true;
    w.inline_len = bc & ~m5::kInlineSeg;
    if (sizeof(m5::InlineSeg) + w.inline_len > rest * 16u) return m5::kSyndLocalQpOpErr;
    w.length = w.inline_len;
    return 0;
  }
  w.num_sge = rest;
  if (w.num_sge > kMaxSge) return m5::kSyndLocalQpOpErr;
  for (std::uint32_t i = 0; i < w.num_sge; ++i)
    w.length += as_data_seg(sq_oct(sq, q.sq_bbs, start, head + i)).byte_count.get();
  if (head == 3 && (w.num_sge != 1 || w.length != 8)) return m5::kSyndLocalLengthErr;
  if (w.length > 0x80000000ull) return m5::kSyndLocalLengthErr;
  return 0;
}

// ---- The engine step -------------------------------------------------------------------------

/// Outcome of trying to execute one WQE.
enum class Exec : std::uint8_t { kDone, kFailed, kRnrWait };

template <class Env>
class Hca {
 public:
  /// Maximum WQEs one visit executes on one QP, so one busy QP cannot starve the others.
  static constexpr int kBurst = 16;

  /// Serve one QP of this engine's arena: execute rung WQEs, or flush everything after an
  /// error. Returns true if anything happened (for the engine's idle back-off).
  GV_HD static bool step(Env& env, QpCtx& q) {
    // An idle QP costs two polled loads; only a QP with work pays for the acquire fence.
    const auto st = static_cast<QpState>(sync::load_polled(&q.state));
    if (st == QpState::kError) {
      sync::acquire_fence();
      return flush(env, q);
    }
    if (st != QpState::kRts) return false;
    const Arena& a = env.own();
    const std::uint64_t db = sync::load_polled(a.at<std::uint64_t>(q.doorbell_off));
    const bool rung = db != q.last_doorbell;
    if (!rung && q.sq_head >= q.sq_rung) return false;
    // The doorbell record may be newer than the doorbell (another poster's batch): it is read
    // before the fence too, so the fence orders the WQEs it covers.
    const auto* dbrec = a.at<m5::QpDbrec>(q.dbrec_off);
    const std::uint32_t snd = rung ? sync::load_polled(&dbrec->snd.raw) : 0;
    sync::acquire_fence();
    if (rung) {
      q.last_doorbell = db;
      // The doorbell carries the first 8 bytes of the last WQE's control segment.
      const std::uint32_t db_qpn = byteswap(static_cast<std::uint32_t>(db >> 32)) >> 8;
      if (db_qpn != q.qpn) {
        raise_async(a, AsyncEventType::kQpFatal, q.qpn, db);
        set_qp_error(q);
        return true;
      }
      q.sq_rung = ib::widen(q.sq_head, byteswap(snd) & 0xffff, 16);
    }
    bool progressed = false;
    for (int n = 0; n < kBurst && q.sq_head < q.sq_rung; ++n) {
      if (q.rnr_active && env.now_ns() < q.rnr_resume_ns) break;
      ParsedWqe w;
      const Exec e = execute(env, q, w);
      if (e == Exec::kRnrWait) break;
      progressed = true;
      q.rnr_active = 0;
      q.sq_head += w.nbb;
      if (e == Exec::kFailed) {
        set_qp_error(q);
        break;
      }
    }
    return progressed;
  }

 private:
  struct Peer {
    const Arena* arena = nullptr;
    QpCtx* qp = nullptr;
  };

  GV_HD static bool find_peer(Env& env, const QpCtx& q, Peer& p) {
    p.arena = env.peer(q);
    if (p.arena == nullptr) return false;
    p.qp = p.arena->qp(q.peer_qpn);  // acquire: its fields below were written before
    if (p.qp == nullptr) return false;
    const std::uint32_t peer_of_peer = p.qp->peer_qpn;
    // Polled, not fenced on the GPU: the acquire of the qpn above already read past stale lines.
    const auto s = static_cast<QpState>(sync::load_polled(&p.qp->state));
    return peer_of_peer == q.qpn && (s == QpState::kRtr || s == QpState::kRts);
  }

  GV_HD static std::uint8_t local_syndrome(MemCheck c) {
    return c == MemCheck::kOk ? 0 : m5::kSyndLocalProtErr;
  }

  /// Complete the WQE at sq_head: success CQE if signaled, error CQE always.
  GV_HD static Exec finish(Env& env, QpCtx& q, const ParsedWqe& w, std::uint8_t syndrome) {
    const Arena& a = env.own();
    const auto idx = static_cast<std::uint16_t>(q.sq_head);
    if (const std::uint8_t fault = env.take_fault(); syndrome == 0) syndrome = fault;
    if (syndrome != 0) {
      push_cqe(a, q.send_cq, make_err_cqe(true, q.qpn, w.opcode, idx, syndrome), env.scope(a));
      return Exec::kFailed;
    }
    if (w.fm_ce_se & m5::kCtrlCqUpdate) {
      const bool reports_len = w.opcode == m5::kOpRdmaRead || w.opcode == m5::kOpAtomicCs ||
                               w.opcode == m5::kOpAtomicFa;
      push_cqe(a, q.send_cq,
               make_req_cqe(q.qpn, w.opcode, idx, reports_len ? static_cast<std::uint32_t>(w.length) : 0),
               env.scope(a));
    }
    return Exec::kDone;
  }

  /// Take the responder's next receive WQE, or report that none is posted.
  GV_HD static bool claim_recv(const Arena& pa, QpCtx& pq, std::uint64_t& idx) {
    const auto* dbrec = pa.at<m5::QpDbrec>(pq.dbrec_off);
    for (;;) {
      const std::uint64_t h = sync::load_acquire(&pq.rq_head);
      const std::uint64_t avail =
          ib::widen(h, byteswap(sync::load_acquire(&dbrec->rcv.raw)) & 0xffff, 16);
      if (h >= avail) return false;
      std::uint64_t expected = h;
      if (sync::compare_exchange(&pq.rq_head, expected, h + 1)) {
        idx = h;
        return true;
      }
    }
  }

  /// RNR: the responder has no receive WQE. Retry after its RNR timer, up to rnr_retry times
  /// (7 = forever); then fail the WQE with RNR_RETRY_EXC_ERR.
  GV_HD static Exec rnr(Env& env, QpCtx& q, const QpCtx& pq, const ParsedWqe& w) {
    if (!q.rnr_active) {
      q.rnr_active = 1;
      q.rnr_left = q.rnr_retry;
    }
    if (q.rnr_left == 0) {
      q.rnr_active = 0;
      return finish(env, q, w, m5::kSyndRnrRetryExcErr);
    }
    if (q.rnr_retry != 7) --q.rnr_left;
    q.rnr_resume_ns = env.now_ns() + rnr_timer_ns(pq.min_rnr_timer);
    return Exec::kRnrWait;
  }

  /// Deliver a SEND's payload into the responder's receive WQE `ridx`. Returns the
  /// responder-side syndrome (0 on success).
  GV_HD static std::uint8_t scatter_recv(Env& env, const QpCtx& q, const std::byte* sq,
                                         const ParsedWqe& w, const Arena& pa, const QpCtx& pq,
                                         std::uint64_t ridx) {
    const std::byte* rwqe = pa.at<std::byte>(pq.rq_off) +
                            (std::uint64_t{ib::ring_slot(ridx, pq.rq_wqes)} << pq.rq_stride_shift);
    std::byte* dst[kMaxSge];
    std::uint64_t cap[kMaxSge];
    std::uint32_t n = 0;
    std::uint64_t total = 0;
    for (; n < pq.max_recv_sge && n < kMaxSge; ++n) {
      const m5::DataSeg d = as_data_seg(ib::load_octoword(rwqe + 16 * n));
      if (d.lkey.get() == m5::kInvalidLkey) break;
      const MemCheck c = resolve(pa, env.self_pid(), d.lkey.get(), d.addr.get(),
                                 d.byte_count.get(), pq.pdn, gv::kLocalWrite, dst[n]);
      if (c != MemCheck::kOk) return m5::kSyndLocalProtErr;
      cap[n] = d.byte_count.get();
      total += cap[n];
    }
    if (w.length > total) return m5::kSyndLocalLengthErr;
    std::uint64_t left = w.length, off = 0;
    for (std::uint32_t i = 0; i < n && left > 0; ++i) {
      const std::uint64_t take = cap[i] < left ? cap[i] : left;
      copy_payload(env, q, sq, w, off, take, dst[i], left == take);
      off += take;
      left -= take;
    }
    return 0;
  }

  /// Copy payload bytes [off, off+len) of the WQE (SGEs or inline data, which may wrap
  /// around the ring end) to dst. Local keys were checked by execute().
  GV_HD static void copy_payload(Env& env, const QpCtx& q, const std::byte* sq,
                                       const ParsedWqe& w, std::uint64_t off, std::uint64_t len,
                                       std::byte* dst, bool publish) {
    const Arena& a = env.own();
    const std::uint64_t end = off + len;
    if (w.inl) {
      for (std::uint64_t p = off; p < end;) {
        const std::uint64_t pos = sizeof(m5::InlineSeg) + p;
        const std::uint32_t k = w.first_payload_oct + static_cast<std::uint32_t>(pos / 16);
        const std::uint32_t in = static_cast<std::uint32_t>(pos % 16);
        const std::uint64_t n = (16 - in) < (end - p) ? (16 - in) : (end - p);
        env.copy(dst + (p - off), sq + ib::sq_octoword_offset(q.sq_head, k, q.sq_bbs) + in, n,
                 publish && p + n == end);
        p += n;
      }
      return;
    }
    std::uint64_t base = 0;
    for (std::uint32_t i = 0; i < w.num_sge && base < end; ++i) {
      const m5::DataSeg d = as_data_seg(sq_oct(sq, q.sq_bbs, q.sq_head, w.first_payload_oct + i));
      const std::uint64_t n = d.byte_count.get();
      const std::uint64_t lo = off > base ? off : base;
      const std::uint64_t hi = end < base + n ? end : base + n;
      if (lo < hi) {
        std::byte* src;
        resolve(a, env.self_pid(), d.lkey.get(), d.addr.get(), n, q.pdn, 0, src);
        env.copy(dst + (lo - off), src + (lo - base), hi - lo, publish && hi == end);
      }
      base += n;
    }
  }

  GV_HD static Exec execute(Env& env, QpCtx& q, ParsedWqe& w) {
    const Arena& a = env.own();
    const std::byte* sq = a.at<std::byte>(q.sq_off);
    const std::uint8_t bad = parse_wqe(q, sq, q.sq_head, q.sq_rung - q.sq_head, w);
    if (bad != 0) return finish(env, q, w, bad);
    if (w.opcode == m5::kOpNop) return finish(env, q, w, 0);

    // Local checks first: a bad lkey fails before anything reaches the wire.
    if (!w.inl) {
      const std::uint32_t need =
          (w.opcode == m5::kOpRdmaRead || w.opcode == m5::kOpAtomicCs || w.opcode == m5::kOpAtomicFa)
              ? std::uint32_t{gv::kLocalWrite}
              : std::uint32_t{0};
      for (std::uint32_t i = 0; i < w.num_sge; ++i) {
        const m5::DataSeg d = as_data_seg(sq_oct(sq, q.sq_bbs, q.sq_head, w.first_payload_oct + i));
        std::byte* p;
        const MemCheck c = resolve(a, env.self_pid(), d.lkey.get(), d.addr.get(),
                                   d.byte_count.get(), q.pdn, need, p);
        if (c != MemCheck::kOk) return finish(env, q, w, local_syndrome(c));
      }
    }

    Peer peer;
    if (!find_peer(env, q, peer)) return finish(env, q, w, m5::kSyndTransportRetryExcErr);
    const Arena& pa = *peer.arena;
    QpCtx& pq = *peer.qp;

    switch (w.opcode) {
      case m5::kOpRdmaWrite:
      case m5::kOpRdmaWriteImm: {
        std::byte* dst = nullptr;
        if (w.length != 0) {
          if ((pq.access & gv::kRemoteWrite) == 0) return finish(env, q, w, m5::kSyndRemoteAccessErr);
          if (resolve(pa, env.self_pid(), w.rkey, w.raddr, w.length, pq.pdn, gv::kRemoteWrite, dst) !=
              MemCheck::kOk)
            return finish(env, q, w, m5::kSyndRemoteAccessErr);
        }
        std::uint64_t ridx = 0;
        if (w.opcode == m5::kOpRdmaWriteImm && !claim_recv(pa, pq, ridx)) return rnr(env, q, pq, w);
        if (w.length != 0) copy_payload(env, q, sq, w, 0, w.length, dst, true);
        if (w.opcode == m5::kOpRdmaWriteImm) {
          m5::Cqe c{};
          c.byte_cnt = be32::from(static_cast<std::uint32_t>(w.length));
          c.imm_inval_pkey = w.imm;
          c.sop_drop_qpn = be32::from(pq.qpn);
          c.wqe_counter = be16::from(static_cast<std::uint16_t>(ridx));
          c.op_own = static_cast<std::uint8_t>((m5::kCqeRespWrImm << 4) |
                                               ((w.fm_ce_se & m5::kCtrlSolicited) ? 2 : 0));
          push_cqe(pa, pq.recv_cq, c, env.scope(pa));
        }
        return finish(env, q, w, 0);
      }
      case m5::kOpSend:
      case m5::kOpSendImm: {
        std::uint64_t ridx;
        if (!claim_recv(pa, pq, ridx)) return rnr(env, q, pq, w);
        const std::uint8_t rs = scatter_recv(env, q, sq, w, pa, pq, ridx);
        if (rs != 0) {
          // The responder consumed the receive WQE and fails it; its QP enters error, and
          // the requester learns of it through the NAK's syndrome.
          push_cqe(pa, pq.recv_cq,
                   make_err_cqe(false, pq.qpn, 0, static_cast<std::uint16_t>(ridx), rs), env.scope(pa));
          set_qp_error(pq);
          return finish(env, q, w,
                        rs == m5::kSyndLocalLengthErr ? m5::kSyndRemoteInvalReqErr : m5::kSyndRemoteOpErr);
        }
        m5::Cqe c{};
        c.byte_cnt = be32::from(static_cast<std::uint32_t>(w.length));
        c.imm_inval_pkey = w.opcode == m5::kOpSendImm ? w.imm : be32{0};
        c.sop_drop_qpn = be32::from(pq.qpn);
        c.wqe_counter = be16::from(static_cast<std::uint16_t>(ridx));
        c.op_own = static_cast<std::uint8_t>(
            ((w.opcode == m5::kOpSendImm ? m5::kCqeRespSendImm : m5::kCqeRespSend) << 4) |
            ((w.fm_ce_se & m5::kCtrlSolicited) ? 2 : 0));
        push_cqe(pa, pq.recv_cq, c, env.scope(pa));
        return finish(env, q, w, 0);
      }
      case m5::kOpRdmaRead: {
        std::byte* src = nullptr;
        if (w.length != 0) {
          if ((pq.access & gv::kRemoteRead) == 0) return finish(env, q, w, m5::kSyndRemoteAccessErr);
          if (resolve(pa, env.self_pid(), w.rkey, w.raddr, w.length, pq.pdn, gv::kRemoteRead, src) !=
              MemCheck::kOk)
            return finish(env, q, w, m5::kSyndRemoteAccessErr);
        }
        std::uint64_t off = 0;
        for (std::uint32_t i = 0; i < w.num_sge; ++i) {
          const m5::DataSeg d = as_data_seg(sq_oct(sq, q.sq_bbs, q.sq_head, w.first_payload_oct + i));
          std::byte* dst;
          resolve(a, env.self_pid(), d.lkey.get(), d.addr.get(), d.byte_count.get(), q.pdn,
                  gv::kLocalWrite, dst);
          const std::uint64_t n = d.byte_count.get();
          if (n != 0) env.copy(dst, src + off, n, off + n == w.length);
          off += n;
        }
        return finish(env, q, w, 0);
      }
      case m5::kOpAtomicCs:
      case m5::kOpAtomicFa: {
        if ((pq.access & gv::kRemoteAtomic) == 0) return finish(env, q, w, m5::kSyndRemoteAccessErr);
        if (w.raddr % 8 != 0) return finish(env, q, w, m5::kSyndRemoteInvalReqErr);
        std::byte* target;
        if (resolve(pa, env.self_pid(), w.rkey, w.raddr, 8, pq.pdn, gv::kRemoteAtomic, target) !=
            MemCheck::kOk)
          return finish(env, q, w, m5::kSyndRemoteAccessErr);
        auto* t = reinterpret_cast<std::uint64_t*>(target);
        std::uint64_t old;
        if (w.opcode == m5::kOpAtomicFa) {
          old = env.fetch_add(t, w.swap_add);
        } else {
          old = env.compare_swap(t, w.compare, w.swap_add);
        }
        const m5::DataSeg d = as_data_seg(sq_oct(sq, q.sq_bbs, q.sq_head, w.first_payload_oct));
        std::byte* res;
        resolve(a, env.self_pid(), d.lkey.get(), d.addr.get(), 8, q.pdn, gv::kLocalWrite, res);
        // The original value lands in host byte order (ConnectX in host-endian atomic mode).
        env.copy(res, &old, 8, true);
        return finish(env, q, w, 0);
      }
      default:
        return finish(env, q, w, m5::kSyndLocalQpOpErr);
    }
  }

  /// After an error, every posted WQE completes with WR_FLUSH_ERR, signaled or not, and so
  /// does every posted receive WQE. No doorbell is needed to flush.
  GV_HD static bool flush(Env& env, QpCtx& q) {
    const Arena& a = env.own();
    bool any = false;
    q.rnr_active = 0;
    const auto* dbrec = a.at<m5::QpDbrec>(q.dbrec_off);
    const std::uint64_t posted =
        ib::widen(q.sq_head, byteswap(sync::load_acquire(&dbrec->snd.raw)) & 0xffff, 16);
    const std::byte* sq = a.at<std::byte>(q.sq_off);
    while (q.sq_head < posted) {
      const ib::Octoword c = sq_oct(sq, q.sq_bbs, q.sq_head, 0);
      const std::uint32_t ds = byteswap(c.w[1]) & 0x3f;
      const std::uint32_t nbb = ib::wqe_bbs(ds == 0 ? 1 : ds);
      push_cqe(a, q.send_cq, make_err_cqe(true, q.qpn, static_cast<std::uint8_t>(byteswap(c.w[0])),
                                          static_cast<std::uint16_t>(q.sq_head), m5::kSyndWrFlushErr),
               env.scope(a));
      q.sq_head += nbb;
      any = true;
    }
    q.sq_rung = q.sq_head;
    std::uint64_t ridx;
    while (claim_recv(a, q, ridx)) {
      push_cqe(a, q.recv_cq, make_err_cqe(false, q.qpn, 0, static_cast<std::uint16_t>(ridx),
                                          m5::kSyndWrFlushErr),
               env.scope(a));
      any = true;
    }
    return any;
  }
};

}  // namespace gv::soft
