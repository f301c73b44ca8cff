// libFuzzer: the TCP rendezvous's messages as rank 0 and a joining rank read them
// (src/world/bootstrap_wire.hpp). The input is a job size and a stream of (header, hello) pairs
// arriving at rank 0; each is admitted or refused as accept_all() does, and an admitted rank's
// slot is taken (so a rank field that escaped the checks would index outside the table, which
// ASan reports). The same headers are then read as replies and failure texts.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "world/bootstrap_wire.hpp"

namespace w = gv::detail::wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int ranks = 1 + data[0] % 64;
  const std::size_t bytes = data[1];
  std::vector<bool> joined(static_cast<std::size_t>(ranks), false);
  std::vector<int> fds(static_cast<std::size_t>(ranks), -1);
  int admitted = 0;
  for (std::size_t at = 2; at + sizeof(w::Header) + sizeof(w::Hello) <= size; at += sizeof(w::Header) + sizeof(w::Hello)) {
    w::Header h;
    w::Hello hello;
    std::memcpy(&h, data + at, sizeof(h));
    std::memcpy(&hello, data + at + sizeof(h), sizeof(hello));
    if (w::is_hello(h) && hello.magic == w::kMagic) {
      const std::string why = w::refusal(h, hello, ranks, joined);
      if (why.empty()) {
        if (h.rank == 0 || h.rank >= static_cast<std::uint32_t>(ranks)) std::abort();  // admitted out of range
        joined[h.rank] = true;
        fds[h.rank] = static_cast<int>(at);
        ++admitted;
      } else if (why.find("World (tcp): rank ") != 0) {
        std::abort();
      }
    }
    // The same header as a collective's part, a reply, and a failure's text.
    (void)w::gather_header_ok(h, bytes);
    if (w::result_header_ok(h, ranks, bytes) && h.len != static_cast<std::uint64_t>(ranks) * bytes) std::abort();
    const std::string text(w::fail_text_bytes(h), '\0');
    if (text.size() > w::kMaxFailText) std::abort();
  }
  if (admitted > ranks - 1) std::abort();  // a rank admitted twice
  return 0;
}
