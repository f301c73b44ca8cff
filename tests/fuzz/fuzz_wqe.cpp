// libFuzzer: the software HCA's CPU engine executing what a hostile kernel writes into a send
// queue. Each input becomes send WQEs (encoded by device_api's encoders from recipes, then
// bytes overwritten; or raw ring bytes), a doorbell record and a doorbell, on a fresh connected
// QP pair of one soft device with registered memory on both sides. The engine must end every
// WQE in a completion (good or error) or a flush, never crash, never read or write outside a
// registered range: the local buffer is heap memory (ASan's redzones around it), the remote one
// sits between two poisoned guard regions of the device's arena that no MR covers.
//
// Input: byte 0 flags (bit 0 raw ring, bits 1-2 doorbell: 0 the last WQE's, 1 none, 2 eight
// input bytes, 3 the last WQE's with another QPN; bits 3-4 receives posted at the responder),
// byte 1 recipes (mod 9), byte 2 the record's offset from the WQEBBs written (int8), byte 3
// overwrites (mod 17); then 12-byte recipes, 3-byte overwrites (ring offset, value), and the
// doorbell's 8 bytes. Raw: bytes 2-3 the record's counter, 8 doorbell bytes, the ring.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib.hpp>

#include "soft/semantics/contexts.hpp"

namespace {

namespace ib = gv::ib;
namespace m5 = gv::ib::mlx5;
using gv::ib::Ownership;

constexpr std::size_t kGuard = 32 << 10;  // reaches every int16 offset around the region
constexpr std::size_t kRegion = 4096;
constexpr std::uint8_t kPoison = 0xc5;
constexpr std::uint32_t kAll = gv::kLocalWrite | gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic;

/// Bytes [at, at + n) of the input, zero past its end.
struct Input {
  const std::uint8_t* p;
  std::size_t n;
  std::size_t at = 0;
  std::uint8_t u8() { return at < n ? p[at++] : (++at, 0); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint32_t u32() { return u16() | (std::uint32_t{u16()} << 16); }
  std::uint64_t u64() { return u32() | (std::uint64_t{u32()} << 32); }
};

/// What lives across inputs: the device, its memory and regions.
struct Rig {
  std::unique_ptr<gv::Device> dev = gv::Device::open("soft", [] {
    gv::DeviceOptions o;
    o.arena_bytes = std::size_t{16} << 20;
    return o;
  }());
  std::unique_ptr<gv::ProtectionDomain> pd = dev->alloc_pd();
  std::uint8_t* block = static_cast<std::uint8_t*>(dev->alloc(kGuard + kRegion + kGuard));
  std::uint8_t* region = block + kGuard;
  std::unique_ptr<gv::MemoryRegion> remote = pd->reg_mr(region, kRegion, kAll);
  std::unique_ptr<gv::MemoryRegion> remote_ro = pd->reg_mr(region + 64, 256, gv::kRemoteRead);
  std::unique_ptr<std::uint8_t[]> local_mem = std::make_unique<std::uint8_t[]>(kRegion);
  std::uint8_t* local = local_mem.get();
  std::unique_ptr<gv::MemoryRegion> local_mr = pd->reg_mr(local, kRegion, kAll);
  std::byte* tables = nullptr;  ///< the arena's tables, mapped again (read-only), to see the engine's progress

  Rig() {
    std::memset(block, kPoison, kGuard + kRegion + kGuard);
    const gv::QpInfo info = [&] {
      auto cq = dev->create_cq(4);
      return pd->create_qp(*cq, *cq)->info();
    }();
    tables = arena_map(info.arena);
  }

  static std::byte* arena_map(const char* path) {
    std::FILE* f = std::fopen(path, "rb");
    if (f == nullptr) std::abort();
    const int fd = fileno(f);
    void* p = mmap(nullptr, gv::soft::ArenaLayout::kHeap, PROT_READ, MAP_SHARED, fd, 0);
    std::fclose(f);
    if (p == MAP_FAILED) std::abort();
    return static_cast<std::byte*>(p);
  }

  gv::soft::QpCtx& ctx(std::uint32_t qpn) const {
    return reinterpret_cast<gv::soft::QpCtx*>(tables + gv::soft::ArenaLayout::kQps)[qpn - gv::soft::kQpnBase];
  }

