// libFuzzer: CQEs from a hostile HCA, as device_api reads them. The input fills a CQ ring of
// four CQEs, the send queue their requester completions name (four WQEBBs), and the work
// queues' counters; the CQ is polled (exclusive and shared pollers) until it reports nothing.
// Every taken CQE must decode to a completion or an error completion, printable by
// gv::describe; nothing may read outside the ring, the send queue or the counters.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

namespace {

namespace ib = gv::ib;
namespace m5 = gv::ib::mlx5;

struct Memory {
  alignas(64) m5::Cqe ring[4];
  alignas(64) std::byte sq[4 * m5::kSendWqeBB];
  m5::CqDbrec dbrec{};
  ib::CqCounters state{};
  ib::QpCounters send{}, recv{};
  std::uint32_t abort = 0, error = 0;
};

template <ib::Ownership O>
void poll_all(const std::uint8_t* data, std::size_t size) {
  Memory m;
  std::memset(m.ring, 0, sizeof(m.ring));
  std::memset(m.sq, 0, sizeof(m.sq));
  std::memcpy(m.ring, data, size < sizeof(m.ring) ? size : sizeof(m.ring));
  std::size_t at = sizeof(m.ring);
  if (size > at) std::memcpy(m.sq, data + at, size - at < sizeof(m.sq) ? size - at : sizeof(m.sq));
  at += sizeof(m.sq);
  std::uint8_t knobs[8] = {};
  if (size > at) std::memcpy(knobs, data + at, size - at < sizeof(knobs) ? size - at : sizeof(knobs));
  m.send.sq.reserved = knobs[0];
  m.send.sq.completed = knobs[1] <= knobs[0] ? knobs[1] : knobs[0];
  m.recv.rq.reserved = knobs[2];
  m.recv.rq.completed = knobs[3] <= knobs[2] ? knobs[3] : knobs[2];
  m.error = knobs[4] & 1;
  const std::uint32_t qpn = 0x40 + (knobs[5] & 3);

  ib::CqHandle h;
  h.cqn = 1;
  h.ring = m.ring;
  h.dbrec = &m.dbrec;
  h.state = &m.state;
  h.abort = &m.abort;
  h.error = &m.error;
  h.log_cqes = 2;
  if (knobs[6] & 1) {
    h.send_qp = &m.send;
    h.send_sq = m.sq;
    h.send_sq_bbs = 4;
    h.send_qpn = qpn;
  }
  if (knobs[6] & 2) {
    h.recv_qp = &m.recv;
    h.recv_qpn = qpn ^ 1;
  }
  for (int i = 0; i < 16; ++i) {
    ib::Completion c;
    const gv::Status st = ib::try_poll_cq<O>(h, c);
    if (st == gv::Status::kEmpty || st == gv::Status::kCqOverrun) return;
    if (st != gv::Status::kOk && st != gv::Status::kCompletionError) std::abort();
    if (st != c.status || gv::describe(c).empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The decoder alone, on any 64 bytes.
  m5::Cqe one{};
  std::memcpy(&one, data, size < sizeof(one) ? size : sizeof(one));
  const ib::Completion c = ib::decode_cqe(one);
  if (c.status != gv::Status::kOk && c.status != gv::Status::kCompletionError) std::abort();
  poll_all<ib::Ownership::kExclusive>(data, size);
  poll_all<ib::Ownership::kShared>(data, size);
  return 0;
}
