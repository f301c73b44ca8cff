// The software HCA's semantics: one implementation, compiled into the CPU engine (a host
// thread) and the GPU engine (a persistent kernel). It parses mlx5 WQEs exactly as posted by
// device_api/ib, checks them (format, keys, bounds, access, protection domain, QP state),
// executes them with RC semantics and writes mlx5 CQEs, including error CQEs with the
// syndrome ConnectX would report, QP transitions to error and flush completions.
//
// RC ordering: an engine executes one QP's WQEs one at a time, in order, each to completion
// before the next starts, so the fence bit (FM) is satisfied by construction.
//
// The engine supplies an Env: the 14 operations of the EngineEnv concept (env.hpp), which
// both engines static_assert and Hca requires.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <gpuverbs/ib/cqe.hpp>
#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/mlx5_format.hpp>
#include <gpuverbs/ib/ring.hpp>
#include <gpuverbs/sync.hpp>

#include "arena.hpp"
#include "completions.hpp"
#include "contexts.hpp"
#include "env.hpp"
#include "qp_visit.hpp"
#include "translate.hpp"
#include "wqe.hpp"

namespace gv::soft {

namespace m5 = gv::ib::mlx5;

/// Outcome of trying to execute one WQE.
enum class Exec : std::uint8_t {
  kDone,
  kFailed,
  kRnrWait,   ///< the responder has no receive WQE: retried after the RNR timer
  kDeferred,  ///< not started: left to a later visit (Env::may_move)
};

/// The peer QP's fields, in one round of loads.
GV_HD GV_INLINE PeerQp load_peer_qp(const QpCtx* q) {
  PeerQp v;
  v.qpn = load_key(&q->qpn);
  v.state = load_field(&q->state);
  v.pdn = load_field(&q->pdn);
  v.access = load_field(&q->access);
  v.recv_cq = load_field(&q->recv_cq);
  v.rq_wqes = load_field(&q->rq_wqes);
  v.rq_stride_shift = load_field(&q->rq_stride_shift);
  v.max_recv_sge = load_field(&q->max_recv_sge);
  v.min_rnr_timer = load_field(&q->min_rnr_timer);
  v.peer_qpn = load_field(&q->peer_qpn);
  v.rq_off = load_field(&q->rq_off);
  v.dbrec_off = load_field(&q->dbrec_off);
  return v;
}

template <EngineEnv Env>
class Hca {
 public:
  /// Maximum WQEs one visit executes on one QP, so one busy QP cannot starve the others.
  static constexpr int kBurst = 16;

  /// Serve one QP of this engine's arena (q holds a QP): execute rung WQEs, or flush
  /// everything after an error. Returns true if anything happened (for idle back-off).
  GV_HD GV_INLINE static bool step(Env& env, QpCtx& q) { return serve(env, q, false, nullptr); }

  /// step() for a table slot that may be free: its qpn is loaded in the same round as its
  /// doorbell (a free slot's stale offsets still point into the arena, so those loads are
  /// harmless). For the GPU engine; on the host the qpn's acquire must come first. With `kept`
  /// (the engine's copy of this slot's last visit, KeptVisit; null: none), a visit starts from
  /// it while it is valid and leaves it valid for the next one.
  GV_HD GV_INLINE static bool step_slot(Env& env, QpCtx& q, KeptVisit* kept = nullptr) {
    return serve(env, q, true, kept);
  }

 private:
  /// What a visit knows of the responder: its QP's connection fields and state, and the MR of
  /// one remote key, kept in the requester's QpCtx across visits for kKeptNs (a peer GPU's
  /// tables are a round trip over NVLink away). A change on the responder's side (its QP leaving
  /// RTS, a deregistration, a destroyed QP) is seen by every visit that starts kKeptNs after it
  /// (the host library's calls return only then); within a visit the WQEs execute as if at
  /// once, which an HCA's translation caches also allow.
  struct Responder {
    Arena arena;              ///< the responder's arena (base null: unreachable)
    QpCtx* live = nullptr;    ///< the responder's QpCtx (receive counter, error state); null: unreachable
    PeerQp conn;              ///< its connection fields
    std::uint32_t mr_key = 0;  ///< key of `mr` (0: none loaded)
    MrEntry mr{};
    std::uint64_t at = 0;     ///< engine time before `conn` was loaded
    RecvHints* recv = nullptr;  ///< its receive side's hints, where the visit keeps them
    bool loaded = false;      ///< this visit loaded something its QpCtx does not keep yet
  };

