// Numbers from the environment and the command line, read one way by the library and its tools
// (gvrun): whole numbers in a range, sizes with a K/M/G suffix, seconds. Each says why it refused
// ("is not a whole number", "is out of range 1 .. 4096"), so the caller's message can name the
// variable or flag and what it takes. The benchmarks' command lines use bench/common/args.hpp.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace gv::detail {

/// `text` as a whole decimal number in [lo, hi]: digits only, all of them (no sign, exponent or
/// suffix). False with `why` set otherwise, overflow included.
inline bool parse_uint(std::string_view text, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out, std::string& why) {
  const std::string range = std::to_string(lo) + " .. " + std::to_string(hi);
  if (text.empty()) {
    why = "is empty: give a whole number " + range;
    return false;
  }
  std::uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      why = "is not a whole number " + range;
      return false;
    }
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) {
      why = "is out of range " + range;
      return false;
    }
    v = v * 10 + d;
  }
  if (v < lo || v > hi) {
    why = "is out of range " + range;
    return false;
  }
  out = v;
  return true;
}

/// `text` as bytes: a whole number with an optional K, M or G (binary) suffix, optionally
/// followed by B; in [1, hi].
inline bool parse_bytes(std::string_view text, std::uint64_t hi, std::uint64_t& out, std::string& why) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view suffix = text.substr(digits);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b') && suffix.size() == 2) suffix.remove_suffix(1);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) {
    why = "is not a size (bytes, or a number with K, M or G)";
    return false;
  }
  std::uint64_t v = 0;
  if (!parse_uint(text.substr(0, digits), 1, hi >> shift, v, why)) {
    why = "is not a size in 1 .. " + std::to_string(hi) + " bytes (bytes, or a number with K, M or G)";
    return false;
  }
  out = v << shift;
  return true;
}

/// `text` as seconds (a decimal number, fractions allowed) in (0, hi]. Zero is refused: as a
/// time limit it would end every wait at once.
inline bool parse_seconds(const std::string& text, double hi, double& out, std::string& why) {
  char* end = nullptr;
  const double s = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(s)) {
    why = "is not a number of seconds";
    return false;
  }
  if (!(s > 0) || s > hi) {
    why = "is out of range: give seconds above 0 (0 would end every wait at once) and at most " +
          std::to_string(static_cast<long long>(hi));
    return false;
  }
  out = s;
  return true;
}

}  // namespace gv::detail
