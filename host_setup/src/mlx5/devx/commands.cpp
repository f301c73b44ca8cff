#include "commands.hpp"

#include <cstring>

#include "../../provider.hpp"

namespace gv::mlx5::devx {
namespace {

/// Set a field, refusing a value that would be truncated (the command would name another
/// object or size than the caller meant).
template <std::size_t N>
void put(Cmd<N>& c, prm::Field f, std::uint64_t v, const char* what) {
  if (!prm::fits(f, v))
    throw Error(std::string("DEVX command: ") + what + " = " + std::to_string(v) + " does not fit its " +
                std::to_string(f.width) + "-bit field");
  prm::set(c, f, v);
}

template <std::size_t N>
void header(Cmd<N>& c, std::uint16_t opcode, std::uint16_t op_mod = 0) {
  prm::set(c, prm::create_cq_in::opcode, opcode);
  prm::set(c, prm::create_cq_in::op_mod, op_mod);
}

prm::Field in_qpc(prm::Field f) { return prm::at(prm::modify_qp_in::qpc, f); }
prm::Field in_path(prm::Field f) { return in_qpc(prm::at(prm::qpc::primary_address_path, f)); }

ModifyQpIn modify(std::uint16_t opcode, std::uint32_t qpn) {
  ModifyQpIn c{};
  header(c, opcode);
  put(c, prm::modify_qp_in::qpn, qpn, "qpn");
  return c;
}

}  // namespace

QueryHcaCapIn build_query_hca_cap(std::uint16_t cap_type) {
  QueryHcaCapIn c{};
  header(c, prm::kOpQueryHcaCap, prm::hca_cap_op_mod(cap_type));
  return c;
}

CreateCqIn build_create_cq(const CqParams& p) {
  using namespace prm;
  CreateCqIn c{};
  header(c, kOpCreateCq);
  const auto cq = [](Field f) { return at(create_cq_in::cq_context, f); };
  put(c, cq(cqc::cqe_sz), kCqeSz64, "cqe_sz");
  put(c, cq(cqc::cc), p.collapsed, "cc");
  put(c, cq(cqc::oi), p.overrun_ignore, "oi");
  put(c, cq(cqc::log_cq_size), p.log_cq_size, "log_cq_size");
  put(c, cq(cqc::uar_page), p.uar_page, "uar_page");
  put(c, cq(cqc::c_eqn), p.eqn, "c_eqn");
  put(c, cq(cqc::log_page_size), p.log_page_size, "log_page_size");
  put(c, cq(cqc::dbr_umem_valid), 1, "dbr_umem_valid");
  put(c, cq(cqc::dbr_umem_id), p.dbr_umem_id, "dbr_umem_id");
  put(c, cq(cqc::dbr_addr), p.dbr_offset, "dbr_addr");
  put(c, create_cq_in::cq_umem_valid, 1, "cq_umem_valid");
  put(c, create_cq_in::cq_umem_id, p.cq_umem_id, "cq_umem_id");
  put(c, create_cq_in::cq_umem_offset, p.cq_umem_offset, "cq_umem_offset");
  return c;
}

CreateQpIn build_create_qp(const QpParams& p) {
  using namespace prm;
  CreateQpIn c{};
  header(c, kOpCreateQp);
  const auto q = [](Field f) { return at(create_qp_in::qpc, f); };
  put(c, q(qpc::st), kQpStRc, "st");
  put(c, q(qpc::pm_state), kPmMigrated, "pm_state");
  put(c, q(qpc::pd), p.pdn, "pd");
  put(c, q(qpc::uar_page), p.uar_page, "uar_page");
  put(c, q(qpc::user_index), p.user_index, "user_index");
  put(c, q(qpc::ts_format), p.ts_format, "ts_format");
  put(c, q(qpc::log_page_size), p.log_page_size, "log_page_size");
  put(c, q(qpc::rq_type), kRqRegular, "rq_type");
  put(c, q(qpc::log_rq_size), p.log_rq_size, "log_rq_size");
  put(c, q(qpc::log_rq_stride), p.log_rq_stride, "log_rq_stride");
  put(c, q(qpc::log_sq_size), p.log_sq_size, "log_sq_size");
  put(c, q(qpc::cqn_snd), p.cqn_snd, "cqn_snd");
  put(c, q(qpc::cqn_rcv), p.cqn_rcv, "cqn_rcv");
  put(c, q(qpc::dbr_umem_valid), 1, "dbr_umem_valid");
  put(c, q(qpc::dbr_umem_id), p.dbr_umem_id, "dbr_umem_id");
  put(c, q(qpc::dbr_addr), p.dbr_offset, "dbr_addr");
  put(c, create_qp_in::wq_umem_valid, 1, "wq_umem_valid");
  put(c, create_qp_in::wq_umem_id, p.wq_umem_id, "wq_umem_id");
  put(c, create_qp_in::wq_umem_offset, p.wq_umem_offset, "wq_umem_offset");
  return c;
}

ModifyQpIn build_rst2init(const Rst2InitParams& p) {
  ModifyQpIn c = modify(prm::kOpRst2InitQp, p.qpn);
  put(c, in_qpc(prm::qpc::pm_state), prm::kPmMigrated, "pm_state");
  put(c, in_qpc(prm::qpc::rre), p.remote_read, "rre");
  put(c, in_qpc(prm::qpc::rwe), p.remote_write, "rwe");
  put(c, in_qpc(prm::qpc::rae), p.remote_atomic, "rae");
  if (p.remote_atomic) put(c, in_qpc(prm::qpc::atomic_mode), prm::kAtomicMode8B, "atomic_mode");
  put(c, in_path(prm::ads::vhca_port_num), p.port, "vhca_port_num");
  put(c, in_path(prm::ads::pkey_index), p.pkey_index, "pkey_index");
  return c;
}

ModifyQpIn build_init2rtr(const Init2RtrParams& p) {
  using prm::ads::rmac_31_0;
  ModifyQpIn c = modify(prm::kOpInit2RtrQp, p.qpn);
  put(c, in_qpc(prm::qpc::mtu), p.mtu, "mtu");
  put(c, in_qpc(prm::qpc::log_msg_max), p.log_msg_max, "log_msg_max");
  put(c, in_qpc(prm::qpc::remote_qpn), p.remote_qpn, "remote_qpn");
  put(c, in_qpc(prm::qpc::next_rcv_psn), p.next_rcv_psn, "next_rcv_psn");
  put(c, in_qpc(prm::qpc::min_rnr_nak), p.min_rnr_nak, "min_rnr_nak");
  put(c, in_qpc(prm::qpc::log_rra_max), p.log_rra_max, "log_rra_max");
  const AddressPath& a = p.path;
  put(c, in_path(prm::ads::vhca_port_num), a.port, "vhca_port_num");
  if (!a.roce) {
    put(c, in_path(prm::ads::rlid), a.rlid, "rlid");
    put(c, in_path(prm::ads::sl), a.sl, "sl");
    return c;
  }
  put(c, in_path(prm::ads::grh), 1, "grh");
  prm::set_bytes(c, in_path(prm::ads::rgid_rip), a.rgid);
  put(c, in_path(prm::ads::src_addr_index), a.src_addr_index, "src_addr_index");
  put(c, in_path(prm::ads::hop_limit), a.hop_limit, "hop_limit");
  put(c, in_path(prm::ads::tclass), a.traffic_class, "tclass");
  put(c, in_path(prm::ads::dscp), a.traffic_class >> 2, "dscp");
  put(c, in_path(prm::ads::eth_prio), a.sl, "eth_prio");
  put(c, in_path(prm::ads::udp_sport), a.udp_sport, "udp_sport");
  put(c, in_path(prm::ads::rmac_47_32), std::uint32_t{a.rmac[0]} << 8 | a.rmac[1], "rmac_47_32");
  put(c, in_path(rmac_31_0),
      std::uint32_t{a.rmac[2]} << 24 | std::uint32_t{a.rmac[3]} << 16 | std::uint32_t{a.rmac[4]} << 8 | a.rmac[5],
      "rmac_31_0");
  return c;
}

ModifyQpIn build_rtr2rts(const Rtr2RtsParams& p) {
  ModifyQpIn c = modify(prm::kOpRtr2RtsQp, p.qpn);
  put(c, in_qpc(prm::qpc::next_send_psn), p.next_send_psn, "next_send_psn");
  put(c, in_qpc(prm::qpc::retry_count), p.retry_count, "retry_count");
  put(c, in_qpc(prm::qpc::rnr_retry), p.rnr_retry, "rnr_retry");
  put(c, in_qpc(prm::qpc::log_sra_max), p.log_sra_max, "log_sra_max");
  put(c, in_path(prm::ads::ack_timeout), p.ack_timeout, "ack_timeout");
  return c;
}

Qp2ErrIn build_2err(std::uint32_t qpn) {
  Qp2ErrIn c{};
  header(c, prm::kOp2ErrQp);
  put(c, prm::qp_2err_in::qpn, qpn, "qpn");
  return c;
}

QueryQpIn build_query_qp(std::uint32_t qpn) {
  QueryQpIn c{};
  header(c, prm::kOpQueryQp);
  put(c, prm::query_qp_in::qpn, qpn, "qpn");
  return c;
}

QpState read_qp_state(std::span<const std::uint8_t> out) {
  switch (prm::get(out, prm::at(prm::query_qp_out::qpc, prm::qpc::state))) {
    case prm::kQpcRst: return QpState::kReset;
    case prm::kQpcInit: return QpState::kInit;
    case prm::kQpcRtr: return QpState::kRtr;
    case prm::kQpcRts:
    case prm::kQpcSqd: return QpState::kRts;
    default: return QpState::kError;
  }
}

void read_general_caps(std::span<const std::uint8_t> out, HcaCaps& caps) {
  using namespace prm;
  const auto g = [&](Field f) { return static_cast<std::uint32_t>(get(out, at(query_hca_cap_out::capability, f))); };
  caps.log_max_qp_sz = g(cmd_hca_cap::log_max_qp_sz);
  caps.log_max_cq_sz = g(cmd_hca_cap::log_max_cq_sz);
  caps.log_max_msg = g(cmd_hca_cap::log_max_msg);
  caps.log_max_ra_req_qp = g(cmd_hca_cap::log_max_ra_req_qp);
  caps.log_max_ra_res_qp = g(cmd_hca_cap::log_max_ra_res_qp);
  caps.port_type = g(cmd_hca_cap::port_type);
  caps.cqe_version = g(cmd_hca_cap::cqe_version);
  caps.log_bf_reg_size = g(cmd_hca_cap::log_bf_reg_size);
  caps.sq_ts_format = g(cmd_hca_cap::sq_ts_format);
  caps.atomic = g(cmd_hca_cap::atomic) != 0;
  caps.cq_oi = g(cmd_hca_cap::cq_oi) != 0;
}

void read_atomic_caps(std::span<const std::uint8_t> out, HcaCaps& caps) {
  using namespace prm;
  const auto g = [&](Field f) { return static_cast<std::uint32_t>(get(out, at(query_hca_cap_out::capability, f))); };
  caps.atomic_operations = g(atomic_caps::atomic_operations);
  caps.atomic_size_qp = g(atomic_caps::atomic_size_qp);
  caps.atomic_endianness_mode = g(atomic_caps::atomic_req_8B_endianness_mode);
}

std::string check_caps(const HcaCaps& c) {
  if (c.cqe_version != 1)
    return "the device reports CQE version " + std::to_string(c.cqe_version) +
           "; gpuverbs polls version-1 CQEs (the mlx5 driver enables them on ConnectX-4 and later: "
           "update the kernel driver or the NIC firmware)";
  // The doorbell register and its BlueFlame twin sit at 0x800 of a 4 KiB UAR page.
  if (c.log_bf_reg_size < 3 || c.log_bf_reg_size > 10)
    return "the device reports a BlueFlame register of 2^" + std::to_string(c.log_bf_reg_size) +
           " bytes; gpuverbs rings an 8-byte doorbell in a 4 KiB UAR page and needs 8..1024 bytes";
  const std::uint32_t ops = prm::kAtomicOpsCas | prm::kAtomicOpsFetchAdd;
  if (!c.atomic || (c.atomic_operations & ops) != ops || !(c.atomic_size_qp & prm::kAtomicSize8))
    return "the device offers no 8-byte RC compare-and-swap and fetch-and-add (atomic " +
           std::to_string(c.atomic) + ", operations " + gv::detail::hex(c.atomic_operations) + ", QP sizes " +
           gv::detail::hex(c.atomic_size_qp) +
           "); gpuverbs' fetch_add/compare_swap need them: check that the function is not a VF with "
           "atomics disabled and that the firmware enables them (mlxconfig)";
  return {};
}

CmdStatus read_status(std::span<const std::uint8_t> out) {
  return CmdStatus{static_cast<std::uint32_t>(prm::get(out, prm::create_cq_out::status)),
                   static_cast<std::uint32_t>(prm::get(out, prm::create_cq_out::syndrome))};
}

namespace {
/// The command interface's status codes (PRM "Command Return Status").
const char* status_text(std::uint32_t s) {
  switch (s) {
    case 0x0: return "ok";
    case 0x1: return "internal error";
    case 0x2: return "bad operation";
    case 0x3: return "bad parameter";
    case 0x4: return "bad system state";
    case 0x5: return "bad resource";
    case 0x6: return "resource busy";
    case 0x8: return "limits exceeded";
    case 0x9: return "bad resource state";
    case 0xa: return "bad index";
    case 0xf: return "no resources";
    case 0x50: return "bad input length";
    case 0x51: return "bad output length";
    case 0x10: return "bad QP state";
    case 0x30: return "bad packet";
    case 0x40: return "bad size";
    default: return "unknown status";
  }
}
}  // namespace

std::string describe_failure(const char* command, std::span<const std::uint8_t> out, int err) {
  const CmdStatus s = read_status(out);
  std::string m = std::string(command) + " failed: " + status_text(s.status) + " (status " +
                  gv::detail::hex(s.status) + ", syndrome " + gv::detail::hex(s.syndrome) + ")";
  if (err != 0) m += ", errno " + std::to_string(err) + " (" + std::strerror(err) + ")";
  return m;
}

}  // namespace gv::mlx5::devx