  /// The responder as the visit begins: what the QP kept (`k`), for kKeptNs after it was
  /// loaded; otherwise its QP's fields, and the MR of the remote key this QP named last (a
  /// stream of WRITEs names one region), loaded before the first WQE is parsed, so that across
  /// GPUs the round trip runs beside the WQE's own loads and parse. A WQE naming another key
  /// loads its MR (execute()).
  GV_HD GV_INLINE static Responder reach(Env& env, const QpVisit& v, const KeptResponder& k, RecvHints* recv) {
    Responder r;
    r.recv = recv;
    r.arena = env.peer(v);
    const std::uint32_t pslot = v.peer_qpn - kQpnBase;
    if (r.arena.base == nullptr || v.peer_qpn < kQpnBase || pslot >= kMaxQps) return r;
    r.live = r.arena.qps() + pslot;
    const std::uint64_t now = env.now_ns();
    // (A clock that went back reads as expired.)
    if (k.at != 0 && now - k.at < kKeptNs) {
      r.at = k.at;
      r.conn = k.conn;
      r.mr_key = k.mr_key;
      r.mr = k.mr;
      return r;
    }
    r.at = now;
    r.loaded = true;
    *recv = RecvHints{};  // and the QP's own, which a later visit may start from
    v.ctx->recv = RecvHints{};
    r.conn = load_peer_qp(r.live);
    if (v.last_rkey != 0) {
      r.mr = load_mr(r.arena, v.last_rkey, 1);
      r.mr_key = v.last_rkey;
    }
    return r;
  }

  /// What the visit knows of the responder, as a later visit may keep it. An MR whose key did
  /// not match is not kept (a later registration may give that key).
  GV_HD GV_INLINE static KeptResponder kept_of(const Responder& r) {
    KeptResponder k{};
    k.at = r.at;
    k.conn = r.conn;
    k.mr_key = r.mr.key == r.mr_key ? r.mr_key : 0;
    k.mr = r.mr;
    return k;
  }

