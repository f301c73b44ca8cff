// Our PRM field tables (host_setup/src/mlx5/devx/prm.hpp) checked two independent ways:
// (a) against the kernel's include/linux/mlx5/mlx5_ifc.h, read at test time: a C program that
//     includes it prints each field's bit offset and width (offsetof / sizeof over its u8 bit
//     arrays), and every field both define must agree;
// (b) the DEVX fields that header lacks, against rdma-core's own DEVX test layouts.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <unistd.h>

#include "mlx5/devx/prm.hpp"

namespace prm = gv::mlx5::devx::prm;

namespace {

std::string kernel_name(const prm::Entry& e) { return e.kernel == prm::Kernel::kInside ? e.kernel_name : e.name; }

/// {layout.name -> (bit, width)} as the kernel header lays them out, or a reason it cannot.
std::map<std::string, prm::Field> kernel_layout(std::string& why) {
  const std::string include = GV_KERNEL_IFC_INCLUDE;
  if (include.empty() || !std::filesystem::exists(include + "/linux/mlx5/mlx5_ifc.h")) {
    why = "the kernel's linux/mlx5/mlx5_ifc.h is not installed (Debian: apt-get install "
          "linux-headers-<version>-common; scripts/setup.sh does)";
    return {};
  }
  const std::string cc = GV_C_COMPILER;
  if (cc.empty()) {
    why = "no C compiler was found at configure time to read mlx5_ifc.h";
    return {};
  }
  const auto dir = std::filesystem::temp_directory_path() / ("gv_devx_prm_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream src(dir / "ifc.c");
  // Shims for what the kernel's types.h would give; the header's structs are arrays of u8, one
  // element per bit, so offsetof and sizeof count bits.
  src << "#include <stddef.h>\n#include <stdio.h>\n#include <stdint.h>\n"
         "typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;\n"
         "typedef uint32_t __be32; typedef uint64_t __be64;\n"
         "#define BIT(n) (1UL << (n))\n#define BIT_ULL(n) (1ULL << (n))\n"
         "#include <linux/mlx5/mlx5_ifc.h>\n"
         "#define P(s, f) printf(\"%s.%s %zu %zu\\n\", #s, #f, offsetof(struct mlx5_ifc_##s##_bits, f), "
         "sizeof(((struct mlx5_ifc_##s##_bits*)0)->f))\nint main(void) {\n";
  for (const prm::Entry& e : prm::kTable)
    if (e.kernel != prm::Kernel::kDevxOnly) src << "  P(" << e.layout << ", " << kernel_name(e) << ");\n";
  src << "  return 0;\n}\n";
  src.close();
  const std::string exe = (dir / "ifc").string();
  const std::string cmd = cc + " -std=gnu11 -w -I" + include + " " + (dir / "ifc.c").string() + " -o " + exe + " 2>&1";
  std::string log;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) log += buf;
    if (::pclose(p) != 0) ADD_FAILURE() << "compiling the mlx5_ifc.h reader failed (a field name we "
                                           "claim the kernel defines is missing?):\n" << log;
  }
  std::map<std::string, prm::Field> out;
  if (FILE* p = ::popen(exe.c_str(), "r")) {
    char name[256];
    unsigned long bit = 0, width = 0;
    while (std::fscanf(p, "%255s %lu %lu", name, &bit, &width) == 3)
      out[name] = prm::Field{static_cast<std::uint32_t>(bit), static_cast<std::uint32_t>(width)};
    (void)::pclose(p);
  }
  std::filesystem::remove_all(dir);
  return out;
}

TEST(DevxPrm, AgreesWithTheKernelsMlx5Ifc) {
  std::string why;
  const auto kernel = kernel_layout(why);
  if (!why.empty()) GTEST_SKIP() << why;
  ASSERT_FALSE(kernel.empty()) << "the mlx5_ifc.h reader printed nothing";
  int checked = 0;
  for (const prm::Entry& e : prm::kTable) {
    if (e.kernel == prm::Kernel::kDevxOnly) continue;
    const std::string key = std::string(e.layout) + "." + kernel_name(e);
    const auto it = kernel.find(key);
    ASSERT_NE(it, kernel.end()) << key;
    const prm::Field k = it->second;
    if (e.kernel == prm::Kernel::kSame) {
      EXPECT_EQ(e.field.bit, k.bit) << key << " offset";
      EXPECT_EQ(e.field.width, k.width) << key << " width";
    } else {  // ours is the low end of the kernel's wider field
      EXPECT_GE(e.field.bit, k.bit) << key;
      EXPECT_EQ(e.field.bit + e.field.width, k.bit + k.width) << key;
    }
    ++checked;
  }
  EXPECT_GT(checked, 80);
}

