// Uses an installed gpuverbs: opens the soft device, connects two QPs, and runs one RDMA WRITE
// posted and polled with the device API on a host thread (as a kernel thread would), then
// checks the bytes at the target. Exit status 0 means the installed package works.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

int main() try {
  constexpr std::size_t kBytes = 4096;

  auto dev = gv::Device::open("soft");
  auto pd = dev->alloc_pd();
  auto cq_a = dev->create_cq(64);
  auto cq_b = dev->create_cq(64);
  auto qp_a = pd->create_qp(*cq_a, *cq_a);
  auto qp_b = pd->create_qp(*cq_b, *cq_b);
  qp_a->connect(qp_b->info());
  qp_b->connect(qp_a->info());

  auto* src = static_cast<std::uint8_t*>(dev->alloc(kBytes));
  auto* dst = static_cast<std::uint8_t*>(dev->alloc(kBytes));
  std::uint64_t x = 0x9e3779b97f4a7c15ull;  // seeded pseudo-random payload, poisoned target
  for (std::size_t i = 0; i < kBytes; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    src[i] = static_cast<std::uint8_t>(x);
  }
  std::memset(dst, 0xee, kBytes);
  auto src_mr = pd->reg_mr(src, kBytes, gv::kLocalWrite);
  auto dst_mr = pd->reg_mr(dst, kBytes, gv::kLocalWrite | gv::kRemoteWrite);

  // Handles are plain values: what a kernel would take by value.
  const gv::ib::QpHandle qp = qp_a->device_handle();
  const gv::ib::CqHandle cq = cq_a->device_handle();
  gv::Status posted = gv::Status::kEmpty, polled = gv::Status::kEmpty;
  gv::ib::Completion done;
  std::thread poster([&] {
    const gv::ib::Sge sge{reinterpret_cast<std::uint64_t>(src), kBytes, src_mr->lkey()};
    gv::ib::SendWr wr;
    wr.opcode = gv::ib::WrOpcode::kRdmaWrite;
    wr.flags = gv::ib::kWrSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_addr = reinterpret_cast<std::uint64_t>(dst);
    wr.rkey = dst_mr->rkey();
    posted = gv::ib::post_send<gv::ib::Ownership::kExclusive>(qp, wr);
    if (posted == gv::Status::kOk)
      polled = gv::ib::poll_cq<gv::ib::Ownership::kExclusive>(cq, done, gv::Budget{5'000'000'000ull});
  });
  poster.join();

  int rc = 0;
  if (posted != gv::Status::kOk) {
    std::fprintf(stderr, "consumer: post_send: %s\n", gv::to_string(posted));
    rc = 1;
  } else if (polled != gv::Status::kOk || !done.ok()) {
    std::fprintf(stderr, "consumer: poll_cq: %s (%s)\n", gv::to_string(polled), gv::describe(done).c_str());
    rc = 1;
  } else if (std::memcmp(src, dst, kBytes) != 0) {
    std::fprintf(stderr, "consumer: the WRITE completed but the target bytes differ\n");
    rc = 1;
  } else {
    std::printf("consumer: RDMA WRITE of %zu B via installed gpuverbs (%s provider): ok\n", kBytes,
                dev->name().c_str());
  }
  src_mr.reset();
  dst_mr.reset();
  dev->free(src);
  dev->free(dst);
  return rc;
} catch (const gv::Error& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