  GV_HD GV_INLINE static bool serve(Env& env, QpCtx& q, bool check_qpn, KeptVisit* kept) {
    const Arena& a = env.own();
    // A valid kept visit says where the doorbells lie and what was executed, on chip;
    // otherwise the QP's own fields do.
    const bool cached = kept != nullptr && kept->valid != 0;
    // One round of polled loads (qpn, state, doorbell, doorbell record) for an idle QP. The
    // record is loaded with acquire: what it publishes (the WQEs) is then ordered before the
    // visit's loads, and a kept visit needs no fence (a visit from the QP's memory fences).
    const auto* dbrec = a.at<m5::QpDbrec>(cached ? kept->v.dbrec_off : q.dbrec_off);
    const auto* doorbell = a.at<std::uint64_t>(cached ? kept->doorbell_off : q.doorbell_off);
    const std::uint64_t head = cached ? kept->v.sq_head : q.sq_head;
    const std::uint64_t rung_to = cached ? kept->v.sq_rung : q.sq_rung;
    const std::uint64_t last_db = cached ? kept->v.last_doorbell : q.last_doorbell;
    std::uint32_t live;
    QpState st;
    std::uint64_t db, rec;
    bool nothing;  // no doorbell rung, and no WQE published past those executed
    for (std::uint32_t polls = 1;; ++polls) {
      live = check_qpn ? sync::load_polled(&q.qpn) : 1u;
      st = static_cast<QpState>(sync::load_polled(&q.state));
      db = sync::load_polled(doorbell);
      rec = ib::widen(head, m5::dbrec_counter(byteswap(sync::load_acquire(&dbrec->snd.raw))), m5::kWqeIndexBits);
      nothing = db == last_db && rec <= rung_to && head >= rung_to;
      // An idle QP whose visit is kept may be polled again at once, as the engine decides (the
      // GPU engine's warp, while all its polling lanes hold such QPs, a few rounds a sweep):
      // the sweep around one round of these loads took as long as the round again.
      if (!env.poll_again(cached && live != 0 && st == QpState::kRts && nothing, polls)) break;
    }
    if (kept != nullptr && (live == 0 || st != QpState::kRts)) kept->valid = 0;
    if (live == 0) return false;
    if (st == QpState::kError) {
      sync::acquire_fence();
      QpVisit v = begin_visit(q);
      const bool any = flush(env, v);
      end_visit(v);
      return any;
    }
    if (st != QpState::kRts) return false;
    // The doorbell record says what to execute; the doorbell (the first 8 bytes of the last
    // WQE's control segment) is checked against our qpn. A poster publishes both behind one
    // release with no order between them (QpHandle::record_polled), so either may be seen
    // first: a record not yet seen is taken at a later visit.
    if (nothing) return false;
    const bool rung = db != last_db;
    if (!cached) sync::acquire_fence();
    QpVisit v = cached ? kept->v : begin_visit(q);
    if (rung) {
      v.last_doorbell = db;
      if ((byteswap(static_cast<std::uint32_t>(db >> 32)) >> 8) != v.qpn) {
        raise_async(a, AsyncEventType::kQpFatal, v.qpn, db);
        set_qp_error(q);
        end_visit(v);
        if (kept != nullptr) kept->valid = 0;
        return true;
      }
    }
    if (rec > v.sq_rung) v.sq_rung = rec;
    bool progressed = false, keeps = kept != nullptr;
    Responder r = reach(env, v, cached ? kept->resp : q.resp, cached ? &kept->recv : &q.recv);
    for (int n = 0; n < kBurst && v.sq_head < v.sq_rung; ++n) {
      if (v.rnr_active && env.now_ns() < v.rnr_resume_ns) break;
      ParsedWqe w;
      const Exec e = execute(env, v, w, r);
      // A deferred WQE parks the QP: its warp visits it next, from the QP's memory.
      if (e == Exec::kDeferred) keeps = false;
      if (e == Exec::kRnrWait || e == Exec::kDeferred) break;
      progressed = true;
      v.rnr_active = 0;
      v.sq_head += w.nbb;
      if (e == Exec::kFailed) {  // finish() put the QP in error
        keeps = false;
        break;
      }
    }
    end_visit(v);
    const KeptResponder k = kept_of(r);
    if (r.loaded) q.resp = k;
    if (keeps) {
      if (!cached) {
        kept->doorbell_off = q.doorbell_off;
        kept->recv = q.recv;
      }
      kept->v = v;
      kept->resp = k;
      kept->valid = 1;
    } else if (kept != nullptr) {
      kept->valid = 0;
    }
    env.settle();
    return progressed;
  }

  GV_HD GV_INLINE static std::uint8_t local_syndrome(MemCheck c) {
    return c == MemCheck::kOk ? 0 : m5::kSyndLocalProtErr;
  }

  /// Complete the WQE at sq_head: success CQE if signaled, error CQE always. The data moved
  /// so far is settled (visible to its observers) before a CQE. A failed WQE puts its QP in the
  /// error state before its CQE is written, so whoever polls that CQE finds the QP in error, as
  /// on a ConnectX (the other order let a fast poller see the QP still in RTS).
  GV_HD GV_INLINE static Exec finish(Env& env, QpVisit& q, const ParsedWqe& w, std::uint8_t syndrome) {
    const Arena& a = env.own();
    const auto idx = static_cast<std::uint16_t>(q.sq_head);
    if (const std::uint8_t fault = env.take_fault(); syndrome == 0) syndrome = fault;
    if (syndrome != 0) {
      set_qp_error(*q.ctx);
      env.settle();
      push_cqe(a, q.send_cq, ib::make_err_cqe(true, q.qpn, w.opcode, idx, syndrome), env.scope(a));
      return Exec::kFailed;
    }
    if (w.fm_ce_se & m5::kCtrlCqUpdate) {
      const bool reports_len = w.opcode == m5::kOpRdmaRead || w.opcode == m5::kOpAtomicCs ||
                               w.opcode == m5::kOpAtomicFa;
      env.settle();
      push_cqe(a, q.send_cq,
               ib::make_req_cqe(q.qpn, w.opcode, idx, reports_len ? static_cast<std::uint32_t>(w.length) : 0),
               env.scope(a));
    }
    return Exec::kDone;
  }

