// A Seam that records every call and checks every DEVX command buffer against prm.hpp's layouts
// (opcode known, no bit set outside the fields our table defines for that command), and answers
// like a device would. Queue memory is HOST memory standing in for GPU memory: this tests our
// commands and their order, never a NIC.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mlx5/devx/commands.hpp"
#include "mlx5/devx/seam.hpp"

namespace gv::mlx5::devx::test {

class Recorder : public Seam {
 public:
  std::vector<std::string> calls;
  std::map<std::uint16_t, std::vector<std::uint8_t>> last_in;  ///< by opcode
  HcaCaps caps;          ///< what QUERY_HCA_CAP answers
  int fail_dmabuf = 0, fail_umem = 0;
  std::set<UarType> refuse_uar;
  std::uint32_t fail_opcode = 0, fail_status = 0x3, fail_syndrome = 0;
  std::set<void*> memory;
  std::map<void*, std::uint32_t> qp_state;  ///< by DEVX object, as a device tracks it
  int uars = 0, umems = 0, objs = 0;

  Recorder() {
    caps.cqe_version = 1;
    caps.log_bf_reg_size = 9;
    caps.atomic = true;
    caps.atomic_operations = prm::kAtomicOpsCas | prm::kAtomicOpsFetchAdd;
    caps.atomic_size_qp = prm::kAtomicSize8 | 0x4;
    caps.log_max_qp_sz = 15;
    caps.log_max_cq_sz = 22;
    caps.log_max_msg = 30;
    caps.log_max_ra_req_qp = 4;
    caps.log_max_ra_res_qp = 4;
    caps.port_type = prm::kPortTypeEth;
    caps.sq_ts_format = 1;  // real-time stamps known: the QP takes the default format
  }

  int general_cmd(std::span<const std::uint8_t> in, std::span<std::uint8_t> out) override {
    const auto op_mod = static_cast<std::uint16_t>(prm::get(in, prm::query_hca_cap_in::op_mod));
    check(in, "general_cmd");
    EXPECT_EQ(out.size(), prm::query_hca_cap_out::kBytes);
    const auto cap = [&](prm::Field f, std::uint64_t v) { prm::set(out, prm::at(prm::query_hca_cap_out::capability, f), v); };
    if (op_mod == prm::hca_cap_op_mod(prm::kCapGeneral)) {
      cap(prm::cmd_hca_cap::cqe_version, caps.cqe_version);
      cap(prm::cmd_hca_cap::log_bf_reg_size, caps.log_bf_reg_size);
      cap(prm::cmd_hca_cap::atomic, caps.atomic);
      cap(prm::cmd_hca_cap::cq_oi, caps.cq_oi);
      cap(prm::cmd_hca_cap::log_max_qp_sz, caps.log_max_qp_sz);
      cap(prm::cmd_hca_cap::log_max_cq_sz, caps.log_max_cq_sz);
      cap(prm::cmd_hca_cap::log_max_msg, caps.log_max_msg);
      cap(prm::cmd_hca_cap::log_max_ra_req_qp, caps.log_max_ra_req_qp);
      cap(prm::cmd_hca_cap::log_max_ra_res_qp, caps.log_max_ra_res_qp);
      cap(prm::cmd_hca_cap::port_type, caps.port_type);
      cap(prm::cmd_hca_cap::sq_ts_format, caps.sq_ts_format);
    } else if (op_mod == prm::hca_cap_op_mod(prm::kCapAtomic)) {
      cap(prm::atomic_caps::atomic_operations, caps.atomic_operations);
      cap(prm::atomic_caps::atomic_size_qp, caps.atomic_size_qp);
    } else {
      ADD_FAILURE() << "QUERY_HCA_CAP op_mod " << op_mod;
    }
    return 0;
  }

