// Latency statistics and perftest-style reporting shared by the benchmarks.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gv::bench {

/// perftest's latency columns, in microseconds.
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

inline void print_latency_header(std::FILE* f) {
  std::fprintf(f, " %-10s %-12s %-10s %-10s %-12s %-10s %-10s %-10s %-10s\n", "#bytes", "#iterations",
               "t_min[us]", "t_max[us]", "t_typical[us]", "t_avg[us]", "t_stdev[us]", "99%[us]",
               "99.9%[us]");
}

inline void print_latency_row(std::FILE* f, std::uint64_t bytes, std::uint64_t iters,
                              const LatencyStats& s) {
  std::fprintf(f, " %-10llu %-12llu %-10.2f %-10.2f %-12.2f %-10.2f %-10.2f %-10.2f %-10.2f\n",
               static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(iters), s.min,
               s.max, s.typical, s.avg, s.stdev, s.p99, s.p999);
}

/// One JSON object per row; `extra` holds further "key":value pairs (already formatted).
inline std::string latency_json(const std::string& bench, const std::string& extra,
                                std::uint64_t bytes, std::uint64_t iters, const LatencyStats& s) {
  char b[512];
  std::snprintf(b, sizeof(b),
                "{\"bench\":\"%s\",%s\"bytes\":%llu,\"iterations\":%llu,\"t_min\":%.3f,\"t_max\":%.3f,"
                "\"t_typical\":%.3f,\"t_avg\":%.3f,\"t_stdev\":%.3f,\"p99\":%.3f,\"p999\":%.3f}",
                bench.c_str(), extra.c_str(), static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(iters), s.min, s.max, s.typical, s.avg, s.stdev,
                s.p99, s.p999);
  return b;
}

/// Sizes 2^lo .. 2^hi bytes.
inline std::vector<std::uint64_t> pow2_sizes(unsigned lo, unsigned hi) {
  std::vector<std::uint64_t> v;
  for (unsigned i = lo; i <= hi; ++i) v.push_back(std::uint64_t{1} << i);
  return v;
}

}  // namespace gv::bench
