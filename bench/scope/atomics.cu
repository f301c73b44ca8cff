// Family 5, Atomic-RMW: four access patterns × contention × padding (powers of two 1..1024) ×
// op × scope (block, device, system) × memory (device, host-mapped, peer), in atomic operations
// per µs; and the library's own pattern, N posters reserving slots on one queue counter
// (Ownership::kShared) beside N posters on their own queues (kExclusive).
#include <cstdio>

#include <gpuverbs/ib/post.hpp>
#include <gpuverbs/sync.hpp>

#include "atomics_kernels.cuh"
#include "family.hpp"

namespace gv::scope {

namespace {

constexpr std::uint64_t kThreads = 1 << 16;
constexpr std::uint32_t kIters = 16;
constexpr int kBlock = 256;

template <Op O, Scope S>
void launch_os(Pattern p, unsigned* buf, std::uint64_t t, std::uint64_t c, std::uint64_t pad, std::uint32_t it,
               unsigned* out, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>((t + kBlock - 1) / kBlock);
  switch (p) {
    case Pattern::kContiguous: rmw_kernel<O, S, Pattern::kContiguous><<<blocks, kBlock, 0, s>>>(buf, t, c, pad, it, out); break;
    case Pattern::kCrossWarp: rmw_kernel<O, S, Pattern::kCrossWarp><<<blocks, kBlock, 0, s>>>(buf, t, c, pad, it, out); break;
    case Pattern::kBranched: rmw_kernel<O, S, Pattern::kBranched><<<blocks, kBlock, 0, s>>>(buf, t, c, pad, it, out); break;
    case Pattern::kRandom: rmw_kernel<O, S, Pattern::kRandom><<<blocks, kBlock, 0, s>>>(buf, t, c, pad, it, out); break;
  }
}

template <Op O>
void launch_o(Scope sc, Pattern p, unsigned* buf, std::uint64_t t, std::uint64_t c, std::uint64_t pad, std::uint32_t it,
              unsigned* out, cudaStream_t s) {
  switch (sc) {
    case Scope::kBlock: return launch_os<O, Scope::kBlock>(p, buf, t, c, pad, it, out, s);
    case Scope::kDevice: return launch_os<O, Scope::kDevice>(p, buf, t, c, pad, it, out, s);
    case Scope::kSystem: return launch_os<O, Scope::kSystem>(p, buf, t, c, pad, it, out, s);
  }
}

}  // namespace

void launch_rmw(Op o, Scope sc, Pattern p, unsigned* buf, std::uint64_t t, std::uint64_t c, std::uint64_t pad,
                std::uint32_t it, unsigned* out, cudaStream_t s) {
  switch (o) {
    case Op::kFetchAdd: launch_o<Op::kFetchAdd>(sc, p, buf, t, c, pad, it, out, s); break;
    case Op::kFetchAddUsed: launch_o<Op::kFetchAddUsed>(sc, p, buf, t, c, pad, it, out, s); break;
    case Op::kCas: launch_o<Op::kCas>(sc, p, buf, t, c, pad, it, out, s); break;
    case Op::kExch: launch_o<Op::kExch>(sc, p, buf, t, c, pad, it, out, s); break;
    case Op::kMin: launch_o<Op::kMin>(sc, p, buf, t, c, pad, it, out, s); break;
    case Op::kMax: launch_o<Op::kMax>(sc, p, buf, t, c, pad, it, out, s); break;
  }
  cuda_check(cudaGetLastError(), "Atomic-RMW kernel");
}

namespace {

__global__ void set_words_kernel(std::uint32_t* p, std::uint64_t words, std::uint32_t v) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < words; i += std::uint64_t{gridDim.x} * blockDim.x)
    p[i] = v;
}

