#include "bed.hpp"

#include <algorithm>
#include <cstdio>

namespace gv::bench {

std::size_t arena_bytes(const Shape& s, int ends, bool buffers) {
  const std::size_t queues = std::size_t{s.sq_depth} * 128 + std::size_t{s.rq_depth} * 64 +
                             2 * std::size_t{s.cq_depth} * 64 + 8 * 4096;
  const std::size_t per_end = queues + (buffers ? 2 * s.region + 4096 : 0);
  return std::max(gv::DeviceOptions{}.arena_bytes, (std::size_t{16} << 20) + static_cast<std::size_t>(ends) * per_end);
}

void check_reports(const RoleResults& res, int roles, const std::string& what,
                   const std::function<std::string()>& events) {
  for (int r = 0; r < roles; ++r) {
    const Status st = res.status[r];
    if (st == Status::kOk) continue;
    throw gv::Error(what + ": role " + std::to_string(r) +
                    (st == kNotReported ? " did not report (its kernel or thread did not run)"
                                        : std::string(" ended with ") + gv::to_string(st)) +
                    events());
  }
}

std::string payload_mismatch(int e, std::uint32_t i, std::uint8_t got, std::uint8_t want, bool poison) {
  char b[160];
  std::snprintf(b, sizeof(b), ": endpoint %d byte %u is 0x%02x, expected 0x%02x (%s)", e, i, got, want,
                poison ? "the poison after the message" : "the peer's seeded payload");
  return b;
}

QpBed::QpBed(std::vector<std::unique_ptr<gv::Device>> devs, const Shape& s, Buffers buffers,
             const std::function<void(int)>& before_queues)
    : shape_(s), buffers_(std::move(buffers)), dev_(std::move(devs)) {
  try {
    for (auto& d : dev_) pd_.push_back(d->alloc_pd());
    gv::QpCaps caps;
    caps.sq_depth = s.sq_depth;
    caps.rq_depth = s.rq_depth;
    caps.max_inline = kMaxInline;
    const int ends = 2 * s.pairs;
    for (int e = 0; e < ends; ++e) {
      const std::size_t d = static_cast<std::size_t>(e) % dev_.size();
      if (before_queues) before_queues(e);
      scq_.push_back(dev_[d]->create_cq(s.cq_depth));
      rcq_.push_back(dev_[d]->create_cq(s.cq_depth));
      qp_.push_back(pd_[d]->create_qp(*scq_.back(), *rcq_.back(), caps));
      buf_.push_back(buffers_.alloc ? buffers_.alloc(e, 2 * s.region)
                                    : static_cast<std::uint8_t*>(dev_[d]->alloc(2 * s.region)));
      mr_.push_back(pd_[d]->reg_mr(buf_.back(), 2 * s.region, kAllAccess));
    }
    for (int p = 0; p < s.pairs; ++p) {
      qp_[2 * p]->connect(qp_[2 * p + 1]->info());
      qp_[2 * p + 1]->connect(qp_[2 * p]->info());
    }
    for (std::size_t e = 0; e < static_cast<std::size_t>(ends); ++e) {
      Endpoint x;
      x.qp = qp_[e]->device_handle();
      x.scq = scq_[e]->device_handle();
      x.rcq = rcq_[e]->device_handle();
      x.in = buf_[e];
      x.out = buf_[e] + s.region;
      x.peer_in = buf_[e ^ 1];
      x.lkey = mr_[e]->lkey();
      x.peer_rkey = mr_[e ^ 1]->rkey();
      eps_.push_back(x);
    }
  } catch (...) {
    teardown();
    throw;
  }
}

QpBed::~QpBed() { teardown(); }

void QpBed::teardown() noexcept {
  mr_.clear();
  for (std::size_t e = 0; e < buf_.size(); ++e) {
    try {
      if (buffers_.free) buffers_.free(static_cast<int>(e), buf_[e]);
      else dev_[e % dev_.size()]->free(buf_[e]);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "warning: %s\n", ex.what());
    }
  }
  buf_.clear();
  qp_.clear();
  scq_.clear();
  rcq_.clear();
  pd_.clear();
  dev_.clear();
}

std::string QpBed::async_events() {
  std::string s;
  for (auto& d : dev_)
    while (auto e = d->poll_async_event()) s += "; " + e->message;
  return s;
}

}  // namespace gv::bench
