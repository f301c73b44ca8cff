// Which RDMA devices this machine has, and which port and GID index the mlx5 provider uses.
// list_hcas() asks rdma-core (ibv_get_device_list, ibv_query_port, ibv_query_gid_ex);
// pick_port() and pick_gid() are pure functions of what it found and the options, unit-tested.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <infiniband/verbs.h>

namespace gv::detail::mlx5 {

struct GidInfo {
  std::uint32_t index = 0;
  std::uint8_t gid[16] = {};
  std::uint32_t type = IBV_GID_TYPE_IB;  ///< IBV_GID_TYPE_*
};

struct PortInfo {
  std::uint8_t port = 1;
  ibv_port_state state = IBV_PORT_NOP;
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::uint16_t lid = 0;
  std::uint8_t active_mtu = IBV_MTU_1024;
  std::vector<GidInfo> gids;  ///< the valid entries of the GID table
};

struct HcaInfo {
  std::string name;
  bool mlx5 = false;          ///< mlx5dv_is_supported
  std::vector<PortInfo> ports;
  std::string error;          ///< why it could not be opened or queried (empty: fine)
};

/// Every RDMA device rdma-core lists, queried. Never throws for a device that cannot be opened
/// (its `error` says why); an empty list when there is none.
std::vector<HcaInfo> list_hcas();

/// The options with the environment's overrides applied: GV_IB_HCA (a device name), GV_IB_PORT,
/// GV_IB_GID_INDEX. `name` is "mlx5" (any device) or a device name ("mlx5_0").
struct Selection {
  std::string device;  ///< "" = the first usable
  int port = 0;        ///< 0 = the first ACTIVE port
  int gid_index = -1;  ///< -1 = chosen by pick_gid
};
/// Throws gv::Error when an environment variable does not parse.
Selection selection_from(const std::string& name, int port, int gid_index);

struct Choice {
  std::size_t hca = 0;   ///< index into the list
  std::size_t port = 0;  ///< index into its ports
};
/// The device and port to open. Throws gv::Error saying what was found and how to list devices
/// when nothing fits: no RDMA device, none by that name, not mlx5, no ACTIVE port.
Choice pick_port(const std::vector<HcaInfo>& hcas, const Selection& s);

/// The source GID index: the one asked for (it must exist), else on InfiniBand 0, on RoCE the
/// first RoCE v2 entry holding an IPv4-mapped address, else the first RoCE v2 entry, else the
/// first entry. Throws when a RoCE port has no GID (no IP address on its netdev).
std::uint32_t pick_gid(const PortInfo& p, int requested);

/// "fe80::...:1234" style text of a GID (8 groups of 4 hex digits).
std::string gid_text(const std::uint8_t (&gid)[16]);
const char* gid_type_text(std::uint32_t type);

}  // namespace gv::detail::mlx5
