// connect.hpp: QpInfo <-> the attributes of RESET -> INIT -> RTR -> RTS.
#include "connect.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "../provider.hpp"

namespace gv::detail::mlx5 {

namespace {
constexpr std::uint32_t kPsnMask = 0xffffff;  // PSNs are 24 bits
bool all_zero(const std::uint8_t* p, std::size_t n) {
  return std::all_of(p, p + n, [](std::uint8_t b) { return b == 0; });
}
const char* link_name(std::uint8_t ll) {
  return ll == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : ll == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "unknown";
}
}  // namespace

std::uint32_t mtu_bytes(std::uint8_t ib_mtu) {
  return ib_mtu >= IBV_MTU_256 && ib_mtu <= IBV_MTU_4096 ? 128u << ib_mtu : 0;
}

QpInfo local_qp_info(std::uint32_t qpn, std::uint32_t psn, const LocalPort& p) {
  QpInfo i;
  i.qpn = qpn;
  i.psn = psn & kPsnMask;
  i.lid = p.lid;
  i.port = p.port;
  i.gid_index = p.gid_index;
  i.mtu = p.active_mtu;
  i.link_layer = p.link_layer;
  std::memcpy(i.gid, p.gid, sizeof(i.gid));
  return i;
}

InitAttr init_attr(const LocalPort& p, std::uint32_t access) {
  InitAttr a;
  a.port = p.port;
  a.pkey_index = p.pkey_index;
  // gv::Access has the ibv_access_flags values; a QP takes the remote rights only.
  a.access = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  return a;
}

RtrAttr rtr_attr(const QpInfo& remote, const LocalPort& p, std::uint8_t min_rnr_timer) {
  const std::string who = "connect to QP " + hex(remote.qpn);
  if (remote.port == 0 || remote.link_layer == 0)
    throw Error(who + ": its QpInfo carries no fabric address (it comes from the soft provider?); "
                      "both sides must use the mlx5 provider");
  if (remote.link_layer != p.link_layer)
    throw Error(who + ": the peer's port is " + link_name(remote.link_layer) + ", ours " +
                link_name(p.link_layer) + "; connect ports of the same fabric");
  if (mtu_bytes(remote.mtu) == 0) throw Error(who + ": the peer's MTU code " + std::to_string(remote.mtu) + " is invalid");
  RtrAttr a;
  a.remote_qpn = remote.qpn;
  a.rq_psn = remote.psn & kPsnMask;
  a.path_mtu = std::min(remote.mtu, p.active_mtu);
  a.max_dest_rd_atomic = p.max_dest_rd_atomic;
  a.min_rnr_timer = min_rnr_timer;
  a.path.port = p.port;
  a.path.sl = 0;
  if (p.link_layer == IBV_LINK_LAYER_ETHERNET) {
    if (all_zero(remote.gid, sizeof(remote.gid)))
      throw Error(who + ": RoCE needs the peer's GID and its QpInfo has none (GID index " +
                  std::to_string(remote.gid_index) + " is empty on its port: pick another with GV_IB_GID_INDEX)");
    a.path.global = true;
    std::memcpy(a.path.dgid, remote.gid, sizeof(a.path.dgid));
    a.path.sgid_index = p.gid_index;
    a.path.hop_limit = 64;
  } else {
    if (remote.lid == 0) throw Error(who + ": the peer's InfiniBand port has no LID (is a subnet manager running?)");
    a.path.dlid = remote.lid;
    a.path.global = false;
  }
  return a;
}

RtsAttr rts_attr(std::uint32_t our_psn, const LocalPort& p, std::uint8_t rnr_retry) {
  RtsAttr a;
  a.sq_psn = our_psn & kPsnMask;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = rnr_retry;
  a.max_rd_atomic = p.max_rd_atomic;
  return a;
}

QpState from_ibv(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return QpState::kReset;
    case IBV_QPS_INIT: return QpState::kInit;
    case IBV_QPS_RTR: return QpState::kRtr;
    case IBV_QPS_RTS:
    case IBV_QPS_SQD: return QpState::kRts;
    default: return QpState::kError;  // SQE, ERR, UNKNOWN
  }
}

std::pair<ibv_qp_attr, int> to_ibv(const InitAttr& a) {
  ibv_qp_attr q{};
  q.qp_state = IBV_QPS_INIT;
  q.pkey_index = a.pkey_index;
  q.port_num = a.port;
  q.qp_access_flags = a.access;
  return {q, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
}

std::pair<ibv_qp_attr, int> to_ibv(const RtrAttr& a) {
  ibv_qp_attr q{};
  q.qp_state = IBV_QPS_RTR;
  q.path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  q.dest_qp_num = a.remote_qpn;
  q.rq_psn = a.rq_psn;
  q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  q.min_rnr_timer = a.min_rnr_timer;
  q.ah_attr.port_num = a.path.port;
  q.ah_attr.sl = a.path.sl;
  q.ah_attr.dlid = a.path.dlid;
  q.ah_attr.is_global = a.path.global ? 1 : 0;
  if (a.path.global) {
    std::memcpy(q.ah_attr.grh.dgid.raw, a.path.dgid, sizeof(a.path.dgid));
    q.ah_attr.grh.sgid_index = a.path.sgid_index;
    q.ah_attr.grh.hop_limit = a.path.hop_limit;
    q.ah_attr.grh.traffic_class = a.path.traffic_class;
    q.ah_attr.grh.flow_label = a.path.flow_label;
  }
  return {q, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER};
}

std::pair<ibv_qp_attr, int> to_ibv(const RtsAttr& a) {
  ibv_qp_attr q{};
  q.qp_state = IBV_QPS_RTS;
  q.sq_psn = a.sq_psn;
  q.timeout = a.timeout;
  q.retry_cnt = a.retry_cnt;
  q.rnr_retry = a.rnr_retry;
  q.max_rd_atomic = a.max_rd_atomic;
  return {q, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                 IBV_QP_MAX_QP_RD_ATOMIC};
}

}  // namespace gv::detail::mlx5
