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
//   Arena    env.peer(const QpVisit&)     the peer QP's arena (base null if unreachable); by
//              value, so that the GPU engine keeps its Env in registers
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
//   void     env.put(void* d, uint64_t v, uint32_t n, bool publish)
//              store the n <= 8 low bytes of v (little-endian), as copy() would
//   void     env.settle()                 order every byte copy() stored before what the engine
//              stores next; called before a WQE moves data (RC order between messages),
//              before a CQE and at the end of a burst. With `publish`, copy() may leave a
//              message that fits in one store unsettled: its receiver need not wait for a fence
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <gpuverbs/ib/cqe.hpp>
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
};

/// Minimum qpn-to-slot and key-to-slot mappings, shared with the host library.
GV_HD GV_INLINE constexpr std::uint32_t mr_slot(std::uint32_t key) { return key >> 8; }

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

/// A table field another agent may rewrite (an MR entry's, a peer QP's): ld.cg on the GPU
/// (from L2, or from the peer over NVLink; never a stale L1 line), so the loads of one entry
/// are all in flight together and a peer GPU's entry costs one round trip; a relaxed atomic
/// load on the host (some fields, a QP's state, change while we read).
template <class T>
GV_HD GV_INLINE T load_field(const T* p) {
#if GV_DEVICE_PASS
  if constexpr (sizeof(T) == 8) return static_cast<T>(__ldcg(reinterpret_cast<const unsigned long long*>(p)));
  else return static_cast<T>(__ldcg(reinterpret_cast<const unsigned int*>(p)));
#else
  return sync::load_relaxed(p);
#endif
}

/// The field an entry's writer stores last (an MR's key, a QP's qpn): load_field() on the GPU,
/// an acquire load on the host, issued before the entry's other loads.
GV_HD GV_INLINE std::uint32_t load_key(const std::uint32_t* p) {
#if GV_DEVICE_PASS
  return load_field(p);
#else
  return sync::load_acquire(p);
#endif
}

/// The MR entry a key names in arena `a` (one round of loads), or an empty entry for a key
/// outside the table. len == 0 needs no key (IB), so no load is made for it.
GV_HD GV_INLINE MrEntry load_mr(const Arena& a, std::uint32_t key, std::uint64_t len) {
  MrEntry e{};
  if (len == 0 || mr_slot(key) >= kMaxMrs) return e;
  const MrEntry* m = a.mrs() + mr_slot(key);
  e.key = load_key(&m->key);
  e.access = load_field(&m->access);
  e.pdn = load_field(&m->pdn);
  e.in_arena = load_field(&m->in_arena);
  e.addr = load_field(&m->addr);
  e.length = load_field(&m->length);
  e.arena_off = load_field(&m->arena_off);
  return e;
}

/// Check [addr, addr+len) under `key` against the MR entry `mr` of arena `a` (from load_mr):
/// key, protection domain, bounds and access rights; on success `out` is the range's address
/// in this engine. `owner_pid` is the process owning `a`: memory outside an arena is
/// reachable only in our own process.
GV_HD GV_INLINE MemCheck check_mr(const Arena& a, const MrEntry& mr, std::int32_t owner_pid,
                                  std::int32_t self_pid, std::uint32_t key, std::uint64_t addr,
                                  std::uint64_t len, std::uint32_t pdn, std::uint32_t need,
                                  std::byte*& out) {
  out = nullptr;
  if (len == 0) return MemCheck::kOk;
  if (mr.key != key || key == 0) return MemCheck::kNoKey;
  if (mr.pdn != pdn) return MemCheck::kPd;
  if (addr < mr.addr || len > mr.length || addr - mr.addr > mr.length - len)
    return MemCheck::kBounds;
  if ((mr.access & need) != need) return MemCheck::kAccess;
  if (mr.in_arena) {
    out = a.base + mr.arena_off + (addr - mr.addr);
  } else if (owner_pid == self_pid) {
    out = reinterpret_cast<std::byte*>(addr);
  } else {
    return MemCheck::kUnreachable;  // private memory of another process
  }
  return MemCheck::kOk;
}

