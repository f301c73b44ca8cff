// Placement kGpu of the mlx5 provider: CQs and RC QPs whose rings and doorbell records live in
// GPU memory, built with DEVX PRM commands behind the provider's QueueFactory (../queues.hpp).
// The setup sequence, every device call through one Seam:
//
//   factory:   QUERY_HCA_CAP general + atomic (refuse what the device API cannot use), the EQ
//   create_cq: queue memory (64 KiB aligned, zeroed, CQEs invalid) -> UMEM (dma-buf, else
//              nvidia_peermem) -> a UAR of its own that the GPU never rings -> CREATE_CQ
//   create_qp: PD number -> queue memory (RQ, SQ, record) -> UMEM -> a UAR (NC dedicated, NC,
//              then BF) -> CREATE_QP (RC, a real RQ)
//   query_state: QUERY_QP; to_init / to_rtr / to_rts / to_error: RST2INIT_QP, INIT2RTR_QP (RoCE: the MAC through an
//              address handle), RTR2RTS_QP, 2ERR_QP; a failed command's status and syndrome are
//              in the gv::Error it throws
//
// Rings and records come back as device addresses (placement kGpu); the provider maps the
// doorbell register (QpRings::bf_reg) for the GPU, or rings it from its proxy.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "../queues.hpp"
#include "commands.hpp"
#include "seam.hpp"

namespace gv::mlx5::devx {

struct GpuQueueOptions {
  int gpu = 0;                      ///< the CUDA device whose memory holds the rings and records
  std::uint32_t eq_vector = 0;      ///< completion vector whose EQ the CQs report to
  bool cq_overrun_ignore = false;   ///< cqc.oi: the NIC does not check the CQ consumer index
};

/// The factory keeps `seam` by reference: the seam outlives it. describe() says what it chose
/// (UMEM path, UAR type, capabilities) once queues exist.
class GpuQueueFactory final : public detail::mlx5::QueueFactory {
 public:
  /// Queries and checks the device's capabilities and the EQ; throws gv::Error naming what is
  /// missing (and the setting to change) before anything is allocated.
  GpuQueueFactory(Seam& seam, const GpuQueueOptions& opt);

  detail::mlx5::Placement placement() const override { return detail::mlx5::Placement::kGpu; }
  std::unique_ptr<detail::mlx5::CqQueue> create_cq(std::uint32_t entries) override;
  std::unique_ptr<detail::mlx5::QpQueue> create_qp(const detail::mlx5::QpRequest& req,
                                                   detail::mlx5::CqQueue& send,
                                                   detail::mlx5::CqQueue& recv) override;

  const HcaCaps& caps() const { return caps_; }
  /// "placement gpu: rings and records in GPU memory (DEVX); UMEM dma-buf; UAR nc_dedicated; ..."
  std::string describe() const;

 private:
  friend class GpuCq;
  friend class GpuQp;
  friend struct DevxResources;
  /// GPU memory registered as one UMEM (ring and record share it at different offsets).
  struct Memory {
    void* base = nullptr;
    std::size_t bytes = 0;
    Umem umem;
  };
  Memory alloc_registered(std::size_t bytes, const char* what);
  void release(Memory& m);
  Uar alloc_uar(const char* what);

  Seam& seam_;
  GpuQueueOptions opt_;
  HcaCaps caps_;
  std::uint32_t eqn_ = 0;
  std::string umem_path_ = "none yet";
  std::string uar_type_ = "none yet";
};

}  // namespace gv::mlx5::devx
