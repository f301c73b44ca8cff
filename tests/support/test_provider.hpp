// The provider end-to-end tests open: GV_TEST_PROVIDER (default "soft"). tests/nic runs the same
// tests with GV_TEST_PROVIDER=mlx5 on a loopback pair of one ConnectX port.
#pragma once
#include <cstdlib>
#include <memory>
#include <string>

#include <gpuverbs/host/verbs.hpp>

namespace gvt {

inline std::string test_provider() {
  const char* p = std::getenv("GV_TEST_PROVIDER");
  return p == nullptr || *p == '\0' ? "soft" : p;
}

/// Opens the test provider; null with `why` set when it names a NIC this machine lacks (the
/// caller skips with that reason). Any other failure to open throws: a present NIC must open.
inline std::unique_ptr<gv::Device> open_test_device(const gv::DeviceOptions& o, std::string& why) {
  const std::string p = test_provider();
  if (p != "soft" && gv::Device::list().size() == 1) {
    why = "GV_TEST_PROVIDER=" + p + ": no mlx5 device with an ACTIVE port on this machine (gv_devices lists what there is)";
    return nullptr;
  }
  return gv::Device::open(p, o);
}

}  // namespace gvt