  /// Take the next receive WQE of the QP whose doorbell record lies at `dbrec_off` of `pa`
  /// and whose receive counter is `rq_head`, or report that none is posted. `posted`: the
  /// count of posted receives the record said.
  GV_HD GV_INLINE static bool claim_recv(const Arena& pa, std::uint64_t dbrec_off, std::uint64_t* rq_head,
                               std::uint64_t& idx, std::uint64_t& posted) {
    const auto* dbrec = pa.at<m5::QpDbrec>(dbrec_off);
    for (;;) {
      // Counter and record in one round (a round trip each, for a peer GPU's QP).
      const std::uint64_t h = sync::load_polled(rq_head);
      const std::uint32_t rcv = sync::load_polled(&dbrec->rcv.raw);
      sync::acquire_fence();
      posted = ib::widen(h, m5::dbrec_counter(byteswap(rcv)), m5::kWqeIndexBits);
      if (h >= posted) return false;
      std::uint64_t expected = h;
      if (sync::compare_exchange(rq_head, expected, h + 1)) {
        idx = h;
        return true;
      }
    }
  }

  /// claim_recv() on the responder `r`, first as its hints say: the receive this requester
  /// claims next, if below the posted count it read before (the count only grows, and that
  /// read's acquire made those receives' contents visible), is taken by one CAS, which fails
  /// only if the responder's engine flushed it. Otherwise, or then, the full claim (for a peer
  /// GPU's QP, a round trip and a fence fewer a message).
  GV_HD GV_INLINE static bool claim_peer_recv(const PeerQp& pv, const Responder& r, std::uint64_t& idx) {
    RecvHints& h = *r.recv;
    std::uint64_t* head = &r.live->rq_head;
    if (h.rq_next < h.rq_posted) {
      std::uint64_t expected = h.rq_next;
      if (sync::compare_exchange(head, expected, h.rq_next + 1)) {
        idx = h.rq_next++;
        return true;
      }
    }
    if (!claim_recv(r.arena, pv.dbrec_off, head, idx, h.rq_posted)) return false;
    h.rq_next = idx + 1;
    return true;
  }

  /// RNR: the responder has no receive WQE. Retry after its RNR timer, up to rnr_retry times
  /// (7 = forever); then fail the WQE with RNR_RETRY_EXC_ERR.
  GV_HD GV_INLINE static Exec rnr(Env& env, QpVisit& q, const PeerQp& pv, const ParsedWqe& w) {
    if (!q.rnr_active) {
      q.rnr_active = 1;
      q.rnr_left = q.rnr_retry;
    }
    if (q.rnr_left == 0) {
      q.rnr_active = 0;
      return finish(env, q, w, m5::kSyndRnrRetryExcErr);
    }
    if (q.rnr_retry != 7) --q.rnr_left;
    q.rnr_resume_ns = env.now_ns() + rnr_timer_ns(pv.min_rnr_timer);
    return Exec::kRnrWait;
  }

