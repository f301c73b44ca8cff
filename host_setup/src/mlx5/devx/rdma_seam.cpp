#include "rdma_seam.hpp"

#include <cerrno>
#include <unistd.h>

#include <infiniband/mlx5dv.h>

#include "gpu_memory.hpp"

namespace gv::mlx5::devx {
namespace {

/// Ring and record UMEMs: the NIC writes CQEs and records and reads WQEs.
constexpr std::uint32_t kUmemAccess = IBV_ACCESS_LOCAL_WRITE;
/// Any page size from the host's up: the kernel picks the largest the dma-buf allows (what NVSHMEM
/// asks for too); a bitmap of 64 KiB alone would fail where the exporter hands out other pages.
std::uint64_t umem_page_sizes() {
  const long ps = ::sysconf(_SC_PAGESIZE);
  return ~std::uint64_t{0} & ~(static_cast<std::uint64_t>(ps > 0 ? ps : 4096) - 1);
}

class RdmaSeam final : public Seam {
 public:
  RdmaSeam(ibv_context* ctx, int gpu) : ctx_(ctx), gpu_(gpu) {}

  int general_cmd(std::span<const std::uint8_t> in, std::span<std::uint8_t> out) override {
    return mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), out.data(), out.size());
  }
  int obj_create(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, void** obj) override {
    errno = 0;
    mlx5dv_devx_obj* o = mlx5dv_devx_obj_create(ctx_, in.data(), in.size(), out.data(), out.size());
    *obj = o;
    return o ? 0 : (errno ? errno : EIO);
  }
  int obj_modify(void* obj, std::span<const std::uint8_t> in, std::span<std::uint8_t> out) override {
    return mlx5dv_devx_obj_modify(static_cast<mlx5dv_devx_obj*>(obj), in.data(), in.size(), out.data(), out.size());
  }
  int obj_query(void* obj, std::span<const std::uint8_t> in, std::span<std::uint8_t> out) override {
    return mlx5dv_devx_obj_query(static_cast<mlx5dv_devx_obj*>(obj), in.data(), in.size(), out.data(), out.size());
  }
  int obj_destroy(void* obj) override { return mlx5dv_devx_obj_destroy(static_cast<mlx5dv_devx_obj*>(obj)); }

  int umem_reg_dmabuf(void* addr, std::size_t len, Umem* umem, std::string* why) override {
    const int fd = gpu_dmabuf_fd(addr, len, why);
    if (fd < 0) return EOPNOTSUPP;
    mlx5dv_devx_umem_in in{};
    in.addr = nullptr;  // the offset into the dma-buf: it starts at addr
    in.size = len;
    in.access = kUmemAccess;
    in.pgsz_bitmap = umem_page_sizes();
    in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
    in.dmabuf_fd = fd;
    errno = 0;
    mlx5dv_devx_umem* u = mlx5dv_devx_umem_reg_ex(ctx_, &in);
    const int err = errno ? errno : EIO;
    ::close(fd);  // the registration holds its own reference to the dma-buf
    if (!u) {
      *why = "mlx5dv_devx_umem_reg_ex(dma-buf) failed: errno " + std::to_string(err);
      return err;
    }
    *umem = Umem{u, u->umem_id};
    return 0;
  }
  int umem_reg(void* addr, std::size_t len, Umem* umem) override {
    errno = 0;
    mlx5dv_devx_umem* u = mlx5dv_devx_umem_reg(ctx_, addr, len, kUmemAccess);
    if (!u) return errno ? errno : EIO;
    *umem = Umem{u, u->umem_id};
    return 0;
  }
  int umem_dereg(const Umem& umem) override {
    return mlx5dv_devx_umem_dereg(static_cast<mlx5dv_devx_umem*>(umem.handle));
  }