  int obj_create(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, void** obj) override {
    const std::uint16_t op = check(in, "obj_create");
    if (op == fail_opcode) return fail(out);
    *obj = reinterpret_cast<void*>(std::uintptr_t{0x1000} + ++objs);
    prm::set(out, prm::create_cq_out::cqn, op == prm::kOpCreateCq ? 0x80 + objs : 0x100 + objs);
    return 0;
  }
  int obj_modify(void* obj, std::span<const std::uint8_t> in, std::span<std::uint8_t> out) override {
    EXPECT_NE(obj, nullptr);
    const std::uint16_t op = check(in, "obj_modify");
    if (op == fail_opcode) return fail(out);
    // The state a device would move the QP to (qpc.state encoding).
    qp_state[obj] = op == prm::kOpRst2InitQp   ? prm::kQpcInit
                    : op == prm::kOpInit2RtrQp ? prm::kQpcRtr
                    : op == prm::kOpRtr2RtsQp  ? prm::kQpcRts
                                               : 0x6;  // 2ERR_QP: ERR
    return 0;
  }
  int obj_query(void* obj, std::span<const std::uint8_t> in, std::span<std::uint8_t> out) override {
    EXPECT_EQ(check(in, "obj_query"), prm::kOpQueryQp);
    EXPECT_EQ(out.size(), prm::query_qp_out::kBytes);
    prm::set(out, prm::at(prm::query_qp_out::qpc, prm::qpc::state), qp_state[obj]);
    return 0;
  }
  int obj_destroy(void* obj) override {
    calls.push_back("obj_destroy");
    EXPECT_NE(obj, nullptr);
    --objs;
    return 0;
  }
  int umem_reg_dmabuf(void* addr, std::size_t len, Umem* umem, std::string* why) override {
    calls.push_back("umem_reg_dmabuf");
    EXPECT_TRUE(memory.count(addr));
    EXPECT_EQ(len % (64 << 10), 0u);
    if (fail_dmabuf) {
      *why = "cuMemGetHandleForAddressRange: dma-buf not supported";
      return fail_dmabuf;
    }
    return give_umem(umem);
  }
  int umem_reg(void* addr, std::size_t, Umem* umem) override {
    calls.push_back("umem_reg");
    EXPECT_TRUE(memory.count(addr));
    return fail_umem ? fail_umem : give_umem(umem);
  }
  int umem_dereg(const Umem& u) override {
    calls.push_back("umem_dereg");
    EXPECT_NE(u.handle, nullptr);
    --umems;
    return 0;
  }
  int alloc_uar(UarType t, Uar* uar) override {
    calls.push_back(std::string("alloc_uar ") + to_string(t));
    if (refuse_uar.count(t)) return EOPNOTSUPP;
    ++uars;
    uar->handle = reinterpret_cast<void*>(std::uintptr_t{0x2000} + uars);
    uar->page_id = 0x40 + uars;
    uar->reg_addr = &doorbell_;
    uar->base_addr = &doorbell_;
    return 0;
  }
  void free_uar(const Uar& u) override {
    calls.push_back("free_uar");
    EXPECT_NE(u.handle, nullptr);
    --uars;
  }
  int query_eqn(std::uint32_t vector, std::uint32_t* eqn) override {
    calls.push_back("query_eqn");
    *eqn = 9 + vector;
    return 0;
  }
  int pdn(ibv_pd*, std::uint32_t* pdn) override {
    calls.push_back("pdn");
    *pdn = 0x77;
    return 0;
  }
  int resolve_rmac(ibv_pd*, std::uint8_t, std::uint8_t sgid_index, const std::array<std::uint8_t, 16>&,
                   std::uint8_t, std::array<std::uint8_t, 6>* mac) override {
    calls.push_back("resolve_rmac");
    *mac = {0x02, 0, 0, 0, 0, sgid_index};
    return 0;
  }
  void* alloc_queue_memory(std::size_t bytes) override {
    calls.push_back("alloc_queue_memory");
    void* p = std::aligned_alloc(64 << 10, bytes);  // host memory standing in for cudaMalloc
    std::memset(p, 0, bytes);
    memory.insert(p);
    return p;
  }
  void free_queue_memory(void* p) override {
    calls.push_back("free_queue_memory");
    EXPECT_EQ(memory.erase(p), 1u);
    std::free(p);
  }
  void write_queue_memory(void* dst, const void* src, std::size_t bytes) override {
    calls.push_back("write_queue_memory");
    std::memcpy(dst, src, bytes);
  }

