// Command lines of the benchmarks: whole-number parsing with range checks, -h/--help, and the
// exit codes every binary shares (0 after --help, 2 for a bad command line, 1 for a failed run).
//
//   int main(int argc, char** argv) {
//     return gv::bench::run_main("gv_x", kUsage, [&] { return run(parse(argc, argv)); });
//   }
#pragma once
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gv::bench {

/// A command line the program cannot run: printed with the usage, exit status 2.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// -h or --help: the usage goes to stdout, exit status 0.
struct HelpRequested {};

inline bool is_help(std::string_view a) { return a == "-h" || a == "--help"; }

/// `text`, the value of `flag`, as a whole number in [lo, hi]: decimal digits only, all of
/// them (no sign, no exponent, no suffix: "1e3", "-1", "8k" and "" are refused, not read as
/// 1, a huge count or 8).
inline std::uint64_t parse_uint(std::string_view flag, std::string_view text, std::uint64_t lo, std::uint64_t hi) {
  const auto refuse = [&](const char* why) {
    throw UsageError(std::string(flag) + " '" + std::string(text) + "' " + why + ": give a whole number " +
                     std::to_string(lo) + " .. " + std::to_string(hi));
  };
  if (text.empty()) refuse("is empty");
  std::uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') refuse("is not a whole number");
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) refuse("is out of range");
    v = v * 10 + d;
  }
  if (v < lo || v > hi) refuse("is out of range");
  return v;
}

/// Walks argv[first..argc): the current argument and, for options that take one, its value.
class ArgWalker {
 public:
  ArgWalker(int argc, char** argv, int first = 1) : argc_(argc), argv_(argv), i_(first) {}
  bool more() const { return i_ < argc_; }
  /// The next argument; -h/--help anywhere ends parsing with HelpRequested.
  std::string next() {
    const std::string a = argv_[i_++];
    if (is_help(a)) throw HelpRequested{};
    return a;
  }
  /// The value of option `flag`, which must follow it.
  std::string value(std::string_view flag) {
    if (i_ >= argc_) throw UsageError(std::string(flag) + " needs a value");
    return argv_[i_++];
  }
  std::uint64_t number(std::string_view flag, std::uint64_t lo, std::uint64_t hi) {
    return parse_uint(flag, value(flag), lo, hi);
  }

 private:
  int argc_;
  char** argv_;
  int i_;
};

/// Runs `body` (which parses the command line and runs), mapping the outcomes to exit codes:
/// HelpRequested -> usage on stdout, 0; UsageError -> the reason and the usage on stderr, 2;
/// any other exception -> "<prog>: <what>" on stderr, 1.
template <class Body>
int run_main(const char* prog, const char* usage, Body&& body) {
  try {
    return body();
  } catch (const HelpRequested&) {
    std::fputs(usage, stdout);
    return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", prog, e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 1;
  }
}

}  // namespace gv::bench
