// The TCP rendezvous's wire format and the checks made of what arrives on it, as pure functions
// (bootstrap_tcp.cpp moves the bytes; these decide what they mean), so that they can be tested
// and fuzzed without sockets (tests/fuzz/fuzz_bootstrap_wire.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gv::detail::wire {

inline constexpr std::uint32_t kMagic = 0x67765731;  // "gvW1"

enum MsgType : std::uint32_t { kHello = 1, kWelcome, kGather, kResult, kFail };

/// Every message: this header, then `len` payload bytes.
struct Header {
  std::uint32_t type = 0;
  std::uint32_t rank = 0;
  std::uint64_t len = 0;
};

/// A joining rank's first payload.
struct Hello {
  std::uint32_t magic = kMagic;
  std::uint32_t size = 0;
};
static_assert(sizeof(Header) == 16 && sizeof(Hello) == 8);

/// The longest failure text a rank reads (a longer one is cut).
inline constexpr std::size_t kMaxFailText = 4096;

/// A connection's first header announces a hello (otherwise it is not one of ours: close it).
inline bool is_hello(const Header& h) { return h.type == kHello && h.len == sizeof(Hello); }

/// Rank 0 of a job of `size` ranks, on a well-formed hello from `h.rank` (`joined[r]`: rank r
/// has joined; rank 0's own entry is unused): "" to admit it, else why it is refused. A rank
/// outside 1..size-1 is compared unsigned, so no value of the field indexes `joined` outside it.
inline std::string refusal(const Header& h, const Hello& hello, int size, const std::vector<bool>& joined) {
  const std::string who = "rank " + std::to_string(h.rank);
  if (hello.size != static_cast<std::uint32_t>(size))
    return "World (tcp): " + who + " says GV_SIZE=" + std::to_string(hello.size) + ", rank 0 has GV_SIZE=" +
           std::to_string(size);
  if (h.rank == 0 || h.rank >= static_cast<std::uint32_t>(size) || h.rank >= joined.size() || joined[h.rank])
    return "World (tcp): " + who + " is out of range or joined twice (GV_SIZE=" + std::to_string(size) + ")";
  return {};
}

/// Rank 0, collecting `bytes` from each rank: the header of a rank's part.
inline bool gather_header_ok(const Header& h, std::size_t bytes) { return h.type == kGather && h.len == bytes; }

/// A rank, awaiting the whole of `size` parts of `bytes`: rank 0's reply header.
inline bool result_header_ok(const Header& h, int size, std::size_t bytes) {
  if (h.type != kResult || size <= 0) return false;
  const auto n = static_cast<std::uint64_t>(size);
  return bytes <= UINT64_MAX / n && h.len == n * bytes;
}

/// Bytes of a failure's text to read after its header.
inline std::size_t fail_text_bytes(const Header& h) {
  return static_cast<std::size_t>(h.len > kMaxFailText ? kMaxFailText : h.len);
}

}  // namespace gv::detail::wire
