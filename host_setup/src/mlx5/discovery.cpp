// discovery.hpp: rdma-core's device list, and the choice of device, port and GID index.
#include "discovery.hpp"

#include "../parse.hpp"

#include "../provider.hpp"
#include "connect.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <infiniband/mlx5dv.h>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail::mlx5 {

namespace {

constexpr const char* kHowToList =
    "list them with gv_devices (or ibv_devices / ibv_devinfo from rdma-core)";

std::string names_of(const std::vector<HcaInfo>& hcas) {
  std::string s;
  for (const HcaInfo& h : hcas) s += (s.empty() ? "" : ", ") + h.name + (h.mlx5 ? "" : " (not mlx5)");
  return s;
}

int env_int(const char* var, int fallback) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  std::uint64_t x = 0;
  std::string why;
  if (!parse_uint(v, 0, 255, x, why)) throw Error(std::string(var) + "='" + v + "' " + why);
  return static_cast<int>(x);
}

bool ipv4_mapped(const std::uint8_t (&g)[16]) {
  static constexpr std::uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, kPrefix, sizeof(kPrefix)) == 0;
}

PortInfo query_port(ibv_context* ctx, std::uint8_t port) {
  PortInfo p;
  p.port = port;
  ibv_port_attr a{};
  if (ibv_query_port(ctx, port, &a) != 0) return p;
  p.state = a.state;
  p.link_layer = a.link_layer;
  p.lid = a.lid;
  p.active_mtu = static_cast<std::uint8_t>(a.active_mtu);
  // Empty entries fail with ENODATA and are left out.
  for (int i = 0; i < a.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, static_cast<std::uint32_t>(i), &e, 0) != 0) continue;
    GidInfo g;
    g.index = e.gid_index;
    std::memcpy(g.gid, e.gid.raw, sizeof(g.gid));
    g.type = e.gid_type;
    p.gids.push_back(g);
  }
  return p;
}

}  // namespace

std::vector<HcaInfo> list_hcas() {
  std::vector<HcaInfo> out;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return out;
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> guard(list, ibv_free_device_list);
  for (int i = 0; i < n; ++i) {
    HcaInfo h;
    h.name = ibv_get_device_name(list[i]);
    h.mlx5 = mlx5dv_is_supported(list[i]);
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      h.error = std::string("ibv_open_device failed: ") + std::strerror(errno);
      out.push_back(std::move(h));
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) != 0) {
      h.error = std::string("ibv_query_device failed: ") + std::strerror(errno);
    } else {
      for (int port = 1; port <= da.phys_port_cnt; ++port) h.ports.push_back(query_port(ctx, static_cast<std::uint8_t>(port)));
    }
    ibv_close_device(ctx);
    out.push_back(std::move(h));
  }
  return out;
}

Selection selection_from(const std::string& name, int port, int gid_index) {
  Selection s;
  s.device = name == "mlx5" ? "" : name;
  if (s.device.empty()) {
    if (const char* v = std::getenv("GV_IB_HCA"); v != nullptr && *v != '\0') s.device = v;
  }
  s.port = env_int("GV_IB_PORT", port);
  s.gid_index = env_int("GV_IB_GID_INDEX", gid_index);
  return s;
}

Choice pick_port(const std::vector<HcaInfo>& hcas, const Selection& s) {
  if (hcas.empty())
    throw Error("Device::open(mlx5): no RDMA device found (is the mlx5_ib kernel module loaded, "
                "and /dev/infiniband visible in this container?); " + std::string(kHowToList));
  std::string why;
  for (std::size_t i = 0; i < hcas.size(); ++i) {
    const HcaInfo& h = hcas[i];
    if (!s.device.empty() && h.name != s.device) continue;
    if (!h.mlx5) {
      why += "; " + h.name + " is not an mlx5 (ConnectX) device: only mlx5 is supported";
      continue;
    }
    if (!h.error.empty()) {
      why += "; " + h.name + ": " + h.error;
      continue;
    }
    for (std::size_t k = 0; k < h.ports.size(); ++k) {
      const PortInfo& p = h.ports[k];
      if (s.port != 0 && p.port != s.port) continue;
      if (p.state == IBV_PORT_ACTIVE) return Choice{i, k};
      why += "; " + h.name + " port " + std::to_string(p.port) + " is " + ibv_port_state_str(p.state) +
             ", not ACTIVE (cable, subnet manager, link?)";
    }
    if (s.port != 0 && why.find(h.name + " port " + std::to_string(s.port)) == std::string::npos)
      why += "; " + h.name + " has no port " + std::to_string(s.port);
  }
  if (!s.device.empty() && why.empty())
    throw Error("Device::open(mlx5): no RDMA device named '" + s.device + "' (found: " + names_of(hcas) + "); " +
                kHowToList);
  throw Error("Device::open(mlx5): no usable mlx5 port" + why + "; " + kHowToList);
}

std::uint32_t pick_gid(const PortInfo& p, int requested) {
  if (requested >= 0) {
    for (const GidInfo& g : p.gids)
      if (g.index == static_cast<std::uint32_t>(requested)) return g.index;
    throw Error("mlx5: GID index " + std::to_string(requested) + " is not valid on port " + std::to_string(p.port) +
                " (see gv_devices for the table; GV_IB_GID_INDEX / -x picks another)");
  }
  if (p.link_layer != IBV_LINK_LAYER_ETHERNET) return p.gids.empty() ? 0 : p.gids.front().index;
  if (p.gids.empty())
    throw Error("mlx5: RoCE port " + std::to_string(p.port) +
                " has no GID: give its network interface an IP address, or pick a port with GV_IB_PORT");
  for (const GidInfo& g : p.gids)
    if (g.type == IBV_GID_TYPE_ROCE_V2 && ipv4_mapped(g.gid)) return g.index;
  for (const GidInfo& g : p.gids)
    if (g.type == IBV_GID_TYPE_ROCE_V2) return g.index;
  return p.gids.front().index;
}

std::string gid_text(const std::uint8_t (&gid)[16]) {
  char b[48];
  std::snprintf(b, sizeof(b), "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
                gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10], gid[11], gid[12],
                gid[13], gid[14], gid[15]);
  return b;
}

const char* gid_type_text(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
  }
  return "?";
}

}  // namespace gv::detail::mlx5

namespace gv::detail {

std::string rdma_device_report() {
  using namespace mlx5;
  const std::vector<HcaInfo> hcas = list_hcas();
  if (hcas.empty())
    return "mlx5: no RDMA device found (rdma-core lists none: is the mlx5_ib module loaded, and /dev/infiniband "
           "visible here?)\n";
  std::string out;
  char b[256];
  for (const HcaInfo& h : hcas) {
    std::snprintf(b, sizeof(b), "%-12s %s\n", h.name.c_str(),
                  h.mlx5 ? "mlx5 (ConnectX): usable by gpuverbs" : "not mlx5: gpuverbs cannot use it");
    out += b;
    if (!h.error.empty()) out += "             " + h.error + "\n";
    for (const PortInfo& p : h.ports) {
      std::snprintf(b, sizeof(b), "             port %u: %s, %s, LID 0x%x, active MTU %u\n", p.port,
                    ibv_port_state_str(p.state),
                    p.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand", p.lid,
                    mtu_bytes(p.active_mtu));
      out += b;
      for (const GidInfo& g : p.gids) {
        std::snprintf(b, sizeof(b), "               GID[%3u] %s  %s\n", g.index, gid_text(g.gid).c_str(),
                      gid_type_text(g.type));
        out += b;
      }
    }
  }
  return out;
}

}  // namespace gv::detail
