// gv_gpu_verbs drain: gpu-qgpu only: the GPU engine's time per WQE apart from its posters. With
// the engine stopped, 1 or 16 QPs get up to 128 inline WRITEs each; the engine resumes under
// blocks that wait for the CQEs, and a QP's first-to-last CQE time gives it. --hold-ms MS runs
// the engine MS ms alone instead (for ncu; no timing).
#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

#include "../common/measure.hpp"
#include "harness.hpp"

namespace gv::bench {
namespace {

/// drain's two steps work on Stream's endpoints and plan.
struct OnStream {
  Stream stream;
  GV_HD int endpoint(int role) const { return stream.endpoint(role); }
  GV_HD WrPlan plan(const Endpoint& ep) const { return stream.plan(ep); }
};

/// drain, step 1: role r posts n WRITEs on a QP whose executor is stopped.
struct Prepost : OnStream {
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t*) const {
    Status st = tx.start();
    for (std::uint64_t k = 0; k < stream.n && st == Status::kOk; ++k) st = tx.post(k);
    return st;
  }
};

/// drain, step 2: role r takes the CQEs of the n pre-posted WRITEs; t[0] is when the first
/// was seen, t[1] the last.
struct DrainWait : OnStream {
  template <class Tx>
  GV_HD Status run(Tx& tx, const Endpoint&, int, std::uint64_t* t) const {
    Status st = tx.wait_sent(1);  // the first CQE
    t[0] = gv::sync::now_ns();
    if (st == Status::kOk) st = tx.wait_sent(stream.n);
    t[1] = gv::sync::now_ns();
    return st;
  }
};

}  // namespace

/// The GPU engine's execution rate apart from its posters: with the engine stopped, each QP's
/// block posts n inline WRITEs (one CQE per 16); then blocks that wait for those CQEs are
/// started, the engine resumes, and the time from each QP's first CQE to its last gives the
/// engine's time per WQE with a full backlog. With hold_ms, the engine instead runs hold_ms
/// alone and the CQEs are checked after it stopped again (for ncu, which serialises kernels:
/// profile the engine's second launch).
void bench_drain(const Options& o, Harness& h) {
  // The SQ holds 128 WQEs of two WQEBBs; two CQEs at least.
  const std::uint64_t n = std::clamp<std::uint64_t>(o.iters, 2 * kSignalEvery, 128);
  Shape shape;
  shape.pairs = kMaxRoles / 2;
  Testbed tb(Mode::kGpuQGpu, o.gpus, shape, h);
  std::printf("# drain, gpu-qgpu: %llu inline WRITEs pre-posted per QP with the engine stopped, one CQE per %u; "
              "ns per WQE from a QP's first CQE to its last; %s\n",
              static_cast<unsigned long long>(n), kSignalEvery, where(tb).c_str());
  for (const std::uint32_t bytes : {8u, 64u}) {
    for (const int qps : {1, 16}) {
      const Stream stream{bytes, n};
      const std::string what = "drain " + std::to_string(qps) + " QPs " + std::to_string(bytes) + " B";
      load_payloads(tb, 2 * qps, bytes);
      tb.quiesce();
      tb.run(Prepost{{stream}}, qps, what + " (posting)");
      if (o.hold_ms > 0) {
        tb.resume();
        std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));
        tb.quiesce();
        tb.run(DrainWait{{stream}}, qps, what);
        tb.resume();
      } else {
        std::exception_ptr failed;
        std::thread waiter([&] {
          try {
            tb.run(DrainWait{{stream}}, qps, what);
          } catch (...) {
            failed = std::current_exception();
          }
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the waiting blocks are polling
        std::exception_ptr resume_failed;  // the waiter is joined either way (its waits are bounded)
        try {
          tb.resume();
        } catch (...) {
          resume_failed = std::current_exception();
        }
        waiter.join();
        if (resume_failed) std::rethrow_exception(resume_failed);
        if (failed) std::rethrow_exception(failed);
      }
      std::vector<double> per_wqe;
      std::uint64_t first = ~std::uint64_t{0}, last = 0;
      for (int r = 0; r < qps; ++r) {
        expect_payload(tb, 2 * r + 1, 2 * r, bytes, pattern(seed_of(2 * r, bytes), bytes - 1), what);
        const std::uint64_t* t = h.samples_of(r);
        per_wqe.push_back(static_cast<double>(t[1] - t[0]) / static_cast<double>(n - kSignalEvery));
        first = std::min(first, t[0]);
        last = std::max(last, t[1]);
      }
      std::sort(per_wqe.begin(), per_wqe.end());
      const double ns = per_wqe[per_wqe.size() / 2];
      const double rate = static_cast<double>(qps) * static_cast<double>(n - kSignalEvery) /
                          static_cast<double>(last - first) * 1e3;
      if (o.hold_ms > 0) {
        std::printf(" %s: all CQEs arrived (held %d ms; no timing)\n", what.c_str(), o.hold_ms);
      } else {
        std::printf(" %-3d QPs %-3u B: %.1f ns per WQE (median over QPs), %.4f Mmsg/s together\n", qps, bytes, ns, rate);
        char b[256];
        std::snprintf(b, sizeof(b), "\"bytes\":%u,\"wqes_per_qp\":%llu,\"qps\":%d,\"ns_per_wqe_median\":%.1f,\"mmsg_per_s\":%.4f}",
                      bytes, static_cast<unsigned long long>(n), qps, ns, rate);
        g_json.row("{\"bench\":\"drain\"," + json_keys(Mode::kGpuQGpu, "inline", tb.gpus()) + b);
      }
    }
  }
}

}  // namespace gv::bench