/// load_mr and check_mr in one step.
GV_HD GV_INLINE MemCheck resolve(const Arena& a, std::int32_t owner_pid, std::int32_t self_pid,
                                 std::uint32_t key, std::uint64_t addr, std::uint64_t len,
                                 std::uint32_t pdn, std::uint32_t need, std::byte*& out) {
  return check_mr(a, load_mr(a, key, len), owner_pid, self_pid, key, addr, len, pdn, need, out);
}

// ---- Completions ---------------------------------------------------------------------------

/// Declare CQ `cq_slot` of arena `a` overrun by the CQE of producer count p (once): its error
/// flag, an asynchronous event, and every QP of the arena using it in error.
GV_HD GV_NOINLINE inline void declare_cq_overrun(Arena a, std::uint32_t cq_slot, std::uint64_t p) {
  CqCtx* cq = a.cqs() + cq_slot;
  std::uint32_t expected = 0;
  if (!sync::compare_exchange(&cq->error, expected, std::uint32_t{1})) return;
  raise_async(a, AsyncEventType::kCqOverrun, cq->cqn, p);
  for (std::uint32_t i = 0; i < kMaxQps; ++i) {
    QpCtx& q = a.qps()[i];
    if (sync::load_acquire(&q.qpn) != 0 && (q.send_cq == cq_slot || q.recv_cq == cq_slot))
      set_qp_error(q);
  }
}

/// Append a CQE to CQ `cq_slot` of arena `a`. Returns false on overrun, after declaring it:
/// the CQ's error flag is raised, an asynchronous event is queued in the CQ's arena and every
/// QP of that arena using the CQ moves to the error state.
GV_HD GV_NOINLINE inline bool push_cqe(Arena a, std::uint32_t cq_slot, m5::Cqe cqe, sync::Scope scope) {
  CqCtx* cq = a.cqs() + cq_slot;
  // Claiming a slot publishes nothing (the tail store below does): relaxed.
  const std::uint64_t p = sync::fetch_add_relaxed(&cq->produced, std::uint64_t{1});
  const auto* dbrec = a.at<m5::CqDbrec>(cq->dbrec_off);
  const std::uint32_t ci24 = byteswap(sync::load_acquire(&dbrec->set_ci.raw)) & m5::kCqCiMask;
  const std::uint64_t ci = ib::widen_below(p, ci24, m5::kCqCiBits);
  if (p - ci >= (std::uint64_t{1} << cq->log_cqes)) {
    declare_cq_overrun(a, cq_slot, p);
    return false;
  }
  m5::Cqe* slot = a.at<m5::Cqe>(cq->ring_off) + (p & ((std::uint64_t{1} << cq->log_cqes) - 1));
  ib::store_cqe(slot, cqe, ib::owner_bit(p, cq->log_cqes), scope);
  return true;
}

// ---- The engine's view of its own QP -------------------------------------------------------

/// What one visit of the engine to its own QP works on: the owner's fields, copied in one
/// round after the visit's acquire (they do not change while the QP can execute), and the
/// requester's progress (this engine's alone), kept in registers for the visit and stored
/// back at its end. Read in place, every field was a global load, and the fence before each
/// WQE's data (which also drops the SM's L1) sent them to L2 again for every WQE.
struct QpVisit {
  QpCtx* ctx;  ///< the QP itself: its state (error transitions) and receive counter stay there
  std::uint32_t qpn, pdn, send_cq, recv_cq, sq_bbs, rnr_retry, peer_qpn;
  std::int32_t peer_pid;
  std::uint64_t sq_off, dbrec_off, peer_base;
  std::uint64_t sq_head, sq_rung, last_doorbell, rnr_resume_ns;
  std::uint32_t rnr_left, rnr_active;
};

