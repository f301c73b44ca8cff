// Connected QP pairs for the benchmarks, without CUDA: soft devices, a send CQ, a receive CQ, a
// QP and a registered buffer per endpoint, endpoints 2p and 2p + 1 connected. Host threads run
// experiments on them directly (run_on_threads); gv_gpu_verbs places queues and buffers for
// its GPU modes through the hooks and launches kernels on the same endpoints.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

#include "experiments.hpp"

namespace gv::bench {

/// What a bed holds: `pairs` connected QP pairs; each endpoint a send CQ, a receive CQ and a
/// buffer of 2 * region bytes.
struct Shape {
  int pairs = 1;
  std::size_t region = 4096;
  std::uint32_t sq_depth = 128, rq_depth = 128, cq_depth = 256;
};

/// Incoming regions hold the largest message and the poisoned byte after it.
inline std::size_t region_for(std::uint64_t max_bytes) { return (max_bytes + 1 + 4095) & ~std::size_t{4095}; }

/// A soft device's arena for `ends` endpoints of `s`: their rings (of the largest WQEs: two
/// WQEBBs with 64 B inline), receive WQEs and two CQs, and their buffers when they live in the
/// arena (`buffers`); 16 MiB for tables and padding, at least the default 64 MiB.
std::size_t arena_bytes(const Shape& s, int ends, bool buffers);

/// Joins its threads however the scope ends; `stop` first tells them to finish.
struct Threads {
  std::vector<std::thread> t;
  std::atomic<bool> stop{false};
  ~Threads() {
    stop.store(true, std::memory_order_release);
    for (auto& x : t)
      if (x.joinable()) x.join();
  }
};

/// Before a run: every role reports kNotReported until it ends.
inline void clear_reports(const RoleResults& res, int roles) {
  for (int r = 0; r < roles; ++r) res.status[r] = kNotReported;
}

/// After a run: throws gv::Error naming the first role that did not succeed, with `events()`
/// (the devices' asynchronous events) appended.
void check_reports(const RoleResults& res, int roles, const std::string& what,
                   const std::function<std::string()>& events);

class QpBed {
 public:
  /// Where endpoint e's buffer of `bytes` lives; the default is Device::alloc of its device.
  struct Buffers {
    std::function<std::uint8_t*(int e, std::size_t bytes)> alloc;
    std::function<void(int e, std::uint8_t* p)> free;
  };

  /// Endpoint e lives on devs[e % devs.size()]; `before_queues(e)`, if given, runs before
  /// endpoint e's CQs and QP are created. Connects every pair, then takes the handles (a QP's
  /// handle records who delivers into it).
  QpBed(std::vector<std::unique_ptr<gv::Device>> devs, const Shape& shape, Buffers buffers = {},
        const std::function<void(int)>& before_queues = {});
  ~QpBed();
  QpBed(const QpBed&) = delete;
  QpBed& operator=(const QpBed&) = delete;

  int ends() const { return static_cast<int>(eps_.size()); }
  std::size_t region() const { return shape_.region; }
  const Endpoint& ep(int e) const { return eps_[static_cast<std::size_t>(e)]; }
  std::uint8_t* buffer(int e) const { return buf_[static_cast<std::size_t>(e)]; }
  std::vector<std::unique_ptr<gv::Device>>& devices() { return dev_; }
  /// Every device's pending asynchronous events, "; "-separated after a leading "; ".
  std::string async_events();

  /// Copy into / out of endpoint e's buffer at `off`, for buffers the host can address.
  void put(int e, std::size_t off, const std::uint8_t* src, std::size_t n) { std::memcpy(buffer(e) + off, src, n); }
  std::vector<std::uint8_t> get(int e, std::size_t off, std::size_t n) const {
    return std::vector<std::uint8_t>(buffer(e) + off, buffer(e) + off + n);
  }

  /// Run roles [0, roles) of `exp` on one host thread each, through the transport
  /// make_tx(endpoint number, endpoint, plan); their results land in `res`.
  template <class Exp, class MakeTx>
  void run_threads(const Exp& exp, int roles, const RoleResults& res, MakeTx&& make_tx) const {
    Threads th;
    for (int r = 0; r < roles; ++r)
      th.t.emplace_back([this, &exp, &res, &make_tx, r] {
        const int n = exp.endpoint(r);
        const Endpoint& e = ep(n);
        auto tx = make_tx(n, e, exp.plan(e));
        res.status[r] = exp.run(tx, e, r, res.samples_of(r));
      });
  }

  /// run_threads through DirectTx, then check that every role succeeded (`what` names the run).
  template <class Exp>
  void run_on_threads(const Exp& exp, int roles, const RoleResults& res, const std::string& what) {
    clear_reports(res, roles);
    run_threads(exp, roles, res, [](int, const Endpoint& e, const WrPlan& p) { return DirectTx(e, p); });
    check_reports(res, roles, what, [this] { return async_events(); });
  }

 private:
  void teardown() noexcept;

  Shape shape_;
  Buffers buffers_;
  std::vector<std::unique_ptr<gv::Device>> dev_;
  std::vector<std::unique_ptr<gv::ProtectionDomain>> pd_;
  std::vector<std::unique_ptr<gv::CompletionQueue>> scq_, rcq_;
  std::vector<std::unique_ptr<gv::QueuePair>> qp_;
  std::vector<std::uint8_t*> buf_;
  std::vector<std::unique_ptr<gv::MemoryRegion>> mr_;
  std::vector<Endpoint> eps_;
};

/// Before a run: endpoints [0, ends) hold `bytes` of their seeded payloads in their outgoing
/// regions, and poison in their incoming ones (where the message and the byte after it go).
template <class Bed>
void load_payloads(Bed& tb, int ends, std::uint32_t bytes) {
  std::vector<std::uint8_t> v(std::size_t{bytes} + 1);
  for (int e = 0; e < ends; ++e) {
    const std::uint64_t s = seed_of(e, bytes);
    for (std::uint32_t i = 0; i < bytes; ++i) v[i] = pattern(s, i);
    tb.put(e, tb.region(), v.data(), bytes);
    std::fill(v.begin(), v.end(), kPoison);
    tb.put(e, 0, v.data(), v.size());
  }
}

/// The message that says where endpoint e's received bytes first differ from what was expected.
std::string payload_mismatch(int e, std::uint32_t i, std::uint8_t got, std::uint8_t want, bool poison);

/// After a run: endpoint e's incoming region holds endpoint `from`'s payload, with `last` as
/// its last byte, and the poison after it.
template <class Bed>
void expect_payload(Bed& tb, int e, int from, std::uint32_t bytes, std::uint8_t last, const std::string& what) {
  const std::vector<std::uint8_t> got = tb.get(e, 0, std::size_t{bytes} + 1);
  const std::uint64_t s = seed_of(from, bytes);
  for (std::uint32_t i = 0; i <= bytes; ++i) {
    const std::uint8_t want = i == bytes ? kPoison : i + 1 == bytes ? last : pattern(s, i);
    if (got[i] != want) throw gv::Error(what + payload_mismatch(e, i, got[i], want, i == bytes));
  }
}

}  // namespace gv::bench