  /// Deliver a SEND's payload into receive WQE `ridx` of the responder (`pv`: its QP's
  /// connection fields). Returns the responder-side syndrome (0 on success).
  GV_HD GV_INLINE static std::uint8_t scatter_recv(Env& env, const QpVisit& q, const std::byte* sq,
                                         const ParsedWqe& w, const Arena& pa, const PeerQp& pv,
                                         std::uint64_t ridx) {
    const std::byte* rwqe = pa.at<std::byte>(pv.rq_off) +
                            (std::uint64_t{ib::ring_slot(ridx, pv.rq_wqes)} << pv.rq_stride_shift);
    std::byte* dst[kMaxSge];
    std::uint64_t cap[kMaxSge];
    std::uint32_t n = 0;
    std::uint64_t total = 0;
    for (; n < pv.max_recv_sge && n < kMaxSge; ++n) {
      const m5::DataSeg d = as_data_seg(ib::load_octoword(rwqe + 16 * n));
      if (d.lkey.get() == m5::kInvalidLkey) break;
      // A byte_count of 0 means 2 GiB (kZeroByteCount), as in a send WQE: checked as that.
      const std::uint32_t bc = d.byte_count.get();
      cap[n] = bc == 0 ? kZeroByteCount : bc;
      const MemCheck c = resolve(pa, q.peer_pid, env.self_pid(), d.lkey.get(), d.addr.get(), cap[n], pv.pdn,
                                 gv::kLocalWrite, dst[n]);
      if (c != MemCheck::kOk) return m5::kSyndLocalProtErr;
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

  /// Address of local SGE i of the WQE (checked by execute(), which keeps the first).
  GV_HD GV_INLINE static std::byte* local_sge(Env& env, const QpVisit& q, const ParsedWqe& w,
                                              const m5::DataSeg& d, std::uint32_t i) {
    if (i == 0) return w.local0;
    std::byte* p;
    resolve(env.own(), env.self_pid(), env.self_pid(), d.lkey.get(), d.addr.get(),
            d.byte_count.get(), q.pdn, 0, p);
    return p;
  }

  /// Copy payload bytes [off, off+len) of the WQE (SGEs or inline data, which may wrap
  /// around the ring end) to dst. Local keys were checked by execute().
  GV_HD GV_INLINE static void copy_payload(Env& env, const QpVisit& q, const std::byte* sq,
                                 const ParsedWqe& w, std::uint64_t off, std::uint64_t len,
                                 std::byte* dst, bool publish) {
    const std::uint64_t end = off + len;
    if (w.inl) {
      const std::uint64_t at = std::uint64_t{w.first_payload_oct} * 16 + sizeof(m5::InlineSeg) + off;
      if (len <= 8 && at + len <= 64) {  // in the first WQEBB: from registers, one store
        env.put(dst, first_bb_bytes(w, static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(len)),
                static_cast<std::uint32_t>(len), publish);
        return;
      }
      // From the ring: one move up to its end, and one from its start if the WQE wraps.
      const std::uint64_t ring = std::uint64_t{q.sq_bbs} * m5::kSendWqeBB;
      std::uint64_t pos = ib::sq_octoword_offset(q.sq_head, 0, q.sq_bbs) + at;
      if (pos >= ring) pos -= ring;
      const std::uint64_t first = len < ring - pos ? len : ring - pos;
      env.copy(dst, sq + pos, first, publish && first == len);
      if (first < len) env.copy(dst + first, sq, len - first, publish);
      return;
    }
    std::uint64_t base = 0;
    for (std::uint32_t i = 0; i < w.num_sge && base < end; ++i) {
      const m5::DataSeg d = as_data_seg(wqe_oct(w, sq, q.sq_bbs, q.sq_head, w.first_payload_oct + i));
      const std::uint64_t n = d.byte_count.get();
      const std::uint64_t lo = off > base ? off : base;
      const std::uint64_t hi = end < base + n ? end : base + n;
      if (lo < hi) env.copy(dst + (lo - off), local_sge(env, q, w, d, i) + (lo - base), hi - lo, publish && hi == end);
      base += n;
    }
  }

  /// The common WQE decided at once: an RDMA WRITE (or WRITE_WITH_IMM) of inline data (one
  /// byte or more) into the region the visit already holds (kept, guessed or named by an
  /// earlier WQE), its responder's QP connected back to ours. Every check parse_wqe(),
  /// execute() and check_mr() would make of such a WQE is evaluated here side by side, without
  /// early exits: a few independent compares where the general path is a chain of dependent
  /// branches (the per-step trace of the one-GPU ping-pong put ~1 us of instructions between the
  /// WQE's load and its store; this step took 0.3-0.35 us off the 8 B ping-pong on an H100,
  /// notes/verbs-gpu.md). Returns the data's destination, w set as parse_wqe() sets it; or null,
  /// having decided nothing: the general path then runs, and reports every error.
  GV_HD GV_INLINE static std::byte* fast_write(Env& env, const QpVisit& q, ParsedWqe& w, const Responder& r) {
    const ib::CtrlFields c = ib::decode_ctrl(w.head[0]);
    m5::RaddrSeg rs;
    std::memcpy(&rs, &w.head[1], sizeof(rs));
    const std::uint64_t raddr = rs.raddr.get();
    const std::uint32_t rkey = rs.rkey.get();
    const std::uint32_t bc = byteswap(w.head[2].w[0]);
    const std::uint32_t len = bc & ~m5::kInlineSeg;
    const std::uint32_t nbb = ib::wqe_bbs(c.ds);
    const PeerQp& pv = r.conn;
    const MrEntry& mr = r.mr;
    const auto ps = static_cast<QpState>(pv.state);
    constexpr std::uint32_t need = gv::kRemoteWrite;
    // `&` on purpose: every compare is made, none waits for another's branch.
    const bool wqe_ok = ((c.opcode == m5::kOpRdmaWrite) | (c.opcode == m5::kOpRdmaWriteImm)) &
                        (c.wqe_index == (q.sq_head & m5::kWqeIndexMask)) &
                        (c.qpn == q.qpn) & (c.ds >= 3) & (nbb <= q.sq_rung - q.sq_head) & (nbb <= q.sq_bbs) &
                        ((bc & m5::kInlineSeg) != 0) & (len != 0) &
                        (sizeof(m5::InlineSeg) + len <= (c.ds - 2) * std::uint64_t{16});
    const bool peer_ok = (r.live != nullptr) & (pv.qpn == q.peer_qpn) & (pv.peer_qpn == q.qpn) &
                         ((ps == QpState::kRtr) | (ps == QpState::kRts)) & ((pv.access & need) == need);
    // (An address below the region's start makes raddr - mr.addr larger than any length.)
    const bool mr_ok = (rkey == r.mr_key) & (rkey != 0) & (mr.key == rkey) & (mr.pdn == pv.pdn) &
                       (len <= mr.length) & (raddr - mr.addr <= mr.length - len) &
                       ((mr.access & need) == need) & ((mr.in_arena != 0) | (q.peer_pid == env.self_pid()));
    if (!(wqe_ok & peer_ok & mr_ok)) return nullptr;
    w.opcode = c.opcode;
    w.ds = c.ds;
    w.fm_ce_se = c.fm_ce_se;
    w.imm = c.imm;
    w.nbb = nbb;
    w.raddr = raddr;
    w.rkey = rkey;
    w.first_payload_oct = 2;
    w.inl = true;
    w.inline_len = len;
    w.length = len;
    return mr.in_arena ? r.arena.base + mr.arena_off + (raddr - mr.addr) : reinterpret_cast<std::byte*>(raddr);
  }

  /// A WRITE or WRITE_WITH_IMM whose checks passed (dst: its data's destination, null for no
  /// bytes): the responder's receive claimed (WRITE_WITH_IMM), the data, the receive CQE, the
  /// requester's completion.
  GV_HD GV_INLINE static Exec write_to(Env& env, QpVisit& q, const std::byte* sq, const ParsedWqe& w, Responder& r,
                                       std::byte* dst) {
    const PeerQp& pv = r.conn;
    const bool imm = w.opcode == m5::kOpRdmaWriteImm;
    std::uint64_t ridx = 0;
    if (imm && !claim_peer_recv(pv, r, ridx)) return rnr(env, q, pv, w);
    if (w.length != 0) copy_payload(env, q, sq, w, 0, w.length, dst, true);
    if (imm) {
      env.settle();
      push_cqe(r.arena, pv.recv_cq,
               ib::make_resp_cqe(m5::kCqeRespWrImm, pv.qpn, static_cast<std::uint16_t>(ridx),
                                 static_cast<std::uint32_t>(w.length), w.imm, w.fm_ce_se & m5::kCtrlSolicited),
               env.scope(r.arena), r.recv->rcq);
    }
    return finish(env, q, w, 0);
  }

  GV_HD GV_INLINE static Exec execute(Env& env, QpVisit& q, ParsedWqe& w, Responder& r) {
    const Arena& a = env.own();
    const std::byte* sq = a.at<std::byte>(q.sq_off);
    load_first_bb(q, sq, q.sq_head, w);
    // Earlier WQEs' data is ordered before this one's (RC order), before anything of this WQE
    // is used: the GPU engine's system-scope fence then runs beside this WQE's loads, where
    // after the checks it added its own time to theirs in every WQE of a burst.
    env.order_messages();
    // The general path's steps for this WQE, in its order (the checks have no effects). Both
    // paths inline write_to(): one call reached from both measured slower (its register
    // allocation; notes/verbs-gpu.md, "2026-11-25: fast_write measured, …").
    if (std::byte* const dst = fast_write(env, q, w, r)) {
      if (!env.may_move(w.length)) return Exec::kDeferred;
      return write_to(env, q, sq, w, r, dst);
    }
    const std::uint8_t bad = parse_wqe(q, sq, q.sq_head, q.sq_rung - q.sq_head, w);
    if (bad != 0) return finish(env, q, w, bad);
    if (w.opcode == m5::kOpNop) return finish(env, q, w, 0);
    // Every move of the WQE is at most its length (an SGE's, a receive SGE's, a part of the ring).
    if (!env.may_move(w.length)) return Exec::kDeferred;
    const bool atomic = w.opcode == m5::kOpAtomicCs || w.opcode == m5::kOpAtomicFa;

    // Local checks first: a bad lkey fails before anything reaches the wire.
    if (!w.inl) {
      const std::uint32_t need = (w.opcode == m5::kOpRdmaRead || atomic) ? std::uint32_t{gv::kLocalWrite}
                                                                         : std::uint32_t{0};
      for (std::uint32_t i = 0; i < w.num_sge; ++i) {
        const m5::DataSeg d = as_data_seg(wqe_oct(w, sq, q.sq_bbs, q.sq_head, w.first_payload_oct + i));
        std::byte* p;
        const MemCheck c = resolve(a, env.self_pid(), env.self_pid(), d.lkey.get(), d.addr.get(),
                                   d.byte_count.get(), q.pdn, need, p);
        if (c != MemCheck::kOk) return finish(env, q, w, local_syndrome(c));
        if (i == 0) w.local0 = p;
      }
    }

    // The responder (reach(): its QP's fields, kept or loaded as the visit began) and the MR the
    // remote key names, loaded here unless kept, guessed, or named by an earlier WQE of the visit
    // (both tables lie at fixed offsets of its arena, a round trip over NVLink for a peer GPU).
    const bool remote_mem = w.opcode == m5::kOpRdmaWrite || w.opcode == m5::kOpRdmaWriteImm ||
                            w.opcode == m5::kOpRdmaRead || atomic;
    const std::uint64_t rlen = atomic ? 8 : w.length;
    if (r.live == nullptr) return finish(env, q, w, m5::kSyndTransportRetryExcErr);
    const Arena& pa = r.arena;
    if (remote_mem && rlen != 0 && w.rkey != r.mr_key) {
      r.mr = load_mr(pa, w.rkey, rlen);
      r.mr_key = w.rkey;
      r.loaded = true;
      q.last_rkey = w.rkey;
    }
    const PeerQp& pv = r.conn;
    QpCtx& pq = *r.live;
    const auto ps = static_cast<QpState>(pv.state);
    if (pv.qpn != q.peer_qpn || pv.peer_qpn != q.qpn || (ps != QpState::kRtr && ps != QpState::kRts))
      return finish(env, q, w, m5::kSyndTransportRetryExcErr);
    const auto remote = [&](std::uint32_t need, std::byte*& out) {
      return (pv.access & need) == need &&
             check_mr(pa, r.mr, q.peer_pid, env.self_pid(), w.rkey, w.raddr, rlen, pv.pdn, need, out) ==
                 MemCheck::kOk;
    };

    switch (w.opcode) {
      case m5::kOpRdmaWrite:
      case m5::kOpRdmaWriteImm: {
        std::byte* dst = nullptr;
        if (w.length != 0 && !remote(gv::kRemoteWrite, dst)) return finish(env, q, w, m5::kSyndRemoteAccessErr);
        return write_to(env, q, sq, w, r, dst);
      }
      case m5::kOpSend:
      case m5::kOpSendImm: {
        std::uint64_t ridx;
        if (!claim_peer_recv(pv, r, ridx)) return rnr(env, q, pv, w);
        const std::uint8_t rs = scatter_recv(env, q, sq, w, pa, pv, ridx);
        env.settle();
        if (rs != 0) {
          // The responder consumed the receive WQE and fails it; its QP enters error, and
          // the requester learns of it through the NAK's syndrome.
          push_cqe(pa, pv.recv_cq,
                   ib::make_err_cqe(false, pv.qpn, 0, static_cast<std::uint16_t>(ridx), rs), env.scope(pa));
          set_qp_error(pq);
          return finish(env, q, w,
                        rs == m5::kSyndLocalLengthErr ? m5::kSyndRemoteInvalReqErr : m5::kSyndRemoteOpErr);
        }
        const bool imm = w.opcode == m5::kOpSendImm;
        push_cqe(pa, pv.recv_cq,
                 ib::make_resp_cqe(imm ? m5::kCqeRespSendImm : m5::kCqeRespSend, pv.qpn,
                                   static_cast<std::uint16_t>(ridx), static_cast<std::uint32_t>(w.length),
                                   imm ? w.imm : be32{0}, w.fm_ce_se & m5::kCtrlSolicited),
                 env.scope(pa), r.recv->rcq);
        return finish(env, q, w, 0);
      }
      case m5::kOpRdmaRead: {
        std::byte* src = nullptr;
        if (w.length != 0 && !remote(gv::kRemoteRead, src)) return finish(env, q, w, m5::kSyndRemoteAccessErr);
        std::uint64_t off = 0;
        for (std::uint32_t i = 0; i < w.num_sge; ++i) {
          const m5::DataSeg d = as_data_seg(wqe_oct(w, sq, q.sq_bbs, q.sq_head, w.first_payload_oct + i));
          const std::uint64_t n = d.byte_count.get();
          if (n != 0) env.copy(local_sge(env, q, w, d, i), src + off, n, off + n == w.length);
          off += n;
        }
        return finish(env, q, w, 0);
      }
      case m5::kOpAtomicCs:
      case m5::kOpAtomicFa: {
        if ((pv.access & gv::kRemoteAtomic) == 0) return finish(env, q, w, m5::kSyndRemoteAccessErr);
        if (w.raddr % 8 != 0) return finish(env, q, w, m5::kSyndRemoteInvalReqErr);
        std::byte* target;
        if (!remote(gv::kRemoteAtomic, target)) return finish(env, q, w, m5::kSyndRemoteAccessErr);
        auto* t = reinterpret_cast<std::uint64_t*>(target);
        std::uint64_t old;
        if (w.opcode == m5::kOpAtomicFa) {
          old = env.fetch_add(t, w.swap_add);
        } else {
          old = env.compare_swap(t, w.compare, w.swap_add);
        }
        // The original value lands in host byte order (ConnectX in host-endian atomic mode).
        env.put(w.local0, old, 8, true);
        return finish(env, q, w, 0);
      }
      default:
        return finish(env, q, w, m5::kSyndLocalQpOpErr);
    }
  }

  /// After an error, every posted WQE completes with WR_FLUSH_ERR, signaled or not, and so
  /// does every posted receive WQE. No doorbell is needed to flush.
  GV_HD GV_INLINE static bool flush(Env& env, QpVisit& q) {
    const Arena& a = env.own();
    bool any = false;
    q.rnr_active = 0;
    const auto* dbrec = a.at<m5::QpDbrec>(q.dbrec_off);
    const std::uint64_t posted =
        ib::widen(q.sq_head, m5::dbrec_counter(byteswap(sync::load_acquire(&dbrec->snd.raw))), m5::kWqeIndexBits);
    const std::byte* sq = a.at<std::byte>(q.sq_off);
    while (q.sq_head < posted) {
      const ib::CtrlFields c = ib::decode_ctrl(sq_oct(sq, q.sq_bbs, q.sq_head, 0));
      const std::uint32_t nbb = ib::wqe_bbs(c.ds == 0 ? 1 : c.ds);
      push_cqe(a, q.send_cq,
               ib::make_err_cqe(true, q.qpn, c.opcode, static_cast<std::uint16_t>(q.sq_head), m5::kSyndWrFlushErr),
               env.scope(a));
      q.sq_head += nbb;
      any = true;
    }
    q.sq_rung = q.sq_head;
    std::uint64_t ridx, receives;
    while (claim_recv(a, q.dbrec_off, &q.ctx->rq_head, ridx, receives)) {
      push_cqe(a, q.recv_cq,
               ib::make_err_cqe(false, q.qpn, 0, static_cast<std::uint16_t>(ridx), m5::kSyndWrFlushErr),
               env.scope(a));
      any = true;
    }
    return any;
  }
};

}  // namespace gv::soft