  int alloc_uar(UarType type, Uar* uar) override {
    std::uint32_t flags = 0;
    switch (type) {
      case UarType::kNcDedicated:
#ifdef MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED  // rdma-core 50 and later
        flags = MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED;
        break;
#else
        return EOPNOTSUPP;  // built against headers that predate it
#endif
      case UarType::kNc: flags = MLX5DV_UAR_ALLOC_TYPE_NC; break;
      case UarType::kBf: flags = MLX5DV_UAR_ALLOC_TYPE_BF; break;
    }
    errno = 0;
    mlx5dv_devx_uar* u = mlx5dv_devx_alloc_uar(ctx_, flags);
    if (!u) return errno ? errno : EIO;
    *uar = Uar{u, u->page_id, u->reg_addr, u->base_addr, type};
    return 0;
  }
  void free_uar(const Uar& uar) override { mlx5dv_devx_free_uar(static_cast<mlx5dv_devx_uar*>(uar.handle)); }
  int query_eqn(std::uint32_t vector, std::uint32_t* eqn) override { return mlx5dv_devx_query_eqn(ctx_, vector, eqn); }

  int pdn(ibv_pd* pd, std::uint32_t* pdn) override {
    mlx5dv_pd dv{};
    mlx5dv_obj obj{};
    obj.pd.in = pd;
    obj.pd.out = &dv;
    if (const int err = mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD)) return err;
    *pdn = dv.pdn;
    return 0;
  }

  int resolve_rmac(ibv_pd* pd, std::uint8_t port, std::uint8_t sgid_index, const std::array<std::uint8_t, 16>& gid,
                   std::uint8_t hop_limit, std::array<std::uint8_t, 6>* mac) override {
    ibv_ah_attr a{};  // every field set or zero: stray bits give EINVAL
    a.is_global = 1;
    a.port_num = port;
    std::copy(gid.begin(), gid.end(), a.grh.dgid.raw);
    a.grh.sgid_index = sgid_index;
    a.grh.hop_limit = hop_limit;
    errno = 0;
    ibv_ah* ah = ibv_create_ah(pd, &a);
    if (!ah) return errno ? errno : EIO;
    mlx5dv_ah dv{};
    mlx5dv_obj obj{};
    obj.ah.in = ah;
    obj.ah.out = &dv;
    const int err = mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH);
    if (err == 0) std::copy(std::begin(dv.av->rmac), std::end(dv.av->rmac), mac->begin());
    (void)ibv_destroy_ah(ah);
    return err;
  }

  void* alloc_queue_memory(std::size_t bytes) override { return gpu_queue_alloc(bytes, gpu_); }
  void free_queue_memory(void* p) override { gpu_queue_free(p); }
  void write_queue_memory(void* dst, const void* src, std::size_t bytes) override { gpu_queue_write(dst, src, bytes); }

 private:
  ibv_context* ctx_;
  int gpu_;  ///< the CUDA device whose memory holds the queues
};

/// Owns the seam its GpuQueueFactory works through (the member is built first).
struct SeamHolder {
  SeamHolder(ibv_context* ctx, int gpu) : seam(ctx, gpu) {}
  RdmaSeam seam;
};

class RdmaGpuQueueFactory final : private SeamHolder, public detail::mlx5::QueueFactory {
 public:
  RdmaGpuQueueFactory(ibv_context* ctx, const GpuQueueOptions& opt) : SeamHolder(ctx, opt.gpu), f_(seam, opt) {}
  detail::mlx5::Placement placement() const override { return f_.placement(); }
  std::unique_ptr<detail::mlx5::CqQueue> create_cq(std::uint32_t entries) override { return f_.create_cq(entries); }
  std::unique_ptr<detail::mlx5::QpQueue> create_qp(const detail::mlx5::QpRequest& req, detail::mlx5::CqQueue& send,
                                                   detail::mlx5::CqQueue& recv) override {
    return f_.create_qp(req, send, recv);
  }

 private:
  GpuQueueFactory f_;
};

}  // namespace

std::unique_ptr<detail::mlx5::QueueFactory> make_gpu_queue_factory(ibv_context* ctx, const GpuQueueOptions& opt) {
  if (ctx == nullptr || !mlx5dv_is_supported(ctx->device))
    throw Error("the GPU placement needs an mlx5 (ConnectX) device opened through rdma-core");
  return std::make_unique<RdmaGpuQueueFactory>(ctx, opt);
}

}  // namespace gv::mlx5::devx