class RmwCase final : public Case {
 public:
  /// `mem`: Mem::kDevice on `owner` (the row's GPU, or its peer), or Mem::kPinned (host-mapped).
  RmwCase(Op o, Scope sc, Pattern p, Mem mem, int gpu, int owner, std::uint64_t c, std::uint64_t pad)
      : o_(o), sc_(sc), p_(p), gpu_(gpu), c_(c), pad_(pad), words_(pattern_words(kThreads, c, pad)),
        buf_(mem, words_ * 4, owner), out_(Mem::kDevice, kThreads * 4, gpu) {
    if (owner != gpu) peer_access(gpu, owner, true);
    detail::DeviceGuard g(gpu);
    reset();
  }
  std::uint64_t bytes() const override { return kThreads * kIters * 4; }
  void enqueue(int, cudaStream_t s) override {
    launch_rmw(o_, sc_, p_, static_cast<unsigned*>(buf_.device()), kThreads, c_, pad_, kIters,
               static_cast<unsigned*>(out_.device()), s);
  }
  void verify() override {
    std::vector<std::uint32_t> h(words_);
    cuda_check(cudaMemcpy(h.data(), buf_.device(), words_ * 4, cudaMemcpyDefault), "cudaMemcpy(verify)");
    const long long bad = check_rmw(o_, p_, h.data(), kThreads, c_, pad_, kIters, rmw_init(o_));
    exact_ = bad < 0;
    // Block scope promises atomicity within a block only: a lost update across blocks is the
    // hardware's right, reported (counter exact = 0), not an error.
    if (!exact_ && sc_ != Scope::kBlock)
      throw Error(std::string("Atomic-RMW ") + op_name(o_) + " " + pattern_name(p_) + ": word " + std::to_string(bad) +
                  " differs from the host reference");
  }
  void counters(benchmark::State& st, double s) const override {
    st.counters["ops_per_us"] = static_cast<double>(kThreads * kIters) / (s * 1e6);
    st.counters["contention"] = static_cast<double>(c_);
    st.counters["padding"] = static_cast<double>(pad_);
    st.counters["exact"] = exact_ ? 1 : 0;
  }

 private:
  void reset() {
    set_words_kernel<<<264, 512>>>(static_cast<std::uint32_t*>(buf_.device()), words_, rmw_init(o_));
    cuda_check(cudaGetLastError(), "reset kernel");
    cuda_check(cudaDeviceSynchronize(), "reset kernel");
  }
  Op o_;
  Scope sc_;
  Pattern p_;
  int gpu_;
  std::uint64_t c_, pad_, words_;
  Buffer buf_, out_;
  bool exact_ = false;
};

/// The library's pattern: `posters` threads each reserve kSlots slots, one at a time, on one
/// shared queue counter (ib::wq_reserve<kShared>, the library's code: a ticket, one fetch_add,
/// then a check of the ring's room, which a ring of 2^32 - 1 slots always has) or each on its own
/// (kExclusive). A reservation may wait up to
/// kReserveBudgetNs, inside the timed region's own bound (kWaitSeconds), so a wedged counter is
/// reported by the kernel first; on the shared counter each poster's longest wait is kept.
constexpr std::uint32_t kSlots = 64;
constexpr int kPlainPosters = 1024;  ///< where the plain row measures
constexpr std::uint64_t kReserveBudgetNs = 10'000'000'000ull;
static_assert(kReserveBudgetNs < static_cast<std::uint64_t>(kWaitSeconds * 1e9));

struct ReserveTally {
  unsigned long long sum = 0;       ///< every reserved slot's start, added
  unsigned long long failed = 0;    ///< posters whose reservation ran out of budget
  unsigned long long worst_ns = 0;  ///< kShared: the longest any one reservation took
};