/// Start a visit of q (after the acquire that made its fields current).
GV_HD GV_INLINE QpVisit begin_visit(QpCtx& q) {
  QpVisit v;
  v.ctx = &q;
  v.qpn = q.qpn;
  v.pdn = q.pdn;
  v.send_cq = q.send_cq;
  v.recv_cq = q.recv_cq;
  v.sq_bbs = q.sq_bbs;
  v.rnr_retry = q.rnr_retry;
  v.peer_qpn = q.peer_qpn;
  v.peer_pid = q.peer_pid;
  v.sq_off = q.sq_off;
  v.dbrec_off = q.dbrec_off;
  v.peer_base = q.peer_base;
  v.sq_head = q.sq_head;
  v.sq_rung = q.sq_rung;
  v.last_doorbell = q.last_doorbell;
  v.rnr_resume_ns = q.rnr_resume_ns;
  v.rnr_left = q.rnr_left;
  v.rnr_active = q.rnr_active;
  return v;
}

/// End a visit: the requester's progress back into the QP.
GV_HD GV_INLINE void end_visit(const QpVisit& v) {
  QpCtx& q = *v.ctx;
  q.sq_head = v.sq_head;
  q.sq_rung = v.sq_rung;
  q.last_doorbell = v.last_doorbell;
  q.rnr_resume_ns = v.rnr_resume_ns;
  q.rnr_left = v.rnr_left;
  q.rnr_active = v.rnr_active;
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
  /// The first WQEBB, loaded in one round. Read only through first_bb() (constant indices),
  /// so that the GPU engine keeps a WQE in registers, not local memory.
  ib::Octoword head[4];
  std::byte* local0 = nullptr;          ///< the first local SGE's address (execute())
};

/// Octoword k (< 4) of the WQE's first WQEBB.
GV_HD GV_INLINE ib::Octoword first_bb(const ParsedWqe& w, std::uint32_t k) {
  switch (k) {
    case 0: return w.head[0];
    case 1: return w.head[1];
    case 2: return w.head[2];
    default: return w.head[3];
  }
}

/// 4-byte word i (< 16) of the WQE's first WQEBB, as it lies in memory.
GV_HD GV_INLINE std::uint32_t first_bb_word(const ParsedWqe& w, std::uint32_t i) {
  const ib::Octoword o = first_bb(w, i / 4);
  switch (i % 4) {
    case 0: return o.w[0];
    case 1: return o.w[1];
    case 2: return o.w[2];
    default: return o.w[3];
  }
}

/// Bytes [at, at + n) of the first WQEBB (n <= 8, at + n <= 64), little-endian, from registers.
GV_HD GV_INLINE std::uint64_t first_bb_bytes(const ParsedWqe& w, std::uint32_t at, std::uint32_t n) {
  if (at % 4 == 0) {  // an inline payload's start (byte 20 or 36): two word selections, not eight byte ones
    const std::uint64_t lo = first_bb_word(w, at / 4);
    const std::uint64_t hi = n > 4 ? first_bb_word(w, at / 4 + 1) : 0;
    const std::uint64_t v = lo | (hi << 32);
    return n >= 8 ? v : v & ((std::uint64_t{1} << (8 * n)) - 1);
  }
  std::uint64_t v = 0;
  for (std::uint32_t i = 0; i < 8; ++i) {
    if (i >= n) break;
    const std::uint32_t b = at + i;
    v |= std::uint64_t{(first_bb_word(w, b / 4) >> (8 * (b % 4))) & 0xffu} << (8 * i);
  }
  return v;
}

/// Octoword k of the WQE at WQEBB counter `start`.
GV_HD GV_INLINE ib::Octoword sq_oct(const std::byte* sq, std::uint32_t sq_bbs, std::uint64_t start,
                                    std::uint32_t k) {
  return ib::load_octoword(sq + ib::sq_octoword_offset(start, k, sq_bbs));
}

/// Octoword k of the parsed WQE at `start`: from its first WQEBB, already loaded, or the ring.
GV_HD GV_INLINE ib::Octoword wqe_oct(const ParsedWqe& w, const std::byte* sq, std::uint32_t sq_bbs,
                                     std::uint64_t start, std::uint32_t k) {
  return k < 4 ? first_bb(w, k) : sq_oct(sq, sq_bbs, start, k);
}

