// Latency and bandwidth statistics, and perftest-style reporting, shared by the benchmarks.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gv::bench {

/// perftest's latency columns, in microseconds (or whatever unit the samples have). Every
/// benchmark's statistics come from summarize(), so a column name means one thing everywhere:
///   typical  the median: sorted[n / 2] (perftest's t_typical)
///   avg      the mean; stdev the population standard deviation
///   p99      the 99th percentile by nearest rank: sorted[ceil(0.99 n) - 1], the smallest sample
///            with at least 99 % of the samples at or below it (p999 likewise at 0.999); with
///            fewer than 100 samples that is the maximum
struct LatencyStats {
  double min = 0, max = 0, typical = 0, avg = 0, stdev = 0, p99 = 0, p999 = 0;
};

inline LatencyStats summarize(std::vector<double> us) {
  LatencyStats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  const auto at = [&](double q) {
    const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(us.size()))) - 1;
    return us[std::min(i, us.size() - 1)];
  };
  s.min = us.front();
  s.max = us.back();
  s.typical = us[us.size() / 2];
  double sum = 0;
  for (double v : us) sum += v;
  s.avg = sum / static_cast<double>(us.size());
  double var = 0;
  for (double v : us) var += (v - s.avg) * (v - s.avg);
  s.stdev = std::sqrt(var / static_cast<double>(us.size()));
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  return s;
}

// Text rows: `lead` holds columns printed before perftest's (already padded, e.g. a mode and a
// variant), the same width in the header and the rows.

inline void print_latency_header(std::FILE* f, const std::string& lead = "") {
  std::fprintf(f, "%s %-10s %-12s %-13s %-13s %-17s %-13s %-15s %-23s %s\n", lead.c_str(), "#bytes",
               "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]",
               "t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]");
}

inline void print_latency_row(std::FILE* f, std::uint64_t bytes, std::uint64_t iters,
                              const LatencyStats& s, const std::string& lead = "") {
  std::fprintf(f, "%s %-10llu %-12llu %-13.2f %-13.2f %-17.2f %-13.2f %-15.2f %-23.2f %.2f\n",
               lead.c_str(), static_cast<unsigned long long>(bytes),
               static_cast<unsigned long long>(iters), s.min, s.max, s.typical, s.avg, s.stdev,
               s.p99, s.p999);
}

/// One JSON object per row; `extra` holds further "key":value pairs (already formatted, each
/// followed by a comma).
inline std::string latency_json(const std::string& bench, const std::string& extra,
                                std::uint64_t bytes, std::uint64_t iters, const LatencyStats& s) {
  char b[512];
  std::snprintf(b, sizeof(b),
                "\"bytes\":%llu,\"iters\":%llu,\"t_min\":%.3f,\"t_max\":%.3f,\"t_typical\":%.3f,"
                "\"t_avg\":%.3f,\"t_stdev\":%.3f,\"p99\":%.3f,\"p999\":%.3f}",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(iters),
                s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999);
  return "{\"bench\":\"" + bench + "\"," + extra + b;
}

/// A bandwidth / message-rate row of the rma benchmarks (gv_rma, shmem_perf): GB/s (10^9 B/s)
/// and millions of messages per second; `extra` as for latency_json.
inline std::string rate_json(const std::string& bench, const std::string& extra, std::uint64_t bytes,
                             std::uint64_t iters, double gbs, double mmsgs) {
  char b[160];
  std::snprintf(b, sizeof(b), "\"bytes\":%llu,\"iters\":%llu,\"bw_gbs\":%.3f,\"mmsgs\":%.3f}",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(iters), gbs, mmsgs);
  return "{\"bench\":\"" + bench + "\"," + extra + b;
}

/// perftest's bandwidth columns; GB/s are 10^9 bytes per second.
struct BwStats {
  double peak = 0, avg = 0, mpps = 0;
};

/// Messages sent in groups, each closed by one signaled work request: the group's first
/// message was posted at post_ns, its completion seen at done_ns.
struct MsgGroup {
  std::uint64_t msgs = 0, post_ns = 0, done_ns = 0;
};

/// Average over the whole run. Peak as perftest defines it, the best rate over any run of
/// consecutive messages from the first one's post to the last one's completion, taken over
/// runs of at least `min_msgs` messages so that the clock's granularity cannot inflate it.
inline BwStats bandwidth(const std::vector<MsgGroup>& g, std::uint64_t bytes, std::uint64_t min_msgs) {
  BwStats s;
  if (g.empty()) return s;
  std::uint64_t total = 0;
  for (const MsgGroup& x : g) total += x.msgs;
  const auto rate = [&](std::uint64_t msgs, std::uint64_t ns) { return ns == 0 ? 0.0 : static_cast<double>(msgs) / static_cast<double>(ns); };
  const double per_ns = rate(total, g.back().done_ns - g.front().post_ns);
  s.avg = per_ns * static_cast<double>(bytes);
  s.mpps = per_ns * 1e3;
  double best = per_ns;
  for (std::size_t i = 0; i < g.size(); ++i) {
    std::uint64_t msgs = 0;
    for (std::size_t j = i; j < g.size(); ++j) {
      msgs += g[j].msgs;
      if (msgs >= min_msgs) best = std::max(best, rate(msgs, g[j].done_ns - g[i].post_ns));
    }
  }
  s.peak = best * static_cast<double>(bytes);
  return s;
}

inline void print_bw_header(std::FILE* f, const std::string& lead = "") {
  std::fprintf(f, "%s %-10s %-12s %-16s %-19s %s\n", lead.c_str(), "#bytes", "#iterations",
               "BW peak[GB/s]", "BW average[GB/s]", "MsgRate[Mpps]");
}

inline void print_bw_row(std::FILE* f, std::uint64_t bytes, std::uint64_t iters, const BwStats& s,
                         const std::string& lead = "") {
  std::fprintf(f, "%s %-10llu %-12llu %-16.3f %-19.3f %.6f\n", lead.c_str(),
               static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(iters),
               s.peak, s.avg, s.mpps);
}

inline std::string bw_json(const std::string& bench, const std::string& extra, std::uint64_t bytes,
                           std::uint64_t iters, const BwStats& s) {
  char b[256];
  std::snprintf(b, sizeof(b), "\"bytes\":%llu,\"iters\":%llu,\"bw_peak_gbs\":%.4f,\"bw_avg_gbs\":%.4f,\"mpps\":%.6f}",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(iters), s.peak,
                s.avg, s.mpps);
  return "{\"bench\":\"" + bench + "\"," + extra + b;
}

/// A message-rate row: `qps` QPs sent `messages` of `bytes` together (`iters` each) at `mmsg_per_s`.
inline std::string msgrate_json(const std::string& extra, std::uint32_t bytes, std::uint64_t iters, int qps,
                                double messages, double mmsg_per_s) {
  char b[256];
  std::snprintf(b, sizeof(b), "\"bytes\":%u,\"iters\":%llu,\"qps\":%d,\"messages\":%.0f,\"mmsg_per_s\":%.4f}", bytes,
                static_cast<unsigned long long>(iters), qps, messages, mmsg_per_s);
  return "{\"bench\":\"msgrate\"," + extra + b;
}

/// Sizes 2^lo .. 2^hi bytes.
inline std::vector<std::uint64_t> pow2_sizes(unsigned lo, unsigned hi) {
  std::vector<std::uint64_t> v;
  for (unsigned i = lo; i <= hi; ++i) v.push_back(std::uint64_t{1} << i);
  return v;
}

}  // namespace gv::bench
