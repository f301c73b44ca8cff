// The provider interface behind gv::Device: who creates queues and executes work requests.
// Internal to host_setup; the public classes in verbs.hpp validate arguments and forward here.
#pragma once
#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/ib/encode.hpp>
#include <gpuverbs/ib/handles.hpp>
#include <gpuverbs/ib/ring.hpp>

namespace gv::detail {

/// "0x41": how host_setup's messages print QPNs, keys and addresses.
inline std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof(b), "0x%" PRIx64, v);
  return b;
}

struct CqDesc {
  std::uint32_t cqn = 0;
  std::uint32_t entries = 0;
};

/// Everything create_qp decides before the provider builds the queues.
struct QpLayout {
  std::uint32_t pdn = 0;
  std::uint32_t send_cqn = 0, recv_cqn = 0;
  std::uint32_t sq_bbs = 0, rq_wqes = 0, rq_stride_shift = 0;
  QpCaps caps;
};

/// Send WQEBBs for `caps`: room for sq_depth of the largest WQE they allow (SGEs after ctrl+raddr,
/// an atomic's 4 octowords, or inline data after ctrl+raddr), a power of two. Every provider that
/// sizes its own send queue (the soft provider, mlx5's GPU placement) sizes it so.
inline std::uint32_t sq_wqebbs(const QpCaps& caps) {
  const std::uint32_t ds_sge = 2 + caps.max_send_sge;
  const std::uint32_t ds_inline = 2 + (4 + caps.max_inline + 15) / 16;
  const std::uint32_t ds_max = std::max({ds_sge, ds_inline, std::uint32_t{4}});
  return static_cast<std::uint32_t>(ib::round_up_pow2(std::uint64_t{caps.sq_depth} * ib::wqe_bbs(ds_max)));
}

struct QpConnect {
  QpInfo remote;
  std::uint8_t min_rnr_timer = 12;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual const std::string& name() const = 0;
  /// Device::describe(): the name, unless the provider has more to say (engine, placement).
  virtual std::string describe() const { return name(); }

  virtual void* alloc(std::size_t bytes) = 0;
  virtual void free(void* p) = 0;

  virtual std::uint32_t alloc_pd() = 0;
  virtual void dealloc_pd(std::uint32_t pdn) = 0;
  /// Returns the key (lkey == rkey).
  virtual std::uint32_t reg_mr(std::uint32_t pdn, void* addr, std::size_t len,
                               std::uint32_t access) = 0;
  virtual void dereg_mr(std::uint32_t key) = 0;

  virtual CqDesc create_cq(std::uint32_t entries) = 0;
  virtual void destroy_cq(std::uint32_t cqn) = 0;
  /// Handle without the QP bindings (filled by the caller).
  virtual ib::CqHandle cq_handle(std::uint32_t cqn) const = 0;

  virtual std::uint32_t create_qp(const QpLayout& layout) = 0;
  virtual void destroy_qp(std::uint32_t qpn) = 0;
  virtual QpState qp_state(std::uint32_t qpn) const = 0;
  virtual QpInfo qp_info(std::uint32_t qpn) const = 0;
  virtual void modify_to_init(std::uint32_t qpn, std::uint32_t access) = 0;
  virtual void modify_to_rtr(std::uint32_t qpn, const QpConnect& c) = 0;
  virtual void modify_to_rts(std::uint32_t qpn, std::uint8_t rnr_retry) = 0;
  virtual void modify_to_error(std::uint32_t qpn) = 0;
  virtual ib::QpHandle qp_handle(std::uint32_t qpn) const = 0;

  virtual std::optional<AsyncEvent> poll_async_event() = 0;
  virtual void abort() = 0;
  virtual void quiesce() = 0;
  virtual void resume() = 0;
};

std::unique_ptr<Provider> open_soft_provider(const DeviceOptions& opt);
/// A ConnectX HCA through rdma-core (src/mlx5/); `name` is "mlx5" or a device name.
std::unique_ptr<Provider> open_mlx5_provider(std::string_view name, const DeviceOptions& opt);
/// The names of the mlx5 devices with an ACTIVE port (empty without rdma-core or devices).
std::vector<std::string> list_mlx5_devices();
/// gv_devices' text: every RDMA device with its ports (state, link layer, LID, MTU) and GIDs,
/// or a line saying there is none (or that this build has no mlx5 provider).
std::string rdma_device_report();

}  // namespace gv::detail
