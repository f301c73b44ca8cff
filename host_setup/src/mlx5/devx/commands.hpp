// The DEVX commands that build GPU-ring queues, as pure functions from values to big-endian
// command buffers (prm.hpp's layouts), and the readers of their outputs. Nothing here reaches a
// device: seam.hpp carries the buffers there. Builders throw gv::Error when a value does not fit
// its field, so a truncated command never leaves the host.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include <gpuverbs/types.hpp>

#include "prm.hpp"

namespace gv::mlx5::devx {

template <std::size_t N>
using Cmd = std::array<std::uint8_t, N>;
using CreateCqIn = Cmd<prm::create_cq_in::kBytes>;
using CreateQpIn = Cmd<prm::create_qp_in::kBytes>;
using ModifyQpIn = Cmd<prm::modify_qp_in::kBytes>;
using Qp2ErrIn = Cmd<prm::qp_2err_in::kBytes>;
using QueryQpIn = Cmd<prm::query_qp_in::kBytes>;
using QueryQpOut = Cmd<prm::query_qp_out::kBytes>;
using QueryHcaCapIn = Cmd<prm::query_hca_cap_in::kBytes>;
using QueryHcaCapOut = Cmd<prm::query_hca_cap_out::kBytes>;
/// CREATE_CQ / CREATE_QP / modify outputs: status, syndrome, and the object number.
using ShortOut = Cmd<prm::create_cq_out::kBytes>;

QueryHcaCapIn build_query_hca_cap(std::uint16_t cap_type);

struct CqParams {
  std::uint32_t log_cq_size = 0;
  std::uint32_t uar_page = 0;
  std::uint32_t eqn = 0;
  std::uint32_t log_page_size = 0;   ///< log2(UMEM page) - 12
  std::uint32_t cq_umem_id = 0;
  std::uint64_t cq_umem_offset = 0;
  std::uint32_t dbr_umem_id = 0;
  std::uint64_t dbr_offset = 0;      ///< of the record in its UMEM (cqc.dbr_addr)
  bool collapsed = false;            ///< cqc.cc: every CQE lands in entry 0
  bool overrun_ignore = false;       ///< cqc.oi
};
CreateCqIn build_create_cq(const CqParams& p);

struct QpParams {
  std::uint32_t pdn = 0;
  std::uint32_t uar_page = 0;
  std::uint32_t cqn_snd = 0, cqn_rcv = 0;
  std::uint32_t log_sq_size = 0;     ///< WQEBBs
  std::uint32_t log_rq_size = 0;     ///< receive WQEs
  std::uint32_t log_rq_stride = 0;   ///< receive WQE bytes = 16 << log_rq_stride
  std::uint32_t user_index = 0;
  std::uint32_t ts_format = 0;       ///< prm::kTsFreeRunning or kTsDefault
  std::uint32_t log_page_size = 0;
  std::uint32_t wq_umem_id = 0;
  std::uint64_t wq_umem_offset = 0;
  std::uint32_t dbr_umem_id = 0;
  std::uint64_t dbr_offset = 0;
};
CreateQpIn build_create_qp(const QpParams& p);

struct Rst2InitParams {
  std::uint32_t qpn = 0;
  std::uint8_t port = 1;            ///< primary_address_path.vhca_port_num
  std::uint16_t pkey_index = 0;
  bool remote_read = false, remote_write = false, remote_atomic = false;
};
ModifyQpIn build_rst2init(const Rst2InitParams& p);

/// The address path to the peer: LID/SL on InfiniBand, GID/GID index/MAC on RoCE v2.
struct AddressPath {
  bool roce = false;
  std::uint8_t port = 1;
  std::uint16_t rlid = 0;          ///< InfiniBand
  std::uint8_t sl = 0;             ///< InfiniBand service level; RoCE: Ethernet priority (0..7)
  std::array<std::uint8_t, 16> rgid{};  ///< RoCE: the peer's GID, wire order
  std::uint8_t src_addr_index = 0; ///< RoCE: our GID index
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;  ///< RoCE v2: its top 6 bits go out as the DSCP
  std::uint16_t udp_sport = 0xc000;
  std::array<std::uint8_t, 6> rmac{};   ///< RoCE: next hop's MAC (resolved through an AH)
};

struct Init2RtrParams {
  std::uint32_t qpn = 0;
  std::uint32_t remote_qpn = 0;
  std::uint32_t mtu = 0;            ///< PRM encoding: 1 = 256 B .. 5 = 4096 B
  std::uint32_t log_msg_max = 0;
  std::uint32_t next_rcv_psn = 0;
  std::uint8_t min_rnr_nak = 12;
  std::uint8_t log_rra_max = 0;     ///< log2 of incoming RDMA READ/atomic in flight
  AddressPath path;
};
ModifyQpIn build_init2rtr(const Init2RtrParams& p);

struct Rtr2RtsParams {
  std::uint32_t qpn = 0;
  std::uint32_t next_send_psn = 0;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry = 6;
  std::uint8_t ack_timeout = 14;    ///< 4.096 us << ack_timeout
  std::uint8_t log_sra_max = 0;     ///< log2 of outgoing RDMA READ/atomic in flight
};
ModifyQpIn build_rtr2rts(const Rtr2RtsParams& p);

Qp2ErrIn build_2err(std::uint32_t qpn);
QueryQpIn build_query_qp(std::uint32_t qpn);
/// The QP state QUERY_QP reports (SQ drained counts as RTS, SQ error and the rest as ERR).
QpState read_qp_state(std::span<const std::uint8_t> out);

/// The capabilities the GPU-ring path depends on (QUERY_HCA_CAP, current values).
struct HcaCaps {
  std::uint32_t log_max_qp_sz = 0, log_max_cq_sz = 0, log_max_msg = 0;
  std::uint32_t log_max_ra_req_qp = 0, log_max_ra_res_qp = 0;
  std::uint32_t port_type = 0, cqe_version = 0, log_bf_reg_size = 0, sq_ts_format = 0;
  bool atomic = false, cq_oi = false;
  std::uint32_t atomic_operations = 0, atomic_size_qp = 0, atomic_endianness_mode = 0;
};
void read_general_caps(std::span<const std::uint8_t> out, HcaCaps& caps);
void read_atomic_caps(std::span<const std::uint8_t> out, HcaCaps& caps);
/// Empty when the device has what the device API needs; otherwise what is missing and what to
/// change.
std::string check_caps(const HcaCaps& caps);

/// Status and syndrome of a command output.
struct CmdStatus {
  std::uint32_t status = 0;
  std::uint32_t syndrome = 0;
};
CmdStatus read_status(std::span<const std::uint8_t> out);
/// "CREATE_QP failed: bad parameter (status 0x3, syndrome 0x1234abcd), errno 22 (Invalid
/// argument)": what a failed command says.
std::string describe_failure(const char* command, std::span<const std::uint8_t> out, int err);

}  // namespace gv::mlx5::devx
