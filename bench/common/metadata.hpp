// The metadata object every benchmark prints with --json: what ran, where and when.
#pragma once
#include <ctime>
#include <string>

#if __has_include("gv_git_commit.h")
#include "gv_git_commit.h"  // generated at build time (cmake/git_commit.cmake)
#endif
#ifndef GV_GIT_COMMIT
#define GV_GIT_COMMIT "unknown"
#endif

namespace gv::bench {

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

inline std::string command_line(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  return cmd;
}

inline std::string utc_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

/// {"bench":"metadata","commit":...,"device":...,"date":...,"command":...} plus `extra`
/// ("key":value pairs, each followed by a comma, or empty).
inline std::string metadata_json(const std::string& device, const std::string& command, const std::string& extra = "") {
  return "{\"bench\":\"metadata\"," + extra + "\"commit\":\"" + GV_GIT_COMMIT + "\",\"device\":\"" + json_escape(device) +
         "\",\"date\":\"" + utc_now() + "\",\"command\":\"" + json_escape(command) + "\"}";
}

}  // namespace gv::bench