GV_HD GV_INLINE m5::DataSeg as_data_seg(const ib::Octoword& o) {
  m5::DataSeg d;
  std::memcpy(&d, &o, sizeof(d));
  return d;
}

/// Parse and check the WQE at `start`; `avail` WQEBBs from `start` are published (avail >= 1).
/// Returns 0 or the syndrome of a malformed WQE (LOCAL_QP_OP_ERR / LOCAL_LENGTH_ERR).
GV_HD GV_INLINE std::uint8_t parse_wqe(const QpVisit& q, const std::byte* sq, std::uint64_t start,
                                       std::uint64_t avail, ParsedWqe& w) {
  // The whole first WQEBB in one round of loads: control, remote address, atomic and the
  // first data or inline segment of every opcode lie in it.
  for (std::uint32_t k = 0; k < 4; ++k) w.head[k] = sq_oct(sq, q.sq_bbs, start, k);
  const ib::CtrlFields c = ib::decode_ctrl(w.head[0]);
  w.opcode = c.opcode;
  w.ds = c.ds;
  w.fm_ce_se = c.fm_ce_se;
  w.imm = c.imm;
  w.nbb = ib::wqe_bbs(w.ds == 0 ? 1 : w.ds);
  if (c.wqe_index != (start & m5::kWqeIndexMask) || c.qpn != q.qpn || w.ds == 0 || w.nbb > avail)
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
    m5::RaddrSeg rs;
    std::memcpy(&rs, &w.head[1], sizeof(rs));
    w.raddr = rs.raddr.get();
    w.rkey = rs.rkey.get();
  }
  if (head == 3) {
    m5::AtomicSeg as;
    std::memcpy(&as, &w.head[2], sizeof(as));
    w.swap_add = as.swap_add.get();
    w.compare = as.compare.get();
  }
  w.first_payload_oct = head;
  const std::uint32_t rest = w.ds - head;
  if (rest == 0) return 0;
  const std::uint32_t bc = byteswap(first_bb(w, head).w[0]);
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
    w.length += as_data_seg(wqe_oct(w, sq, q.sq_bbs, start, head + i)).byte_count.get();
  if (head == 3 && (w.num_sge != 1 || w.length != 8)) return m5::kSyndLocalLengthErr;
  if (w.length > 0x80000000ull) return m5::kSyndLocalLengthErr;
  return 0;
}

// ---- The engine step -------------------------------------------------------------------------

/// Outcome of trying to execute one WQE.
enum class Exec : std::uint8_t { kDone, kFailed, kRnrWait };

/// What a requester reads of its peer's QP: the fields its owner writes before the QP
/// connects, and its state.
struct PeerQp {
  std::uint32_t qpn, state, pdn, access, recv_cq, rq_wqes, rq_stride_shift, max_recv_sge,
      min_rnr_timer, peer_qpn;
  std::uint64_t rq_off, dbrec_off;
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

template <class Env>
class Hca {
 public:
  /// Maximum WQEs one visit executes on one QP, so one busy QP cannot starve the others.
  static constexpr int kBurst = 16;

  /// Serve one QP of this engine's arena (q holds a QP): execute rung WQEs, or flush
  /// everything after an error. Returns true if anything happened (for idle back-off).
  GV_HD GV_INLINE static bool step(Env& env, QpCtx& q) { return serve(env, q, false); }

  /// step() for a table slot that may be free: its qpn is loaded in the same round as its
  /// doorbell (a free slot's stale offsets still point into the arena, so those loads are
  /// harmless). For the GPU engine; on the host the qpn's acquire must come first.
  GV_HD GV_INLINE static bool step_slot(Env& env, QpCtx& q) { return serve(env, q, true); }

