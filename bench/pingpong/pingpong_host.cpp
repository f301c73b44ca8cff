// gv_pingpong: RDMA WRITE ping-pong between two QPs driven by two host threads that run the
// device API (the GPU modes live in the GPU benchmarks). The receiver polls the last byte of
// the message (perftest's write_lat, the dissertation's measurement), or with
// --poll completion waits for a WRITE_WITH_IMM's receive completion.
// Reports half the round trip, perftest's columns, in microseconds.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "../common/args.hpp"
#include "../common/stats.hpp"

namespace {

using gv::Status;
using gv::ib::Ownership;

struct Options {
  std::string provider = "soft";
  std::vector<std::uint64_t> sizes{8};
  std::uint64_t iters = 1000;
  std::uint64_t warmup = 100;
  bool completion = false;
  bool json = false;
};

constexpr char kUsage[] =
    "usage: gv_pingpong [--provider NAME] [-s BYTES | -a] [-n ITERS] [--poll last-byte|completion] [--json]\n"
    "  -s BYTES    one message size, 1 .. 1073741824 (default 8)\n"
    "  -a          all sizes 8 B .. 4 MiB (iterations drop to 100 above 64 KiB)\n"
    "  -n ITERS    measured exchanges a size, 1 .. 10000000 (default 1000; 100 warm-up ones first)\n"
    "  --poll      last-byte: the receiver polls the message's last byte (default);\n"
    "              completion: WRITE_WITH_IMM, the receiver polls its receive CQ\n"
    "  --json      one JSON object per row\n"
    "  -h, --help  this text\n";

Options parse(int argc, char** argv) {
  Options o;
  gv::bench::ArgWalker args(argc, argv);
  while (args.more()) {
    const std::string a = args.next();
    if (a == "--provider") o.provider = args.value(a);
    else if (a == "-s" || a == "--size") o.sizes = {args.number(a, 1, std::uint64_t{1} << 30)};
    else if (a == "-a" || a == "--all") o.sizes = gv::bench::pow2_sizes(3, 22);
    else if (a == "-n" || a == "--iters") o.iters = args.number(a, 1, 10'000'000);
    else if (a == "--poll") {
      const std::string p = args.value(a);
      if (p != "last-byte" && p != "completion") throw gv::bench::UsageError("--poll takes last-byte or completion");
      o.completion = p == "completion";
    } else if (a == "--json") o.json = true;
    else throw gv::bench::UsageError("unknown argument " + a);
  }
  return o;
}

/// One side of the ping-pong: its QP, CQ, and a registered buffer the peer writes into.
struct Side {
  std::unique_ptr<gv::ProtectionDomain> pd;
  std::unique_ptr<gv::CompletionQueue> cq;
  std::unique_ptr<gv::QueuePair> qp;
  std::uint8_t* buf = nullptr;
  std::unique_ptr<gv::MemoryRegion> mr;
  gv::ib::QpHandle h{};
  gv::ib::CqHandle ch{};
};

/// The device's arena holds both sides' buffers (2 * max_bytes each, page-aligned) besides
/// queues and tables, for which 16 MiB is ample; never less than the default.
std::size_t arena_bytes(std::uint64_t max_bytes) {
  const std::uint64_t buffers = 2 * (((2 * max_bytes + 4095) & ~std::uint64_t{4095}) + 4096);
  return std::max<std::size_t>(gv::DeviceOptions{}.arena_bytes, (std::size_t{16} << 20) + buffers);
}

constexpr std::uint32_t kSignalEvery = 32;
constexpr std::uint32_t kRecvDepth = 64;

/// Run `n` exchanges of `bytes` from this side's point of view. `starts` sends first.
/// Returns per-round-trip times (starter only) in microseconds.
Status run_side(Side& me, const Side& peer, std::uint64_t bytes, std::uint64_t n, bool starts,
                bool completion, std::uint32_t max_inline, std::vector<double>* rtt_us) {
  const bool inl = bytes <= max_inline && !completion;
  gv::ib::Sge sge{reinterpret_cast<std::uint64_t>(me.buf + bytes), static_cast<std::uint32_t>(bytes),
                  me.mr->lkey()};
  gv::ib::SendWr wr;
  wr.opcode = completion ? gv::ib::WrOpcode::kRdmaWriteImm : gv::ib::WrOpcode::kRdmaWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(peer.buf);
  wr.rkey = peer.mr->rkey();
  std::uint8_t* out = me.buf + bytes;      // outgoing message
  volatile std::uint8_t* in_last = me.buf + bytes - 1;  // last byte of the incoming one
  gv::ib::Sge rsge{reinterpret_cast<std::uint64_t>(me.buf), 0, me.mr->lkey()};
  std::uint64_t early_recvs = 0;  // receive completions consumed while waiting for a send's

  auto send = [&](std::uint64_t i) -> Status {
    out[bytes - 1] = static_cast<std::uint8_t>(i + 1);
    wr.flags = (i % kSignalEvery == kSignalEvery - 1 ? gv::ib::kWrSignaled : 0u) |
               (inl ? gv::ib::kWrInline : 0u);
    wr.imm = static_cast<std::uint32_t>(i);
    if (Status st = gv::ib::post_send<Ownership::kExclusive>(me.h, wr); st != Status::kOk) return st;
    if (wr.flags & gv::ib::kWrSignaled) {
      // Retire the signaled WQE (and the unsignaled run before it) to keep the ring free.
      gv::ib::Completion c;
      for (;;) {
        const Status st = gv::ib::poll_cq<Ownership::kExclusive>(me.ch, c);
        if (st != Status::kOk) return st;
        if (c.is_send()) break;
        if (Status r = gv::ib::post_recv<Ownership::kExclusive>(me.h, &rsge, 1); r != Status::kOk) return r;
        early_recvs++;
      }
    }
    return Status::kOk;
  };
  auto receive = [&](std::uint64_t i) -> Status {
    if (completion) {
      if (early_recvs > 0) {
        --early_recvs;
        return Status::kOk;
      }
      gv::ib::Completion c;
      for (;;) {
        const Status st = gv::ib::poll_cq<Ownership::kExclusive>(me.ch, c);
        if (st != Status::kOk) return st;
        if (!c.is_send()) break;
      }
      return gv::ib::post_recv<Ownership::kExclusive>(me.h, &rsge, 1);
    }
    const auto want = static_cast<std::uint8_t>(i + 1);
    return gv::sync::bounded_wait(
        [&] { return gv::sync::load_acquire(const_cast<std::uint8_t*>(in_last)) == want; },
        gv::Budget{}, me.h.abort);
  };

  for (std::uint64_t i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (starts) {
      if (Status st = send(i); st != Status::kOk) return st;
      if (Status st = receive(i); st != Status::kOk) return st;
      const auto t1 = std::chrono::steady_clock::now();
      if (rtt_us) rtt_us->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    } else {
      if (Status st = receive(i); st != Status::kOk) return st;
      if (Status st = send(i); st != Status::kOk) return st;
    }
  }
  return Status::kOk;
}

int run(const Options& o) {
  const std::uint64_t max_bytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  gv::DeviceOptions dopt;
  dopt.arena_bytes = arena_bytes(max_bytes);
  auto dev = gv::Device::open(o.provider, dopt);
  gv::QpCaps caps;
  caps.max_inline = 64;
  Side a, b;
  for (Side* s : {&a, &b}) {
    s->pd = dev->alloc_pd();
    s->cq = dev->create_cq(1024);
    s->qp = s->pd->create_qp(*s->cq, *s->cq, caps);
    // [0, max): incoming message; [max, 2*max): outgoing message.
    s->buf = static_cast<std::uint8_t*>(dev->alloc(2 * max_bytes));
    std::memset(s->buf, 0, 2 * max_bytes);
    s->mr = s->pd->reg_mr(s->buf, 2 * max_bytes, gv::kLocalWrite | gv::kRemoteWrite);
  }
  a.qp->connect(b.qp->info());
  b.qp->connect(a.qp->info());
  for (Side* s : {&a, &b}) {
    s->h = s->qp->device_handle();
    s->ch = s->cq->device_handle();
    // WRITE_WITH_IMM consumes a receive: keep kRecvDepth posted (each side reposts one per
    // message), so the peer never meets an empty receive queue.
    if (o.completion) {
      gv::ib::Sge none{reinterpret_cast<std::uint64_t>(s->buf), 0, s->mr->lkey()};
      for (std::uint32_t i = 0; i < kRecvDepth; ++i)
        if (gv::ib::post_recv<Ownership::kExclusive>(s->h, &none, 1) != Status::kOk)
          throw gv::Error("posting the initial receives failed");
    }
  }

  const std::string mode = "host-threads";
  if (!o.json) {
    std::printf("# gv_pingpong: RDMA WRITE ping-pong, provider %s (CPU engine), %s, poll %s\n",
                dev->name().c_str(), mode.c_str(), o.completion ? "completion" : "last byte");
    std::printf("# latency is half the round trip\n");
    gv::bench::print_latency_header(stdout);
  }
  for (const std::uint64_t bytes : o.sizes) {
    const std::uint64_t iters = bytes > 65536 && o.sizes.size() > 1 ? std::min<std::uint64_t>(o.iters, 100) : o.iters;
    // Fresh counters per size: both sides restart their sequence numbers.
    std::memset(a.buf, 0, 2 * max_bytes);
    std::memset(b.buf, 0, 2 * max_bytes);
    std::vector<double> rtt;
    rtt.reserve(iters);
    Status sa = Status::kOk, sb = Status::kOk;
    std::thread responder([&] {
      sb = run_side(b, a, bytes, o.warmup + iters, false, o.completion, caps.max_inline, nullptr);
    });
    sa = run_side(a, b, bytes, o.warmup + iters, true, o.completion, caps.max_inline, &rtt);
    if (sa != Status::kOk) dev->abort();  // release the responder's waits
    responder.join();
    if (sa != Status::kOk || sb != Status::kOk) {
      std::fprintf(stderr, "gv_pingpong: %llu B failed: initiator %s, responder %s\n",
                   static_cast<unsigned long long>(bytes), gv::to_string(sa), gv::to_string(sb));
      return 1;
    }
    std::vector<double> half(rtt.begin() + static_cast<std::ptrdiff_t>(o.warmup), rtt.end());
    for (double& v : half) v /= 2;
    const auto s = gv::bench::summarize(half);
    if (o.json) {
      std::printf("%s\n", gv::bench::latency_json("pingpong", "\"provider\":\"" + dev->name() + "\",\"mode\":\"" + mode +
                                                                  "\",\"poll\":\"" + (o.completion ? "completion" : "last_byte") + "\",",
                                                  bytes, iters, s).c_str());
    } else {
      gv::bench::print_latency_row(stdout, bytes, iters, s);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gv::bench::run_main("gv_pingpong", kUsage, [&] { return run(parse(argc, argv)); });
}