template <ib::Ownership O>
__global__ void reserve_kernel(ib::WqCounters* wq, std::uint32_t posters, ReserveTally* tally) {
  constexpr bool kShared = O == ib::Ownership::kShared;
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= posters) return;
  ib::WqCounters* q = kShared ? wq : wq + g;
  unsigned long long acc = 0, worst = 0;
  for (std::uint32_t i = 0; i < kSlots; ++i) {
    std::uint64_t start = 0;
    const std::uint64_t t0 = kShared ? sync::now_ns() : 0;
    if (ib::wq_reserve<O>(q, 0xffffffffu, 1, start, Budget{kReserveBudgetNs}, nullptr) != Status::kOk) {
      atomicAdd(&tally->failed, 1ull);
      return;
    }
    if constexpr (kShared) worst = max(worst, static_cast<unsigned long long>(sync::now_ns() - t0));
    acc += start;
  }
  atomicAdd(&tally->sum, acc);
  if constexpr (kShared) atomicMax(&tally->worst_ns, worst);
}

class ReserveCase final : public Case {
 public:
  ReserveCase(bool shared, int gpu, std::uint32_t posters)
      : shared_(shared), posters_(posters), q_(Mem::kDevice, sizeof(ib::WqCounters) * (shared ? 1 : posters), gpu),
        tally_(Mem::kDevice, sizeof(ReserveTally), gpu) {}
  std::uint64_t bytes() const override { return std::uint64_t{posters_} * kSlots; }
  void before() override {
    cuda_check(cudaMemset(q_.device(), 0, q_.bytes()), "cudaMemset(queue)");
    cuda_check(cudaMemset(tally_.device(), 0, tally_.bytes()), "cudaMemset(tally)");
  }
  void enqueue(int, cudaStream_t s) override {
    auto* q = static_cast<ib::WqCounters*>(q_.device());
    auto* t = static_cast<ReserveTally*>(tally_.device());
    const unsigned blocks = (posters_ + 127) / 128;
    if (shared_) reserve_kernel<ib::Ownership::kShared><<<blocks, 128, 0, s>>>(q, posters_, t);
    else reserve_kernel<ib::Ownership::kExclusive><<<blocks, 128, 0, s>>>(q, posters_, t);
    cuda_check(cudaGetLastError(), "reserve kernel");
  }
  void verify() override {
    const ReserveTally t = tally();
    if (t.failed != 0)
      throw Error("slot reservation timed out: " + std::to_string(t.failed) + " of " + std::to_string(posters_) +
                  " posters waited over " + std::to_string(kReserveBudgetNs / 1'000'000'000ull) + " s for one slot on " +
                  (shared_ ? "the shared counter" : "their own counters"));
    const unsigned long long total = std::uint64_t{posters_} * kSlots;
    // Shared: every slot 0..total-1 handed out once; exclusive: 0..kSlots-1 per poster.
    const unsigned long long want = shared_ ? total * (total - 1) / 2 : posters_ * (kSlots * (kSlots - 1ull) / 2);
    if (t.sum != want) throw Error("slot reservation handed out a slot twice or skipped one");
  }
  void counters(benchmark::State& st, double s) const override {
    st.counters["reservations_per_us"] = static_cast<double>(bytes()) / (s * 1e6);
    st.counters["posters"] = posters_;
    if (shared_) st.counters["max_wait_us"] = static_cast<double>(tally().worst_ns) / 1e3;  // the last round's
  }

 private:
  ReserveTally tally() const {
    ReserveTally t;
    cuda_check(cudaMemcpy(&t, tally_.device(), sizeof(t), cudaMemcpyDeviceToHost), "cudaMemcpy(tally)");
    return t;
  }
  bool shared_;
  std::uint32_t posters_;
  Buffer q_, tally_;
};

/// The four corners of the sweep: what the default run measures for every op, scope and memory
/// beyond fetch_add on device memory. (1, 1), where the plain row measures, comes last, so the
/// plain row reuses the method row's buffer (host-mapped rows: the same pages).
constexpr std::uint64_t kCorners[][2] = {{32, 1}, {1, 32}, {32, 32}, {1, 1}};

void add_rmw(const Plan& plan, const Where& w, Op o, Scope sc, Pattern p, Mem mem, const char* mem_label, bool full) {
  const std::string fam = std::string("AtomicRMW_") + op_name(o) + "_" + pattern_name(p) + "_" + scope_name(sc) + "_" + mem_label;
  auto make = [=](const Where& x, std::uint64_t c, std::uint64_t pad) {
    return std::make_unique<RmwCase>(o, sc, p, mem, x.gpu, x.peer >= 0 ? x.peer : x.gpu, c, pad);
  };
  const auto reg = [&](bool plain) {
    const std::string row = row_name((plain ? "Plain_" : "") + fam, w);
    auto* b = benchmark::RegisterBenchmark(row.c_str(), [=](benchmark::State& st) {
      const auto c = static_cast<std::uint64_t>(st.range(0)), pad = static_cast<std::uint64_t>(st.range(1));
      run_case(st, row_name(fam, w) + "/" + std::to_string(c) + "/" + std::to_string(pad), w,
               [&](const Where& x, std::uint64_t) { return make(x, c, pad); }, 0, plain, false, c == 1 && pad == 1);
    });
    b->UseManualTime()->Unit(benchmark::kMicrosecond)->ArgNames({"contention", "padding"});
    if (plain) {
      b->Iterations(1)->Args({1, 1});
      return;
    }
    if (!plan.min_time_given) b->MinTime(0.02);
    if (full) {
      for (int c = 1; c <= 1024; c *= 2)
        for (int pad = 1; pad <= 1024; pad *= 2)
          if (c > 1 || pad > 1) b->Args({c, pad});
      b->Args({1, 1});  // last, beside the plain row
    } else
      for (const auto& cp : kCorners) b->Args({static_cast<long>(cp[0]), static_cast<long>(cp[1])});
  };
  reg(false);
  reg(true);
}

}  // namespace

