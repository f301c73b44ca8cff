// The one seam between the GPU-ring setup sequence (queues.hpp) and everything that reaches a
// device: DEVX commands, UMEM registration, UAR allocation, EQ lookup, the address handle that
// resolves a RoCE MAC, and the GPU memory the rings live in. (Mapping the doorbell register for
// the GPU, and the proxy when that is refused, stay with the provider: QpRings::bf_reg.)
// rdma_seam.cpp implements it over rdma-core (libibverbs + libmlx5) and the CUDA runtime; the unit tests implement it with a
// recorder that checks each command buffer against prm.hpp's layouts and the order of calls.
//
// Calls return 0 or an errno (a DEVX command's output buffer then holds its status and syndrome);
// handles are opaque to the caller.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

struct ibv_pd;

namespace gv::mlx5::devx {

/// mlx5dv_devx_alloc_uar's types, in the order the setup tries them: non-cached dedicated
/// (its own page, no BlueFlame sharing), non-cached, then BlueFlame (write-combined).
enum class UarType : std::uint8_t { kNcDedicated, kNc, kBf };
const char* to_string(UarType t);

struct Uar {
  void* handle = nullptr;
  std::uint32_t page_id = 0;     ///< the UAR page number commands name (uar_page)
  void* reg_addr = nullptr;      ///< host mapping of the doorbell register
  void* base_addr = nullptr;     ///< host mapping of the page
  UarType type = UarType::kNc;   ///< what alloc_uar was asked for
};

struct Umem {
  void* handle = nullptr;
  std::uint32_t id = 0;
};

/// How UMEMs reach GPU memory: a dma-buf of the range, or nvidia_peermem's peer mapping.
enum class UmemPath : std::uint8_t { kDmaBuf, kPeerMem };

class Seam {
 public:
  virtual ~Seam() = default;

  // DEVX commands (mlx5dv_devx_general_cmd, _obj_create, _obj_modify, _obj_query, _obj_destroy).
  virtual int general_cmd(std::span<const std::uint8_t> in, std::span<std::uint8_t> out) = 0;
  virtual int obj_create(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, void** obj) = 0;
  virtual int obj_modify(void* obj, std::span<const std::uint8_t> in, std::span<std::uint8_t> out) = 0;
  virtual int obj_query(void* obj, std::span<const std::uint8_t> in, std::span<std::uint8_t> out) = 0;
  virtual int obj_destroy(void* obj) = 0;

  /// mlx5dv_devx_umem_reg_ex over a dma-buf of [addr, addr + len) (`why` says why there is none).
  virtual int umem_reg_dmabuf(void* addr, std::size_t len, Umem* umem, std::string* why) = 0;
  /// mlx5dv_devx_umem_reg on the address itself (GPU memory needs nvidia_peermem).
  virtual int umem_reg(void* addr, std::size_t len, Umem* umem) = 0;
  virtual int umem_dereg(const Umem& umem) = 0;

  virtual int alloc_uar(UarType type, Uar* uar) = 0;
  virtual void free_uar(const Uar& uar) = 0;
  virtual int query_eqn(std::uint32_t vector, std::uint32_t* eqn) = 0;
  /// The PD number of `pd` (mlx5dv_init_obj(PD)).
  virtual int pdn(ibv_pd* pd, std::uint32_t* pdn) = 0;
  /// RoCE: the MAC of the next hop to `gid` from GID index `sgid_index`, through an address
  /// handle on `pd` (ibv_create_ah + mlx5dv_init_obj(AH)).
  virtual int resolve_rmac(ibv_pd* pd, std::uint8_t port, std::uint8_t sgid_index, const std::array<std::uint8_t, 16>& gid,
                           std::uint8_t hop_limit, std::array<std::uint8_t, 6>* mac) = 0;

  /// Queue memory: 64 KiB aligned, zeroed, a multiple of 64 KiB (GPU memory in the real seam).
  /// Throws gv::Error with the reason when there is none.
  virtual void* alloc_queue_memory(std::size_t bytes) = 0;
  virtual void free_queue_memory(void* p) = 0;
  /// Copy host bytes into queue memory (CQEs initialised invalid).
  virtual void write_queue_memory(void* dst, const void* src, std::size_t bytes) = 0;
};

}  // namespace gv::mlx5::devx
