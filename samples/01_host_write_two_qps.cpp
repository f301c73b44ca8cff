// Sample 01 — an RDMA WRITE between two queue pairs, posted and polled by a host thread.
//
// Teaches: the verbs objects (Device, ProtectionDomain, MemoryRegion, CompletionQueue,
// QueuePair), connecting two QPs, and the device API (gv::ib::post_send / poll_cq) called from
// a host thread exactly as a kernel thread would call it.
// When to use: to learn the verbs level, or to test a protocol on a machine without a GPU: the
// software HCA's CPU engine executes the WQEs.
// Cost: one WQE write, one doorbell and one CQE poll per message (the host figures are in
// README's benchmark section; run build/bench/gv_pingpong for this machine's).
//
//   build/samples/01_host_write_two_qps
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

int main() try {
  constexpr std::uint32_t kBytes = 4096;
  auto dev = gv::Device::open("soft");  // the software HCA, always available
  auto pd = dev->alloc_pd();
  auto cq_a = dev->create_cq(16), cq_b = dev->create_cq(16);
  auto qp_a = pd->create_qp(*cq_a, *cq_a), qp_b = pd->create_qp(*cq_b, *cq_b);
  qp_a->connect(qp_b->info());  // RESET -> INIT -> RTR -> RTS; info() is what a peer would send
  qp_b->connect(qp_a->info());

  auto* src = static_cast<std::uint8_t*>(dev->alloc(kBytes));
  auto* dst = static_cast<std::uint8_t*>(dev->alloc(kBytes));
  for (std::uint32_t i = 0; i < kBytes; ++i) src[i] = static_cast<std::uint8_t>(i * 131 + 7);
  std::memset(dst, 0, kBytes);
  auto src_mr = pd->reg_mr(src, kBytes, gv::kLocalWrite);
  auto dst_mr = pd->reg_mr(dst, kBytes, gv::kLocalWrite | gv::kRemoteWrite);

  // Device handles are plain values: what a kernel would take by value.
  const gv::ib::QpHandle qp = qp_a->device_handle();
  const gv::ib::CqHandle cq = cq_a->device_handle();
  const gv::ib::Sge sge{reinterpret_cast<std::uint64_t>(src), kBytes, src_mr->lkey()};
  gv::ib::SendWr wr;
  wr.opcode = gv::ib::WrOpcode::kRdmaWrite;
  wr.flags = gv::ib::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(dst);
  wr.rkey = dst_mr->rkey();
  gv::Status st = gv::ib::post_send<gv::ib::Ownership::kExclusive>(qp, wr);
  gv::ib::Completion c;
  if (st == gv::Status::kOk) st = gv::ib::poll_cq<gv::ib::Ownership::kExclusive>(cq, c);  // bounded wait
  if (st != gv::Status::kOk || !c.ok()) {
    std::fprintf(stderr, "01: %s (%s)\n", gv::to_string(st), gv::describe(c).c_str());
    return 1;
  }
  const bool same = std::memcmp(src, dst, kBytes) == 0;
  std::printf("01: RDMA WRITE of %u bytes from QP 0x%x to QP 0x%x: %s\n", kBytes, qp_a->qpn(), qp_b->qpn(),
              same ? "the bytes arrived" : "WRONG BYTES");
  return same ? 0 : 1;
} catch (const gv::Error& e) {
  std::fprintf(stderr, "01: %s\n", e.what());
  return 1;
}
