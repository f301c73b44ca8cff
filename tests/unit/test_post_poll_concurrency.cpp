// Posters and pollers on many host threads against a model HCA thread (post_poll_fixture.hpp):
// every WQE executed once, in order per QP, every completion taken once, shared and exclusive.
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>

#include <gpuverbs/splitmix.hpp>

#include "post_poll_fixture.hpp"

namespace gvt::post_poll {
namespace {

// ---- Concurrency --------------------------------------------------------------------------------

/// The request poster `tid` makes as its `seq`-th post: a pure function, so the HCA can
/// rebuild it from the identity the WQE carries (remote address, or immediate for SEND).
struct StressWr {
  SendWr wr;
  Sge sge[2];
  void make(std::uint64_t seed, std::uint32_t tid, std::uint32_t seq, const std::uint8_t* pool) {
    const std::uint64_t h = gv::splitmix64(seed ^ (std::uint64_t{tid} << 40) ^ seq);
    static constexpr WrOpcode ops[4] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteImm,
                                        WrOpcode::kSendImm, WrOpcode::kRdmaRead};
    wr = SendWr{};
    wr.opcode = ops[h & 3];
    wr.flags = ((h >> 2) & 1) ? std::uint32_t{kWrSignaled} : 0u;
    wr.remote_addr = (std::uint64_t{tid} << 32) | seq;
    wr.rkey = static_cast<std::uint32_t>(h >> 32);
    wr.imm = (tid << 24) | seq;
    const bool inl = carries_payload(wr.opcode) && ((h >> 3) % 3 == 0);
    if (inl) wr.flags |= kWrInline;
    wr.num_sge = 1 + ((h >> 5) & 1);
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
      const std::uint32_t len = inl ? static_cast<std::uint32_t>((h >> (8 + 6 * i)) % 60) + 1
                                    : static_cast<std::uint32_t>(h >> (8 + 6 * i)) | 1;
      sge[i] = Sge{inl ? reinterpret_cast<std::uint64_t>(pool + ((h >> 20) % 64)) : h + i, len, tid};
    }
    wr.sg_list = sge;
  }
};

struct StressResult {
  std::vector<std::uint32_t> next_seq;
  std::uint64_t wqes = 0, cqes = 0;
};