  void check_guards() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (block[i] != kPoison || region[kRegion + i] != kPoison) {
        std::fprintf(stderr, "fuzz_wqe: a guard byte %s the registered region changed (offset %zu)\n",
                     block[i] != kPoison ? "below" : "above", i);
        std::abort();
      }
    }
  }
};

/// A QP and its own CQ.
struct Side {
  std::unique_ptr<gv::CompletionQueue> cq;
  std::unique_ptr<gv::QueuePair> qp;
  ib::QpHandle h{};
  ib::CqHandle ch{};
};

constexpr ib::WrOpcode kOps[] = {ib::WrOpcode::kRdmaWrite, ib::WrOpcode::kRdmaWriteImm, ib::WrOpcode::kRdmaRead,
                                 ib::WrOpcode::kSend,      ib::WrOpcode::kSendImm,      ib::WrOpcode::kAtomicCmpSwp,
                                 ib::WrOpcode::kAtomicFetchAdd, ib::WrOpcode::kNop};

std::uint32_t key_of(const Rig& rig, std::uint8_t sel, std::uint32_t raw, bool local) {
  switch (sel % 4) {
    case 0: return local ? rig.local_mr->lkey() : rig.remote->rkey();
    case 1: return local ? rig.remote->rkey() : rig.local_mr->lkey();  // the other side's key
    case 2: return rig.remote_ro->rkey();
    default: return raw;
  }
}

/// Encode the recipes into a's send queue from WQEBB 0; returns the WQEBBs written and the
/// doorbell value of the last WQE.
std::uint64_t write_recipes(const Rig& rig, const Side& a, Input& in, std::uint32_t n, std::uint64_t& db) {
  std::uint64_t pos = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const ib::WrOpcode op = kOps[in.u8() % 8];
    const std::uint8_t f = in.u8();
    std::uint32_t len = in.u16();
    const auto loff = static_cast<std::int16_t>(in.u16());
    const auto roff = static_cast<std::int16_t>(in.u16());
    const std::uint8_t lsel = in.u8(), rsel = in.u8();
    const std::uint16_t seed = in.u16();
    const bool inl = (f & 2) != 0;
    if (inl) len %= a.h.max_inline + 1;
    ib::Sge sg[2];
    // Inline bytes are read by the encoder here, so they come from inside the local buffer;
    // SGEs name any address and are the engine's to check.
    const std::uint64_t laddr = reinterpret_cast<std::uint64_t>(inl ? rig.local : rig.local + loff);
    sg[0] = ib::Sge{laddr, len, key_of(rig, lsel, seed * 0x10001u, true)};
    sg[1] = ib::Sge{laddr + len, len / 2, sg[0].lkey};
    ib::SendWr wr;
    wr.opcode = op;
    wr.sg_list = sg;
    wr.num_sge = (f & 16) && !inl ? 2 : 1;
    wr.flags = ((f & 1) ? ib::kWrSignaled : 0u) | (inl ? ib::kWrInline : 0u) | ((f & 4) ? ib::kWrFence : 0u) |
               ((f & 8) ? ib::kWrSolicited : 0u);
    wr.remote_addr = reinterpret_cast<std::uint64_t>(rig.region + roff);
    wr.rkey = key_of(rig, rsel, seed * 0x01000193u, false);
    wr.compare_add = seed;
    wr.swap = ~std::uint64_t{seed};
    wr.imm = seed;
    const std::uint32_t ds = ib::wqe_ds(wr);
    const std::uint32_t nbb = ib::wqe_bbs(ds);
    if (pos + nbb > a.h.sq_bbs) break;
    for (std::uint32_t k = 0; k < ds; ++k) {
      const ib::Octoword o = ib::wqe_octoword(wr, k, static_cast<std::uint16_t>(pos), a.h.qpn);
      if (k == 0) db = ib::doorbell_value(o);
      ib::store_octoword(a.h.sq + ib::sq_octoword_offset(pos, k, a.h.sq_bbs), o);
    }
    pos += nbb;
  }
  return pos;
}

