// What a benchmark's --json FILE holds: one object naming the run (commit, device, date,
// command), then one object per row of the table, each on its own line. The file is appended
// to, so several runs can share it; the table is printed on stdout either way.
#pragma once
#include <cstdio>
#include <string>

namespace gv::bench {

/// The commit the binary was built from ("<hash>[-dirty]", or "unknown"); cmake/build_info.cmake.
const char* build_commit();

/// "model name" of the host's CPUs and their count, e.g. "AMD EPYC 9654 (2 cores)".
std::string host_cpu();

/// `s` as a JSON string literal, quotes included.
std::string json_string(const std::string& s);

/// argv[0..argc) as one shell-quoted command line.
std::string command_line(int argc, char** argv);

class JsonLog {
 public:
  JsonLog() = default;
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;

  /// Rows go to `path` (appended), after {"bench":"meta", commit, device, date, command}.
  void open(const std::string& path, const std::string& device, int argc, char** argv);
  bool on() const { return f_ != nullptr; }
  /// One JSON object (a complete "{...}") as a line; nothing without open().
  void row(const std::string& object);

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace gv::bench
