// Pure functions of connection: a peer's QpInfo and our port become the attributes of each state
// change (queues.hpp), and those become ibv_qp_attr + mask for ibv_modify_qp. Unit-tested in
// tests/unit/test_mlx5_connect.cpp; no device needed.
#pragma once
#include <cstdint>
#include <utility>

#include <infiniband/verbs.h>

#include <gpuverbs/host/verbs.hpp>

#include "queues.hpp"

namespace gv::detail::mlx5 {

/// What this side knows of its own port and device when connecting.
struct LocalPort {
  std::uint8_t port = 1;
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::uint16_t lid = 0;
  std::uint8_t active_mtu = IBV_MTU_1024;  ///< IB encoding
  std::uint8_t gid_index = 0;
  std::uint8_t gid[16] = {};
  std::uint16_t pkey_index = 0;
  std::uint8_t max_rd_atomic = 16;         ///< min(16, ibv_device_attr.max_qp_rd_atom)
  std::uint8_t max_dest_rd_atomic = 16;    ///< min(16, ibv_device_attr.max_qp_init_rd_atom)
};

/// The QpInfo of a QP of ours: the peer connects to it with this.
QpInfo local_qp_info(std::uint32_t qpn, std::uint32_t psn, const LocalPort& p);

InitAttr init_attr(const LocalPort& p, std::uint32_t access);
/// Throws gv::Error when `remote` cannot be reached from this port (a soft QpInfo, another link
/// layer, a RoCE peer without a GID, an InfiniBand peer without a LID).
RtrAttr rtr_attr(const QpInfo& remote, const LocalPort& p, std::uint8_t min_rnr_timer);
RtsAttr rts_attr(std::uint32_t our_psn, const LocalPort& p, std::uint8_t rnr_retry);

/// ibv_modify_qp's arguments for each change (the attributes an RC QP must be given there).
std::pair<ibv_qp_attr, int> to_ibv(const InitAttr& a);
std::pair<ibv_qp_attr, int> to_ibv(const RtrAttr& a);
std::pair<ibv_qp_attr, int> to_ibv(const RtsAttr& a);

/// gv's view of an ibv_qp_state (SQD counts as RTS, SQE as ERR: both only happen after an error
/// or a drain gpuverbs never asks for).
QpState from_ibv(ibv_qp_state s);

/// The bytes of an IB MTU enum value (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5); 0 if invalid.
std::uint32_t mtu_bytes(std::uint8_t ib_mtu);

}  // namespace gv::detail::mlx5