 private:
  /// What a burst learned of the responder: its QP's connection fields and the MR of the last
  /// remote key, loaded by the burst's first WQE that needs them and reused by the rest (a
  /// peer GPU's tables are a round trip over NVLink away). A change on the responder side
  /// (its QP leaving RTS, a deregistration) is seen by the next burst: within a burst the
  /// WQEs execute as if at once, which an HCA's translation caches also allow.
  struct Responder {
    QpCtx* live = nullptr;    ///< the responder's QpCtx (receive counter, error state); null: not loaded
    PeerQp conn;              ///< its connection fields
    std::uint32_t mr_key = 0;  ///< key of `mr` (0: none loaded)
    MrEntry mr{};
  };

  GV_HD GV_INLINE static bool serve(Env& env, QpCtx& q, bool check_qpn) {
    const Arena& a = env.own();
    // One round of polled loads (qpn, state, doorbell, doorbell record) for an idle QP; only
    // a QP with work pays for the acquire fence.
    const auto* dbrec = a.at<m5::QpDbrec>(q.dbrec_off);
    const std::uint32_t live = check_qpn ? sync::load_polled(&q.qpn) : 1u;
    const auto st = static_cast<QpState>(sync::load_polled(&q.state));
    const std::uint64_t db = sync::load_polled(a.at<std::uint64_t>(q.doorbell_off));
    const std::uint32_t snd = sync::load_polled(&dbrec->snd.raw);
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
    const std::uint64_t rec = ib::widen(q.sq_head, m5::dbrec_counter(byteswap(snd)), m5::kWqeIndexBits);
    const bool rung = db != q.last_doorbell;
    if (!rung && rec <= q.sq_rung && q.sq_head >= q.sq_rung) return false;
    sync::acquire_fence();
    QpVisit v = begin_visit(q);
    if (rung) {
      v.last_doorbell = db;
      if ((byteswap(static_cast<std::uint32_t>(db >> 32)) >> 8) != v.qpn) {
        raise_async(a, AsyncEventType::kQpFatal, v.qpn, db);
        set_qp_error(q);
        end_visit(v);
        return true;
      }
    }
    if (rec > v.sq_rung) v.sq_rung = rec;
    bool progressed = false;
    Responder r;
    for (int n = 0; n < kBurst && v.sq_head < v.sq_rung; ++n) {
      if (v.rnr_active && env.now_ns() < v.rnr_resume_ns) break;
      ParsedWqe w;
      const Exec e = execute(env, v, w, r);
      if (e == Exec::kRnrWait) break;
      progressed = true;
      v.rnr_active = 0;
      v.sq_head += w.nbb;
      if (e == Exec::kFailed) {
        set_qp_error(q);
        break;
      }
    }
    end_visit(v);
    env.settle();
    return progressed;
  }

  GV_HD GV_INLINE static std::uint8_t local_syndrome(MemCheck c) {
    return c == MemCheck::kOk ? 0 : m5::kSyndLocalProtErr;
  }

