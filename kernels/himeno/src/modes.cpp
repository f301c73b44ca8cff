#include <gpuverbs/himeno/modes.hpp>

#include <stdexcept>
#include <string>

namespace gv::himeno {

const char* to_string(Mode m) {
  switch (m) {
    case Mode::kHybrid: return "hybrid";
    case Mode::kStream: return "stream";
    case Mode::kInKernel: return "in-kernel";
    case Mode::kDeviceLaunch: return "device-launch";
    case Mode::kPersistent: return "persistent";
    case Mode::kGraph: return "graph";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view name) {
  for (Mode m : kAllModes)
    if (name == to_string(m)) return m;
  return std::nullopt;
}

std::vector<Mode> parse_modes(std::string_view list) {
  if (list == "all") return {std::begin(kAllModes), std::end(kAllModes)};
  std::vector<Mode> out;
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view word = list.substr(0, comma);
    const auto m = parse_mode(word);
    if (!m) {
      std::string known;
      for (Mode k : kAllModes) known += std::string(known.empty() ? "" : ", ") + to_string(k);
      throw std::invalid_argument("unknown mode '" + std::string(word) + "': the modes are " + known + " (or all)");
    }
    out.push_back(*m);
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

int coresident_blocks_per_rank(const DeviceLimits& d, const ModeNeeds& n) {
  const int sms = d.sms - n.engines_on_gpu;
  if (sms <= 0 || n.blocks_per_sm <= 0 || n.ranks_on_gpu <= 0) return 0;
  return n.blocks_per_sm * sms / n.ranks_on_gpu;
}

std::string why_not(Mode m, const DeviceLimits& d, const ModeNeeds& n) {
  const std::string dev = d.name.empty() ? std::string("the device") : d.name;
  const std::string share = std::to_string(d.sms) + " SMs shared by " + std::to_string(n.ranks_on_gpu) + " rank(s)" +
                            (n.engines_on_gpu > 0 ? ", one SM kept for each of " + std::to_string(n.engines_on_gpu) +
                                                        " resident ib engine(s)"
                                                  : std::string());
  switch (m) {
    case Mode::kHybrid:
      if (n.peers_in_other_processes && !n.every_peer_p2p)
        return "hybrid copies halo planes with cudaMemcpyPeerAsync into the neighbour's heap, which another "
               "process maps only over p2p (CUDA IPC); this World reaches a neighbour over ib";
      return {};
    case Mode::kStream:
    case Mode::kGraph:
      return {};
    case Mode::kDeviceLaunch:
      if (!d.device_graph_launch)
        return "device-launch needs device graph launch (CUDA 12+ dynamic parallelism) on " + dev + ": " +
               d.device_graph_why;
      [[fallthrough]];
    case Mode::kInKernel: {
      // A rank's boundary blocks wait for a neighbour's halo while holding their SMs; when the
      // neighbour computes on the same GPU it must still find room for its own blocks.
      if (n.ranks_on_gpu <= 1) return {};
      const int room = coresident_blocks_per_rank(d, n);
      if (n.boundary_vblocks < room) return {};
      return std::string(to_string(m)) + ": each rank has " + std::to_string(n.boundary_vblocks) +
             " boundary blocks that wait for a neighbour on the same GPU while holding their SMs, and " + dev +
             " keeps only " + std::to_string(room) + " blocks of the iteration kernel resident per rank (" + share +
             ", " + std::to_string(n.blocks_per_sm) + " per SM): use fewer ranks per GPU or a smaller grid";
    }
    case Mode::kPersistent: {
      if (!d.cooperative_launch) return "persistent needs cooperative launch, which " + dev + " does not support";
      // One block sweeps at least, one communicates (persistent_kernel).
      const int room = coresident_blocks_per_rank(d, n);
      if (room >= 2) return {};
      return "persistent: " + dev + " keeps " + std::to_string(n.blocks_per_sm) +
             " blocks of the persistent kernel resident per SM (" + share + "), which leaves " +
             std::to_string(room) + " co-resident block(s) for a rank, and it needs 2 (one sweeps, one "
             "communicates): use fewer ranks per GPU";
    }
  }
  return "unknown mode";
}

}  // namespace gv::himeno