/// `posters` threads post `per_thread` WQEs each with Ownership P; one HCA thread executes and
/// checks them; `pollers` threads poll with Ownership C and retire.
template <Ownership P, Ownership C>
void stress(unsigned posters, std::uint32_t per_thread, unsigned pollers, std::uint64_t seed) {
  SCOPED_TRACE(seed_note(seed));
  HostQp q(128, 4, 4);  // 16 CQEs: the CQ wraps constantly and back-pressures the HCA
  std::vector<std::uint8_t> pool(128);
  for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<std::uint8_t>(gv::splitmix64(seed + i));
  const std::uint32_t cq_size = 1u << q.log_cqes;

  std::atomic<bool> posters_done{false}, stop{false}, failed{false};
  std::atomic<std::uint64_t> cqes_produced{0};
  std::vector<std::string> errors;
  std::mutex err_mu;
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> g(err_mu);
    if (errors.size() < 10) errors.push_back(what);
    failed = true;
    stop = true;
    store_rel(q.abort, 1u);
  };

  // ---- the HCA
  std::vector<std::uint64_t> cqe_start;  // CQE number -> WQE start (HCA's record)
  std::uint64_t final_pos = 0;
  std::vector<std::uint32_t> next_seq(posters, 0);
  std::thread hca([&] {
    std::uint64_t pos = 0, prod = 0, released = 0;
    std::deque<std::uint64_t> pending;  // signaled WQE starts awaiting a CQE
    std::unordered_map<std::uint64_t, std::uint64_t> ctrl8;  // WQE start -> first 8 ctrl bytes
    StressWr want;
    while (!stop.load()) {
      const std::uint64_t db = load_acq(q.doorbell);
      const std::uint64_t pub = widen(pos, be32toh(load_acq(q.qp_dbrec.snd.raw)), m::kWqeIndexBits);
      // never over-committed: published - completed <= ring size (kShared tickets, `reserved`,
      // may run ahead by the slots of posters waiting for space; published may not)
      const std::uint64_t put = load_acq(q.qs->sq.published);
      const std::uint64_t done = load_acq(q.qs->sq.completed);
      if (static_cast<std::int64_t>(put - done) > static_cast<std::int64_t>(q.sq_bbs))
        return fail("SQ over-committed: published " + std::to_string(put) + " completed " + std::to_string(done));
      bool progress = false;
      while (pos < pub) {
        progress = true;
        mlx5_wqe_ctrl_seg ctrl;
        std::memcpy(&ctrl, q.sq_bytes(pos), 16);
        const std::uint32_t oio = be32toh(ctrl.opmod_idx_opcode);
        const std::uint32_t ds = m::ctrl_ds(be32toh(ctrl.qpn_ds));
        if (m::ctrl_wqe_index(oio) != (pos & m::kWqeIndexMask) || m::ctrl_qpn(be32toh(ctrl.qpn_ds)) != q.qp.qpn || ds == 0)
          return fail("malformed ctrl at WQEBB " + std::to_string(pos));
        const std::uint8_t op = m::ctrl_opcode(oio);
        if (op == MLX5_OPCODE_NOP) {  // the closing NOP
          final_pos = pos;
        } else {
          std::uint32_t tid, seq;
          if (op == MLX5_OPCODE_SEND_IMM) {
            tid = be32toh(ctrl.imm) >> 24;
            seq = be32toh(ctrl.imm) & 0xffffff;
          } else {
            mlx5_wqe_raddr_seg rs;
            std::memcpy(&rs, q.sq_bytes(pos, 1), 16);
            tid = static_cast<std::uint32_t>(be64toh(rs.raddr) >> 32);
            seq = static_cast<std::uint32_t>(be64toh(rs.raddr));
          }
          if (tid >= posters || seq != next_seq[tid])
            return fail("WQE at " + std::to_string(pos) + " is poster " + std::to_string(tid) +
                        " #" + std::to_string(seq) + ", out of order, lost or duplicated");
          ++next_seq[tid];
          want.make(seed, tid, seq, pool.data());
          if (wqe_ds(want.wr) != ds) return fail("ds mismatch at " + std::to_string(pos));
          for (std::uint32_t k = 0; k < ds; ++k) {
            const Octoword o = wqe_octoword(want.wr, k, static_cast<std::uint16_t>(pos), q.qp.qpn);
            if (std::memcmp(&o, q.sq_bytes(pos, k), 16) != 0)
              return fail("torn or overwritten WQE at " + std::to_string(pos) + " octoword " + std::to_string(k));
          }
        }
        ctrl8[pos] = first8(&ctrl);
        if (ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) pending.push_back(pos);
        pos += wqe_bbs(ds);
      }
      if (db != 0) {  // the doorbell names a published WQE's ctrl
        const std::uint64_t s = widen_below(pub - 1, m::ctrl_wqe_index(be32toh(static_cast<std::uint32_t>(db))), m::kWqeIndexBits);
        auto it = ctrl8.find(s);
        if (it == ctrl8.end() || it->second != db)
          return fail("doorbell does not match the ctrl segment of WQE " + std::to_string(s));
      }
      // CQ: consumer index (never ahead of what was produced), poison what was released
      const std::uint64_t ci = widen_below(prod, be32toh(load_acq(q.cq_dbrec.set_ci.raw)) & m::kCqCiMask, m::kCqCiBits);
      // CQEs are handed back in order: the consumer index never moves backwards
      if (ci < released) return fail("CQ consumer index went backwards: " + std::to_string(ci) +
                                     " after " + std::to_string(released));
      for (; released < ci; ++released) poison_cqe(q, released);
      while (!pending.empty() && prod - ci < cq_size) {
        CqeSpec s;
        s.opcode = MLX5_CQE_REQ;
        s.qpn = q.qp.qpn;
        s.wqe_counter = static_cast<std::uint16_t>(pending.front());
        s.byte_cnt = static_cast<std::uint32_t>(prod);
        s.timestamp = pending.front();
        cqe_start.push_back(pending.front());
        write_cqe(q, prod++, s);
        cqes_produced.store(prod);
        pending.pop_front();
        progress = true;
      }
      if (!progress) std::this_thread::yield();
    }
  });

  // ---- pollers
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> seen(pollers);
  std::vector<std::thread> poll_threads;
  for (unsigned t = 0; t < pollers; ++t) {
    poll_threads.emplace_back([&, t] {
      Completion c;
      while (!stop.load()) {
        const Status st = try_poll_cq<C>(q.cqh, c);
        if (st == Status::kEmpty) {
          std::this_thread::yield();
          continue;
        }
        if (st != Status::kOk) return fail(std::string("poll: ") + gv::to_string(st));
        seen[t].emplace_back(c.byte_len, c.wqe_counter);
      }
    });
  }

  // ---- posters
  std::vector<std::thread> post_threads;
  for (unsigned t = 0; t < posters; ++t) {
    post_threads.emplace_back([&, t] {
      StressWr w;
      for (std::uint32_t i = 0; i < per_thread && !failed.load(); ++i) {
        w.make(seed, t, i, pool.data());
        const Status st = post_send<P>(q.qp, w.wr, gv::Budget{20'000'000'000});
        if (st != Status::kOk) return fail(std::string("post: ") + gv::to_string(st));
      }
    });
  }
  for (auto& t : post_threads) t.join();
  if (!failed) {  // close with a signaled NOP so that every WQEBB gets retired
    SendWr nop;
    nop.opcode = WrOpcode::kNop;
    nop.flags = kWrSignaled;
    if (post_send<P>(q.qp, nop, gv::Budget{20'000'000'000}) != Status::kOk) fail("closing NOP");
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!failed && load_acq(q.qs->sq.completed) != load_acq(q.qs->sq.reserved)) {
    if (Clock::now() > deadline) fail("completions never caught up");
    std::this_thread::yield();
  }
  stop = true;
  hca.join();
  for (auto& t : poll_threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
  ASSERT_FALSE(failed);

  for (unsigned t = 0; t < posters; ++t) EXPECT_EQ(next_seq[t], per_thread) << "poster " << t;
  // every CQE taken exactly once, with the payload the HCA wrote (not a released slot)
  std::vector<int> taken(cqe_start.size(), 0);
  for (const auto& v : seen)
    for (const auto& [p, ctr] : v) {
      ASSERT_LT(p, cqe_start.size()) << "a poller read a released (poisoned) CQE";
      ++taken[p];
      EXPECT_EQ(ctr, static_cast<std::uint16_t>(cqe_start[p])) << "CQE " << p;
    }
  for (std::size_t p = 0; p < taken.size(); ++p) ASSERT_EQ(taken[p], 1) << "CQE " << p;
  if constexpr (C == Ownership::kShared) {
    EXPECT_EQ(q.cs->released, cqe_start.size());
  }
  EXPECT_EQ(q.cs->claimed, cqe_start.size());
  EXPECT_EQ(be32toh(q.cq_dbrec.set_ci.raw), cqe_start.size() & m::kCqCiMask);
  EXPECT_EQ(q.qs->sq.published, q.qs->sq.reserved);
  EXPECT_EQ(be32toh(q.qp_dbrec.snd.raw), q.qs->sq.reserved & m::kWqeIndexMask);
  EXPECT_EQ(q.doorbell, first8(q.sq_bytes(final_pos))) << "doorbell is not the last WQE's ctrl";
  EXPECT_GT(q.qs->sq.reserved, 65536u) << "the 16-bit WQE index should have wrapped";
}

TEST(Concurrency, SharedPostersSharedPollers) {
  stress<Ownership::kShared, Ownership::kShared>(8, 20000, 3, test_seed() + 10);
}

TEST(Concurrency, ExclusivePosterExclusivePoller) {
  stress<Ownership::kExclusive, Ownership::kExclusive>(1, 60000, 1, test_seed() + 11);
}

}  // namespace
}  // namespace gvt::post_poll
