#include "family.hpp"

#include <algorithm>
#include <exception>

#include "../common/stats.hpp"  // the benchmarks' one statistics helper
#include "host_env.hpp"

namespace gv::scope {
namespace {

/// Enqueues per timed region: enough that one region moves at least 4 MiB, at most `most`.
int reps_for(std::uint64_t bytes, int most) {
  return static_cast<int>(std::clamp<std::uint64_t>((std::uint64_t{4} << 20) / std::max<std::uint64_t>(bytes, 1), 1,
                                                     static_cast<std::uint64_t>(most)));
}

void set_where(benchmark::State& st, const Where& w, std::uint64_t bytes) {
  st.counters["bytes"] = static_cast<double>(bytes);
  st.counters["cuda_id"] = w.gpu;
  st.counters["numa_id"] = w.numa;
  if (w.peer >= 0) st.counters["peer_id"] = w.peer;
}

/// The Case of the row being measured, kept while Google Benchmark runs the same row again to
/// settle its iteration count, so large buffers are set up and verified once per row.
struct Cached {
  std::string key;
  std::unique_ptr<Case> c;
  std::unique_ptr<Timer> t;
};
Cached& cached() {
  static Cached k;
  return k;
}

/// The row's Case and Timer, made (and verified after one untimed run) on first use.
Cached& prepare(const std::string& key, const Where& w, const MakeCase& make, std::uint64_t size) {
  Cached& k = cached();
  if (k.key == key && k.c) return k;
  k.t.reset();
  k.c.reset();
  k.key.clear();
  k.c = make(w, size);
  k.t = std::make_unique<Timer>(w.gpu, k.c->streams());
  k.c->before();
  (void)k.t->plain([&](int i) { k.c->enqueue(i, k.t->stream(i)); });
  k.c->verify();
  k.key = key;
  return k;
}

/// The method: every round held until enqueued (where the transfer allows), reps enqueues per
/// round. Beside its plain row, more rounds after Google Benchmark's for the median (rounds.hpp).
void run_method(benchmark::State& st, const std::string& key, const Where& w, const MakeCase& make, std::uint64_t size,
                bool repeat, bool beside_plain) {
  try {
    NumaScope pin(w.numa);
    Cached& k = prepare(key, w, make, size);
    Case& c = *k.c;
    Timer& t = *k.t;
    const int reps = repeat ? reps_for(c.bytes(), c.max_reps()) : 1;
    const auto round = [&](int i) {
      for (int r = 0; r < reps; ++r) c.enqueue(i, t.stream(i));
    };
    const auto seconds = [&] {
      c.before();
      return (c.holdable() ? t.held(round) : t.plain(round)) / 1e3;
    };
    std::vector<double> rounds;
    for (auto _ : st) {
      rounds.push_back(seconds());
      st.SetIterationTime(rounds.back());
    }
    for (std::size_t n = median_rounds(rounds.size(), beside_plain); rounds.size() < n;) rounds.push_back(seconds());
    set_where(st, w, size);
    st.counters["reps"] = reps;
    st.counters["held"] = c.holdable() ? 1 : 0;
    st.counters["rounds"] = static_cast<double>(rounds.size());
    // Google Benchmark's time is the mean of its rounds; the median round (what the plain row
    // reports) is kept beside it, and the family's own counters (latency, ops/µs) come from it.
    const double med = bench::summarize(rounds).typical;
    st.counters["round_median_us"] = med * 1e6;
    st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * static_cast<std::uint64_t>(reps) * c.bytes()));
    if (med > 0) c.counters(st, med / reps);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

/// The plain measurement: one enqueue with events right around it, median of kPlainRuns,
/// taken outside Google Benchmark's loop (which runs once to report it).
void run_plain(benchmark::State& st, const std::string& key, const Where& w, const MakeCase& make, std::uint64_t size) {
  try {
    NumaScope pin(w.numa);
    Cached& k = prepare(key, w, make, size);
    Case& c = *k.c;
    Timer& t = *k.t;
    const auto once = [&](int i) { c.enqueue(i, t.stream(i)); };
    std::vector<double> ms;
    for (int r = 0; r < kPlainRuns; ++r) {
      c.before();
      ms.push_back(t.plain(once));
    }
    const double med = bench::summarize(ms).typical / 1e3;
    for (auto _ : st) st.SetIterationTime(med);
    set_where(st, w, size);
    st.counters["reps"] = 1;
    st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * c.bytes()));
    c.counters(st, med);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

}  // namespace

void run_case(benchmark::State& st, const std::string& row, const Where& w, const MakeCase& make, std::uint64_t size,
              bool plain, bool repeat, bool beside_plain) {
  const std::string key = row + "@" + std::to_string(size);
  if (plain) run_plain(st, key, w, make, size);
  else run_method(st, key, w, make, size, repeat, beside_plain);
}

void release_cached() {
  cached().t.reset();
  cached().c.reset();
  cached().key.clear();
}

namespace {

/// Manual time in µs; method rows run at least 50 ms unless --benchmark_min_time says otherwise
/// (Google Benchmark's 0.5 s default would make the default run long). Plain rows run once.
benchmark::internal::Benchmark* common(const Plan& plan, benchmark::internal::Benchmark* b, bool plain = false) {
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
  if (plain) b->Iterations(1);
  else if (!plan.min_time_given) b->MinTime(0.05);
  return b;
}

}  // namespace

std::string row_name(const std::string& family, const Where& w) {
  return "Comm_" + family + "/" + std::to_string(w.peer >= 0 ? w.gpu : w.numa) + "/" +
         std::to_string(w.peer >= 0 ? w.peer : w.gpu);
}

void add_sized(const Plan& plan, const std::string& family, const Where& w, const MakeCase& make, int lo, int hi,
               bool costly_before) {
  lo = std::max(lo, plan.opt.log2_lo);
  hi = std::min(hi, plan.opt.log2_hi);
  if (lo > hi) return;
  const std::string name = row_name(family, w), pname = row_name("Plain_" + family, w);
  const auto method = [=](benchmark::State& st) {
    run_case(st, name, w, make, std::uint64_t{1} << st.range(0), false, true, st.range(0) == hi);
  };
  std::vector<int> sizes;
  for (int k = lo; k <= hi; k += plan.opt.log2_step) sizes.push_back(k);
  if (sizes.back() != hi) sizes.push_back(hi);  // the plateau size is always measured
  if (costly_before) {
    // Google Benchmark sizes its round count by the timed transfer alone; a 256 MiB flush costs
    // over 100 times the copy. A fixed count per size instead: 64 MiB worth, 5..100 rounds.
    for (const int k : sizes)
      benchmark::RegisterBenchmark(name.c_str(), method)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->ArgName("log2(N)")
          ->Arg(k)
          ->Iterations(std::clamp((std::int64_t{64} << 20) >> k, std::int64_t{5}, std::int64_t{100}));
  } else {
    auto* b = common(plan, benchmark::RegisterBenchmark(name.c_str(), method))->ArgName("log2(N)");
    for (const int k : sizes) b->Arg(k);
  }
  auto* p = benchmark::RegisterBenchmark(pname.c_str(), [=](benchmark::State& st) {
    run_case(st, name, w, make, std::uint64_t{1} << st.range(0), true, false);  // the method row's Case
  });
  common(plan, p, true)->ArgName("log2(N)")->Arg(hi);
}

void add_single(const Plan& plan, const std::string& name, const Where& w, const MakeCase& make, bool plain) {
  const std::string row = row_name(name, w), prow = row_name("Plain_" + name, w);
  common(plan, benchmark::RegisterBenchmark(row.c_str(), [=](benchmark::State& st) {
    run_case(st, row, w, make, 0, false, false, plain);
  }));
  if (plain)
    common(plan, benchmark::RegisterBenchmark(prow.c_str(), [=](benchmark::State& st) {
      run_case(st, row, w, make, 0, true, false);
    }), true);
}

void add_host_timed(const Plan& plan, const std::string& name, const std::function<void(benchmark::State&)>& body) {
  common(plan, benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
    try {
      body(st);
    } catch (const std::exception& e) {
      st.SkipWithError(e.what());
    }
  }));
}

void peer_access(int from, int to, bool on) {
  detail::DeviceGuard g(from);
  const cudaError_t e = on ? cudaDeviceEnablePeerAccess(to, 0) : cudaDeviceDisablePeerAccess(to);
  (void)cudaGetLastError();
  if (e != cudaErrorPeerAccessAlreadyEnabled && e != cudaErrorPeerAccessNotEnabled) cuda_check(e, "peer access");
}

std::vector<std::pair<int, int>> peer_pairs(const Plan& plan) {
  std::vector<std::pair<int, int>> v;
  for (const int a : plan.gpus)
    for (const int b : plan.gpus) {
      int ok = 0;
      if (a != b && cudaDeviceCanAccessPeer(&ok, a, b) == cudaSuccess && ok) v.emplace_back(a, b);
    }
  return v;
}

}  // namespace gv::scope