  /// Complete the WQE at sq_head: success CQE if signaled, error CQE always. The data moved
  /// so far is settled (visible to its observers) before a CQE.
  GV_HD GV_INLINE static Exec finish(Env& env, QpVisit& q, const ParsedWqe& w, std::uint8_t syndrome) {
    const Arena& a = env.own();
    const auto idx = static_cast<std::uint16_t>(q.sq_head);
    if (const std::uint8_t fault = env.take_fault(); syndrome == 0) syndrome = fault;
    if (syndrome != 0) {
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
  /// and whose receive counter is `rq_head`, or report that none is posted.
  GV_HD GV_INLINE static bool claim_recv(const Arena& pa, std::uint64_t dbrec_off, std::uint64_t* rq_head,
                               std::uint64_t& idx) {
    const auto* dbrec = pa.at<m5::QpDbrec>(dbrec_off);
    for (;;) {
      // Counter and record in one round (a round trip each, for a peer GPU's QP).
      const std::uint64_t h = sync::load_polled(rq_head);
      const std::uint32_t rcv = sync::load_polled(&dbrec->rcv.raw);
      sync::acquire_fence();
      const std::uint64_t avail = ib::widen(h, m5::dbrec_counter(byteswap(rcv)), m5::kWqeIndexBits);
      if (h >= avail) return false;
      std::uint64_t expected = h;
      if (sync::compare_exchange(rq_head, expected, h + 1)) {
        idx = h;
        return true;
      }
    }
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
      const MemCheck c = resolve(pa, q.peer_pid, env.self_pid(), d.lkey.get(), d.addr.get(),
                                 d.byte_count.get(), pv.pdn, gv::kLocalWrite, dst[n]);
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

  GV_HD GV_INLINE static Exec execute(Env& env, QpVisit& q, ParsedWqe& w, Responder& r) {
    const Arena& a = env.own();
    const std::byte* sq = a.at<std::byte>(q.sq_off);
    const std::uint8_t bad = parse_wqe(q, sq, q.sq_head, q.sq_rung - q.sq_head, w);
    if (bad != 0) return finish(env, q, w, bad);
    if (w.opcode == m5::kOpNop) return finish(env, q, w, 0);
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

    // The responder: its QP's connection fields and the MR the remote key names, in one
    // round of loads (both tables lie at fixed offsets of its arena, which for a peer GPU is
    // a round trip over NVLink), once a burst.
    const bool remote_mem = w.opcode == m5::kOpRdmaWrite || w.opcode == m5::kOpRdmaWriteImm ||
                            w.opcode == m5::kOpRdmaRead || atomic;
    const std::uint64_t rlen = atomic ? 8 : w.length;
    const bool want_mr = remote_mem && rlen != 0 && w.rkey != r.mr_key;
    const Arena pa = env.peer(q);
    const std::uint32_t pslot = q.peer_qpn - kQpnBase;
    if (pa.base == nullptr || q.peer_qpn < kQpnBase || pslot >= kMaxQps)
      return finish(env, q, w, m5::kSyndTransportRetryExcErr);
    if (r.live == nullptr) {
      r.live = pa.qps() + pslot;
      r.conn = load_peer_qp(r.live);
    }
    if (want_mr) {
      r.mr = load_mr(pa, w.rkey, rlen);
      r.mr_key = w.rkey;
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

    // Earlier WQEs' data is ordered before this one's (RC order). Issued here, after this
    // WQE's loads, the fence finds those stores mostly acknowledged already.
    env.settle();
    switch (w.opcode) {
      case m5::kOpRdmaWrite:
      case m5::kOpRdmaWriteImm: {
        std::byte* dst = nullptr;
        if (w.length != 0 && !remote(gv::kRemoteWrite, dst)) return finish(env, q, w, m5::kSyndRemoteAccessErr);
        std::uint64_t ridx = 0;
        if (w.opcode == m5::kOpRdmaWriteImm && !claim_recv(pa, pv.dbrec_off, &pq.rq_head, ridx))
          return rnr(env, q, pv, w);
        if (w.length != 0) copy_payload(env, q, sq, w, 0, w.length, dst, true);
        if (w.opcode == m5::kOpRdmaWriteImm) {
          env.settle();
          push_cqe(pa, pv.recv_cq,
                   ib::make_resp_cqe(m5::kCqeRespWrImm, pv.qpn, static_cast<std::uint16_t>(ridx),
                                     static_cast<std::uint32_t>(w.length), w.imm, w.fm_ce_se & m5::kCtrlSolicited),
                   env.scope(pa));
        }
        return finish(env, q, w, 0);
      }
      case m5::kOpSend:
      case m5::kOpSendImm: {
        std::uint64_t ridx;
        if (!claim_recv(pa, pv.dbrec_off, &pq.rq_head, ridx)) return rnr(env, q, pv, w);
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
                 env.scope(pa));
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
    std::uint64_t ridx;
    while (claim_recv(a, q.dbrec_off, &q.ctx->rq_head, ridx)) {
      push_cqe(a, q.recv_cq,
               ib::make_err_cqe(false, q.qpn, 0, static_cast<std::uint16_t>(ridx), m5::kSyndWrFlushErr),
               env.scope(a));
      any = true;
    }
    return any;
  }
};

}  // namespace gv::soft
