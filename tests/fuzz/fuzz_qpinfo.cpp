// libFuzzer: a peer's QpInfo, as bytes from the wire. A soft QP connects to whatever it names
// (or refuses it with gv::Error) and posts a signaled 64-byte WRITE through it; the WRITE must
// complete (good or with an error) within a bounded wait, and the process must not touch
// memory it does not own. The seed corpus holds the QpInfo of a QP of this process (the arena
// path of a soft device is /proc/<pid>/fd/<fd>: the harness rewrites "self" to its own pid).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

namespace {

namespace ib = gv::ib;
constexpr std::uint32_t kAll = gv::kLocalWrite | gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic;

struct Rig {
  std::unique_ptr<gv::Device> dev = gv::Device::open("soft", [] {
    gv::DeviceOptions o;
    o.arena_bytes = std::size_t{8} << 20;
    return o;
  }());
  std::unique_ptr<gv::ProtectionDomain> pd = dev->alloc_pd();
  void* buf = dev->alloc(4096);
  std::unique_ptr<gv::MemoryRegion> mr = pd->reg_mr(buf, 4096, kAll);
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Rig rig;
  gv::QpInfo remote;
  std::memcpy(&remote, data, size < sizeof(remote) ? size : sizeof(remote));
  // "/proc/self/" names this process's fds by its pid, as a peer's QpInfo would.
  if (std::strncmp(remote.arena, "/proc/self/", 11) == 0) {
    const std::string path = "/proc/" + std::to_string(getpid()) + "/" + std::string(remote.arena + 11, strnlen(remote.arena + 11, 52));
    std::snprintf(remote.arena, sizeof(remote.arena), "%s", path.c_str());
    remote.pid = getpid();
  }
  auto cq = rig.dev->create_cq(8);
  auto qp = rig.pd->create_qp(*cq, *cq);
  gv::ConnectAttr attr;
  attr.rnr_retry = 0;
  try {
    qp->connect(remote, attr);
  } catch (const gv::Error&) {
    return 0;  // refused with a message: what a bad QpInfo should get
  }
  const ib::QpHandle h = qp->device_handle();
  const ib::CqHandle ch = cq->device_handle();
  const ib::Sge s{reinterpret_cast<std::uint64_t>(rig.buf), 64, rig.mr->lkey()};
  ib::SendWr wr;
  wr.opcode = ib::WrOpcode::kRdmaWrite;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.flags = ib::kWrSignaled;
  wr.remote_addr = reinterpret_cast<std::uint64_t>(rig.buf) + 2048;
  wr.rkey = rig.mr->rkey();
  if (ib::post_send<ib::Ownership::kExclusive>(h, wr) != gv::Status::kOk) std::abort();
  ib::Completion c;
  const gv::Status st = ib::poll_cq<ib::Ownership::kExclusive>(ch, c, gv::Budget{20'000'000'000ull});
  if (st != gv::Status::kOk && st != gv::Status::kCompletionError) {
    std::fprintf(stderr, "fuzz_qpinfo: no completion (%s)\n", gv::to_string(st));
    std::abort();
  }
  while (rig.dev->poll_async_event()) {
  }
  return 0;
}
