// libFuzzer: numbers from command lines and the environment. The input is split at NUL bytes
// into arguments: the benchmarks' ArgWalker/parse_uint (bench/common/args.hpp) must return a
// value in range that equals the decimal digits, or refuse with UsageError; the World's
// environment readers (env_int, bootstrap_timeout) must return a value in their documented
// range, or throw gv::Error naming the variable.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

#include "args.hpp"
#include "world/bootstrap.hpp"

namespace {

/// `s` as decimal digits only, if it is that and fits in 64 bits.
bool reference(const std::string& s, std::uint64_t& v) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  v = std::strtoull(s.c_str(), nullptr, 10);
  return errno == 0;
}

void check_uint(const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t want = 0;
  const bool valid = reference(text, want) && want >= lo && want <= hi;
  try {
    const std::uint64_t got = gv::bench::parse_uint("--n", text, lo, hi);
    if (!valid || got != want) std::abort();
  } catch (const gv::bench::UsageError& e) {
    if (valid || std::string(e.what()).find("--n '") != 0) std::abort();
  }
}

void check_env(const std::string& text) {
  if (text.find('\0') != std::string::npos) return;
  setenv("GV_FUZZ_INT", text.c_str(), 1);
  try {
    const int v = gv::detail::env_int("GV_FUZZ_INT");
    if (v < -1 || v > 1'000'000 || (v == -1 && !text.empty())) std::abort();
  } catch (const gv::Error& e) {
    if (std::string(e.what()).find("GV_FUZZ_INT") == std::string::npos) std::abort();
  }
  setenv("GV_BOOTSTRAP_TIMEOUT", text.c_str(), 1);
  try {
    const auto ms = gv::detail::bootstrap_timeout().count();
    if (ms < 0 || ms > 86'400'000) std::abort();
  } catch (const gv::Error& e) {
    if (std::string(e.what()).find("GV_BOOTSTRAP_TIMEOUT") == std::string::npos) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"prog"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  // A command line: "--n VALUE" pairs read as numbers in ranges picked by the values' lengths.
  gv::bench::ArgWalker walk(static_cast<int>(argv.size()), argv.data());
  try {
    while (walk.more()) {
      const std::string a = walk.next();
      const std::uint64_t hi = a.size() % 2 ? UINT64_MAX : (std::uint64_t{1} << (a.size() % 64));
      (void)walk.number("--n", a.size() % 3, hi);
    }
  } catch (const gv::bench::UsageError&) {
  } catch (const gv::bench::HelpRequested&) {
  }
  for (std::size_t i = 1; i < args.size(); ++i) {
    check_uint(args[i], 0, UINT64_MAX);
    check_uint(args[i], 1, 4096);
    check_env(args[i]);
  }
  return 0;
}
