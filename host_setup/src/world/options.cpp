#include "options.hpp"

#include <cstdlib>
#include <string>

#include <gpuverbs/ib/ring.hpp>

#include "../parse.hpp"
#include "bootstrap.hpp"

namespace gv::detail {
namespace {

using rma::Transport;

std::size_t env_bytes(const char* name, const char* v) {
  std::uint64_t x = 0;
  std::string why;
  if (!parse_bytes(v, std::uint64_t{1} << 44, x, why)) throw Error(std::string("World: ") + name + "='" + v + "' " + why);
  return static_cast<std::size_t>(x);
}

WorldOptions from_env(WorldOptions o) {
  if (const char* v = std::getenv("GV_HEAP_BYTES"); v && *v) o.heap_bytes = env_bytes("GV_HEAP_BYTES", v);
  else if (const char* n = std::getenv("NVSHMEM_SYMMETRIC_SIZE"); n && *n)
    o.heap_bytes = env_bytes("NVSHMEM_SYMMETRIC_SIZE", n);
  if (const char* w = std::getenv("GV_WAIT_TIMEOUT"); w && *w) {
    double sec = 0;
    std::string why;
    if (!parse_seconds(w, 1e6, sec, why)) throw Error(std::string("World: GV_WAIT_TIMEOUT='") + w + "' " + why);
    o.budget = Budget{static_cast<std::uint64_t>(sec * 1e9)};
  }
  if (const int l = env_int("GV_IB_LANES"); l >= 0) {
    if (l == 0 || l > 32 || !ib::is_pow2(static_cast<std::uint32_t>(l)))
      throw Error("World: GV_IB_LANES='" + std::to_string(l) + "' is not a power of two in 1..32 (queue pairs per ib peer)");
    o.ib_lanes = static_cast<std::uint32_t>(l);
  }
  if (const char* e = std::getenv("GV_IB_ENGINE"); e && *e) {
    const std::string s = e;
    if (s == "cpu") o.ib_engine = WorldOptions::Engine::kCpu;
    else if (s == "gpu") o.ib_engine = WorldOptions::Engine::kGpu;
    else if (s == "auto") o.ib_engine = WorldOptions::Engine::kAuto;
    else throw Error("World: GV_IB_ENGINE='" + s + "': use cpu, gpu or auto");
  }
  if (const char* t = std::getenv("GV_TRANSPORT"); t && *t) {
    const std::string s = t;
    if (s == "p2p") o.transport = Transport::kP2p;
    else if (s == "ib") o.transport = Transport::kIb;
    else if (s == "auto") o.transport = Transport::kNone;
    else throw Error("World: GV_TRANSPORT='" + s + "': use p2p, ib or auto");
  }
  return o;
}

void validate(const WorldOptions& o) {
  if (o.heap_bytes == 0) throw Error("World: heap_bytes must be > 0");
  if (!ib::is_pow2(o.ib_lanes) || o.ib_lanes > 32) throw Error("World: ib_lanes must be a power of two in 1..32");
  if (o.ib_depth < 4 || o.ib_depth > 4096) throw Error("World: ib_depth must be in 4..4096");
  if (o.transport == Transport::kSelf) throw Error("World: transport kSelf is not a choice (use kP2p, kIb or kNone)");
}

}  // namespace

WorldOptions resolve_options(const WorldOptions& given) {
  WorldOptions o = from_env(given);
  validate(o);
  return o;
}

}  // namespace gv::detail