  ~Recorder() override {
    for (void* p : memory) std::free(p);
  }

 private:
  std::uint64_t doorbell_ = 0;

  int give_umem(Umem* u) {
    ++umems;
    u->handle = reinterpret_cast<void*>(std::uintptr_t{0x3000} + umems);
    u->id = 0x50 + umems;
    return 0;
  }
  int fail(std::span<std::uint8_t> out) {
    prm::set(out, prm::create_cq_out::status, fail_status);
    prm::set(out, prm::create_cq_out::syndrome, fail_syndrome);
    return EINVAL;
  }

  /// Records "<call> <OPCODE>" and checks that no bit outside the command's fields is set.
  std::uint16_t check(std::span<const std::uint8_t> in, const char* call) {
    const auto op = static_cast<std::uint16_t>(prm::get(in, prm::create_cq_in::opcode));
    const char* layout = nullptr;
    std::size_t bytes = 0;
    switch (op) {
      case prm::kOpQueryHcaCap: layout = "query_hca_cap_in", bytes = prm::query_hca_cap_in::kBytes; break;
      case prm::kOpCreateCq: layout = "create_cq_in", bytes = prm::create_cq_in::kBytes; break;
      case prm::kOpCreateQp: layout = "create_qp_in", bytes = prm::create_qp_in::kBytes; break;
      case prm::kOpRst2InitQp: layout = "rst2init_qp_in", bytes = prm::modify_qp_in::kBytes; break;
      case prm::kOpInit2RtrQp: layout = "init2rtr_qp_in", bytes = prm::modify_qp_in::kBytes; break;
      case prm::kOpRtr2RtsQp: layout = "rtr2rts_qp_in", bytes = prm::modify_qp_in::kBytes; break;
      case prm::kOp2ErrQp: layout = "qp_2err_in", bytes = prm::qp_2err_in::kBytes; break;
      case prm::kOpQueryQp: layout = "query_qp_in", bytes = prm::query_qp_in::kBytes; break;
      default: ADD_FAILURE() << call << ": unknown opcode 0x" << std::hex << op; return op;
    }
    calls.push_back(std::string(call) + " " + layout);
    EXPECT_EQ(in.size(), bytes) << layout;
    std::vector<std::uint8_t> allowed(in.size(), 0);
    const auto allow = [&](prm::Field f) {
      for (std::uint32_t b = f.bit; b < f.bit + f.width && b / 8 < allowed.size(); ++b)
        allowed[b / 8] |= static_cast<std::uint8_t>(0x80 >> (b % 8));
    };
    const std::string l = layout;
    const bool qp_cmd = l != "create_cq_in" && l != "query_hca_cap_in" && l != "qp_2err_in" && l != "query_qp_in";
    for (const prm::Entry& e : prm::kTable) {
      const std::string el = e.layout;
      // Context fields count only where the command carries that context.
      if (el == l && std::string(e.name) != "qpc" && std::string(e.name) != "cq_context") allow(e.field);
      if (el == "cqc" && l == "create_cq_in") allow(prm::at(prm::create_cq_in::cq_context, e.field));
      if (el == "qpc" && qp_cmd && std::string(e.name) != "primary_address_path")
        allow(prm::at(prm::create_qp_in::qpc, e.field));
      if (el == "ads" && qp_cmd)
        allow(prm::at(prm::create_qp_in::qpc, prm::at(prm::qpc::primary_address_path, e.field)));
    }
    for (std::size_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(in[i] & ~allowed[i], 0) << layout << ": reserved bits set in byte " << i;
    last_in[op].assign(in.begin(), in.end());
    return op;
  }
};

}  // namespace gv::mlx5::devx::test
