// One measurement of each experiment on a bed, checked, without printing: the loaded payloads,
// the run, the received bytes (and the poisoned byte after them), and the figures. A bed
// offers put / get / region (endpoint buffers), run(exp, roles, what) (throws unless every
// role succeeded) and results() (where the roles' samples are).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bed.hpp"
#include "experiments.hpp"
#include "stats.hpp"

namespace gv::bench {

/// ns[from, to) divided by `div`: microseconds (1000), or half round trips in microseconds (2000).
inline std::vector<double> microseconds(const std::uint64_t* ns, std::uint64_t from, std::uint64_t to, double div) {
  std::vector<double> v;
  for (std::uint64_t k = from; k < to; ++k) v.push_back(static_cast<double>(ns[k]) / div);
  return v;
}

/// A stream role's message groups, from its samples (see Stream).
inline std::vector<MsgGroup> groups_of(const std::uint64_t* t, std::uint64_t n) {
  std::vector<MsgGroup> g;
  for (std::uint64_t i = 0; i * kSignalEvery < n; ++i)
    g.push_back({std::min<std::uint64_t>(kSignalEvery, n - i * kSignalEvery), t[2 * i], t[2 * i + 1]});
  return g;
}

/// Ping-pong of `bytes` between endpoints 0 and 1: `warmup` exchanges, then `iters` timed ones;
/// half round trips in microseconds.
template <class Bed>
LatencyStats measure_pingpong(Bed& tb, std::uint64_t bytes, std::uint64_t iters, std::uint64_t warmup,
                              bool completion, const std::string& what) {
  const PingPong exp{static_cast<std::uint32_t>(bytes), warmup + iters, completion};
  load_payloads(tb, 2, exp.bytes);
  tb.run(exp, 2, what);
  for (const int e : {0, 1}) expect_payload(tb, e, 1 - e, exp.bytes, tag(exp.n - 1), what);
  return summarize(microseconds(tb.results().samples_of(0), warmup, exp.n, 2000.0));
}

/// Messages a bandwidth run of `bytes` sends for `iters` asked: a CPU engine moves a few GB/s,
/// so at most 512 MiB a size, but at least two windows.
inline std::uint64_t bw_messages(std::uint64_t iters, std::uint64_t bytes) {
  return std::min(iters, std::max<std::uint64_t>(2 * kWindow, (std::uint64_t{512} << 20) / bytes));
}

/// n WRITEs of `bytes` from endpoint 0 into endpoint 1, kWindow in flight: perftest's bandwidth.
template <class Bed>
BwStats measure_bw(Bed& tb, std::uint64_t bytes, std::uint64_t n, const std::string& what) {
  const Stream exp{static_cast<std::uint32_t>(bytes), n};
  load_payloads(tb, 2, exp.bytes);
  tb.run(exp, 1, what);
  expect_payload(tb, 1, 0, exp.bytes, pattern(seed_of(0, bytes), bytes - 1), what);
  return bandwidth(groups_of(tb.results().samples_of(0), n), bytes, kWindow);
}

/// n WRITEs of `bytes` on each of `qps` QPs at once: the rate from the first
/// post to the last completion, in Mmsg/s (the roles share a clock: one GPU's %globaltimer, or the host's).
template <class Bed>
double measure_msgrate(Bed& tb, std::uint32_t bytes, int qps, std::uint64_t n, const std::string& what) {
  const Stream exp{bytes, n};
  load_payloads(tb, 2 * qps, bytes);
  tb.run(exp, qps, what);
  std::uint64_t first = ~std::uint64_t{0}, last = 0;
  for (int r = 0; r < qps; ++r) {
    expect_payload(tb, 2 * r + 1, 2 * r, bytes, pattern(seed_of(2 * r, bytes), bytes - 1), what);
    const auto g = groups_of(tb.results().samples_of(r), exp.n);
    first = std::min(first, g.front().post_ns);
    last = std::max(last, g.back().done_ns);
  }
  const double total = static_cast<double>(exp.n) * qps;
  return last > first ? total / static_cast<double>(last - first) * 1e3 : 0.0;
}

}  // namespace gv::bench