void register_atomics(const Plan& plan) {
  const auto pairs = peer_pairs(plan);
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    const Where w{plan.numa_of_gpu[i], plan.gpus[i]};
    for (int oi = 0; oi < kOps; ++oi)
      for (int si = 0; si < kScopes; ++si)
        for (int pi = 0; pi < kPatterns; ++pi) {
          const auto o = static_cast<Op>(oi);
          const auto sc = static_cast<Scope>(si);
          const auto p = static_cast<Pattern>(pi);
          const bool heatmap = plan.opt.atomic_full || (o == Op::kFetchAdd && sc == Scope::kDevice);
          add_rmw(plan, w, o, sc, p, Mem::kDevice, "GPU", heatmap);
          add_rmw(plan, w, o, sc, p, Mem::kPinned, "Pinned", plan.opt.atomic_full);
          for (const auto& [a, b] : pairs)
            if (a == w.gpu) add_rmw(plan, Where{w.numa, a, b}, o, sc, p, Mem::kDevice, "Peer", plan.opt.atomic_full);
        }
    for (const bool shared : {true, false})
      for (const bool plain : {false, true}) {
        const std::string fam = shared ? "AtomicRMW_SharedQueue_Shared" : "AtomicRMW_SharedQueue_Exclusive";
        const std::string row = row_name((plain ? "Plain_" : "") + fam, w);
        auto* b = benchmark::RegisterBenchmark(row.c_str(), [=](benchmark::State& st) {
          const auto n = static_cast<std::uint32_t>(st.range(0));
          run_case(st, row_name(fam, w) + "/" + std::to_string(n), w,
                   [=](const Where& x, std::uint64_t) { return std::make_unique<ReserveCase>(shared, x.gpu, n); }, 0, plain,
                   false, n == kPlainPosters);
        });
        b->UseManualTime()->Unit(benchmark::kMicrosecond)->ArgName("posters");
        if (plain) {
          b->Iterations(1)->Arg(kPlainPosters);
        } else {
          if (!plan.min_time_given) b->MinTime(0.02);
          for (const int n : {1, 32, 256, 8192, 32768, kPlainPosters}) b->Arg(n);  // the plain row's last: its Case
        }
      }
  }
}

}  // namespace gv::scope
