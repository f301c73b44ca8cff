// What a benchmark's --json FILE holds: the metadata object naming the run (metadata.hpp:
// commit, device, date, command, and the host), then one object per row of the table, each on
// its own line. The file is appended to, so several runs can share it; the table is printed on
// stdout either way.
#pragma once
#include <cstdio>
#include <string>

namespace gv::bench {

/// "model name" of the host's CPUs and their count, e.g. "AMD EPYC 9654 (2 cores)".
std::string host_cpu();

class JsonLog {
 public:
  JsonLog() = default;
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;

  /// Rows go to `path` (appended), after the metadata object of this run.
  void open(const std::string& path, const std::string& device, int argc, char** argv);
  /// One JSON object (a complete "{...}") as a line; nothing without open().
  void row(const std::string& object);

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace gv::bench