void run(Rig& rig, const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  const std::uint8_t flags = in.u8();
  Side a, b;
  a.cq = rig.dev->create_cq(64);
  b.cq = rig.dev->create_cq(64);
  gv::QpCaps caps;
  caps.sq_depth = 8;
  caps.rq_depth = 8;
  caps.max_send_sge = 2;
  caps.max_recv_sge = 2;
  a.qp = rig.pd->create_qp(*a.cq, *a.cq, caps);
  b.qp = rig.pd->create_qp(*b.cq, *b.cq, caps);
  gv::ConnectAttr attr;
  attr.rnr_retry = 0;  // a SEND finding no receive fails at once
  a.qp->connect(b.qp->info(), attr);
  b.qp->connect(a.qp->info(), attr);
  for (Side* s : {&a, &b}) {
    s->h = s->qp->device_handle();
    s->ch = s->cq->device_handle();
  }
  for (std::uint32_t r = 0; r < ((flags >> 3) & 3u); ++r) {
    const ib::Sge rs{reinterpret_cast<std::uint64_t>(rig.region + 512 * r), 512, rig.remote->lkey()};
    if (ib::post_recv<Ownership::kExclusive>(b.h, &rs, 1) != gv::Status::kOk) std::abort();
  }

  std::uint64_t record = 0, db = 0;
  const std::uint32_t db_mode = (flags >> 1) & 3u;
  if (flags & 1) {
    record = in.u16();
    db = in.u64();
    const std::size_t ring = std::size_t{a.h.sq_bbs} * m5::kSendWqeBB;
    std::memcpy(a.h.sq, data + std::min(in.at, size), std::min(ring, size - std::min(in.at, size)));
  } else {
    const std::uint32_t n = in.u8() % 9;
    const auto delta = static_cast<std::int8_t>(in.u8());
    const std::uint32_t overwrites = in.u8() % 17;
    const std::uint64_t written = write_recipes(rig, a, in, n, db);
    const std::int64_t r = static_cast<std::int64_t>(written) + delta;
    record = r < 0 ? 0 : static_cast<std::uint64_t>(r);
    const std::size_t ring = std::size_t{a.h.sq_bbs} * m5::kSendWqeBB;
    for (std::uint32_t i = 0; i < overwrites; ++i) {
      const std::uint16_t at = in.u16();
      reinterpret_cast<std::uint8_t*>(a.h.sq)[at % ring] = in.u8();
    }
    if (db_mode == 2) db = in.u64();
    if (db_mode == 3) db ^= std::uint64_t{0x01} << 32;  // a QPN one off
  }
  const bool ring_db = db_mode != 1 && db != 0;
  ib::sq_ring_doorbell(a.h, record, ring_db ? db : 0);

  // The engine is done once it executed or flushed everything the record covers and saw the
  // doorbell (or moved the QP to error). Bounded: a hang is a finding.
  gv::soft::QpCtx& c = rig.ctx(a.h.qpn);
  const std::uint64_t posted = ib::widen(0, static_cast<std::uint16_t>(record), m5::kWqeIndexBits);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const std::uint64_t head = std::atomic_ref<std::uint64_t>(c.sq_head).load(std::memory_order_acquire);
    const std::uint64_t seen = std::atomic_ref<std::uint64_t>(c.last_doorbell).load(std::memory_order_acquire);
    const auto st = static_cast<gv::QpState>(std::atomic_ref<std::uint32_t>(c.state).load(std::memory_order_acquire));
    if (head >= posted && (!ring_db || seen == db || st == gv::QpState::kError)) break;
    if (std::chrono::steady_clock::now() > until) {
      std::fprintf(stderr, "fuzz_wqe: the engine did not finish (sq_head %llu of %llu)\n",
                   static_cast<unsigned long long>(head), static_cast<unsigned long long>(posted));
      std::abort();
    }
    std::this_thread::yield();
  }
  // Every completion decodes; the CQ may have overrun (a record far ahead flushes thousands).
  for (Side* s : {&a, &b}) {
    ib::Completion cqe;
    for (int i = 0; i < 128; ++i) {
      const gv::Status st = ib::try_poll_cq<Ownership::kExclusive>(s->ch, cqe);
      if (st != gv::Status::kOk && st != gv::Status::kCompletionError) break;
      if (gv::describe(cqe).empty()) std::abort();
    }
  }
  while (rig.dev->poll_async_event()) {
  }
  a.qp.reset();  // destroy_qp waits for the engine: nothing executes after
  b.qp.reset();
  rig.check_guards();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Rig rig;
  run(rig, data, size);
  return 0;
}