/// Offsets from rdma-core's tests/mlx5_prm_structs.py (classes CreateCqIn/SwCqc and
/// CreateQpIn/SwQpc; linux-rdma/rdma-core at 691953d8, 2026-08-20), summed over its BitFields:
/// bit offsets within the whole command.
struct RdmaCoreField {
  const char* name;
  prm::Field ours;
  std::uint32_t bit, width;
};

TEST(DevxPrm, DevxFieldsAgreeWithRdmaCoresLayouts) {
  using namespace prm;
  const auto cq = [](Field f) { return at(create_cq_in::cq_context, f); };
  const auto qp = [](Field f) { return at(create_qp_in::qpc, f); };
  const RdmaCoreField fields[] = {
      {"CreateCqIn.sw_cqc.dbr_umem_id", cq(cqc::dbr_umem_id), 160, 32},
      {"CreateCqIn.sw_cqc.c_eqn", cq(cqc::c_eqn), 312, 8},
      {"CreateCqIn.sw_cqc.dbr_umem_valid", cq(cqc::dbr_umem_valid), 134, 1},
      {"CreateCqIn.e_mtt_pointer_or_cq_umem_offset", create_cq_in::cq_umem_offset, 640, 64},
      {"CreateCqIn.cq_umem_id", create_cq_in::cq_umem_id, 704, 32},
      {"CreateCqIn.cq_umem_valid", create_cq_in::cq_umem_valid, 736, 1},
      {"CreateQpIn.sw_qpc.dbr_umem_id", qp(qpc::dbr_umem_id), 2016, 32},
      {"CreateQpIn.sw_qpc.dbr_umem_valid", qp(qpc::dbr_umem_valid), 1859, 1},
      {"CreateQpIn.sw_qpc.dbr_addr", qp(qpc::dbr_addr), 1472, 64},
      {"CreateQpIn.e_mtt_pointer_or_wq_umem_offset", create_qp_in::wq_umem_offset, 2048, 64},
      {"CreateQpIn.wq_umem_id", create_qp_in::wq_umem_id, 2112, 32},
      {"CreateQpIn.wq_umem_valid", create_qp_in::wq_umem_valid, 2144, 1},
      {"CreateQpIn.sw_qpc.primary_address_path.rmac", qp(at(qpc::primary_address_path, ads::rmac_47_32)), 688, 16},
      {"CreateQpIn.sw_qpc.primary_address_path.udp_sport", qp(at(qpc::primary_address_path, ads::udp_sport)), 656, 16},
  };
  for (const RdmaCoreField& f : fields) {
    EXPECT_EQ(f.ours.bit, f.bit) << f.name;
    EXPECT_EQ(f.ours.width, f.width) << f.name;
  }
  // Every field the kernel header lacks is among those checked here.
  int devx_only = 0;
  for (const Entry& e : kTable) devx_only += e.kernel == Kernel::kDevxOnly;
  EXPECT_EQ(devx_only, 6);
}

TEST(DevxPrm, SetAndGetRoundTripWithoutTouchingNeighbours) {
  std::array<std::uint8_t, 16> buf{};
  buf.fill(0xa5);
  const prm::Field f{0x43, 5};  // qpc.log_msg_max's position: bits 3..7 of dword 2
  prm::set(buf, f, 0x1e);
  EXPECT_EQ(prm::get(buf, f), 0x1eu);
  EXPECT_EQ(buf[8], 0xa0 | 0x1e);  // bits 0..2 kept (0b101), then 11110
  EXPECT_EQ(buf[9], 0xa5);
  const prm::Field wide{0x40, 64};
  prm::set(buf, wide, 0x0102030405060708ull);
  EXPECT_EQ(buf[8], 0x01);
  EXPECT_EQ(buf[15], 0x08);
  EXPECT_EQ(prm::get(buf, wide), 0x0102030405060708ull);
  EXPECT_FALSE(prm::fits(prm::Field{0, 3}, 8));
  EXPECT_TRUE(prm::fits(prm::Field{0, 3}, 7));
}

}  // namespace
