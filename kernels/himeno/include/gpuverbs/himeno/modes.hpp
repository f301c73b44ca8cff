// The six ways a distributed Himeno iteration is synchronised, and which of them a device can
// run. Plain C++: the checks are pure functions of what the device reports, tested without a GPU.
//
//   hybrid         the host drives every step: kernels, stream synchronise, cudaMemcpyPeerAsync
//                  of the halo planes, synchronise, host exchange of the Gosa (the baseline)
//   stream         halo-wait, sweep, put_signal and Gosa kernels enqueued on two streams per
//                  rank; the host never waits inside the loop
//   in-kernel      one kernel per iteration: its boundary blocks wait on the halo signals, the
//                  last block of each boundary plane (atomic counter) puts it to the neighbour,
//                  the last block of all publishes the Gosa
//   device-launch  the in-kernel iteration as a device graph that tail-launches itself until
//                  the last iteration (CUDA 12+: no device-side synchronise); the host launches once
//   persistent     one cooperative kernel for all iterations, a grid barrier between sweeps
//   graph          the stream mode's iteration captured as a CUDA graph and replayed
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gv::himeno {

enum class Mode { kHybrid, kStream, kInKernel, kDeviceLaunch, kPersistent, kGraph };

inline constexpr Mode kAllModes[] = {Mode::kHybrid,       Mode::kStream,     Mode::kInKernel,
                                     Mode::kDeviceLaunch, Mode::kPersistent, Mode::kGraph};

/// "hybrid", "stream", "in-kernel", "device-launch", "persistent", "graph".
const char* to_string(Mode m);
std::optional<Mode> parse_mode(std::string_view name);
/// A comma-separated list of modes, or "all". Throws std::invalid_argument naming the word it
/// does not know and the modes it does.
std::vector<Mode> parse_modes(std::string_view list);

/// What a device offers that the modes depend on.
struct DeviceLimits {
  std::string name;
  int sms = 0;
  bool cooperative_launch = false;
  bool device_graph_launch = false;  ///< CUDA 12+ runtime and driver
  std::string device_graph_why;      ///< why not, when it is missing
};

/// What a mode asks of the device for one rank.
struct ModeNeeds {
  int ranks_on_gpu = 1;      ///< ranks of the World sharing this rank's GPU
  int engines_on_gpu = 0;    ///< resident software-HCA engines on this GPU (ib transport), one SM each
  int blocks_per_sm = 0;     ///< resident blocks per SM of the kernel the mode keeps running
  int boundary_vblocks = 0;  ///< in-kernel, device-launch: blocks that may wait for a halo at once
  bool peers_in_other_processes = false;
  bool every_peer_p2p = true;
};

/// How many blocks of a kernel can be resident at once for one rank: its share of the SMs of a
/// GPU shared by ranks_on_gpu ranks, less one SM per resident engine.
int coresident_blocks_per_rank(const DeviceLimits& d, const ModeNeeds& n);

/// Empty when `m` can run on the device; otherwise a sentence that names the limit.
std::string why_not(Mode m, const DeviceLimits& d, const ModeNeeds& n);

}  // namespace gv::himeno
