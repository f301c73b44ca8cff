// A loopback pair for the GPU tests: two QPs of one device, connected to each other, each with
// one CQ for its sends and receives.
#pragma once
#include <cstdint>
#include <memory>

#include <gpuverbs/host/verbs.hpp>

namespace gvt {

/// Creates cq[i] (cq_entries deep) and qp[i] (caps) for i = 0, 1 and connects qp[0] with qp[1].
inline void connect_loopback(gv::Device& dev, gv::ProtectionDomain& pd, std::uint32_t cq_entries,
                             const gv::QpCaps& caps, std::unique_ptr<gv::CompletionQueue> (&cq)[2],
                             std::unique_ptr<gv::QueuePair> (&qp)[2]) {
  for (int i = 0; i < 2; ++i) {
    cq[i] = dev.create_cq(cq_entries);
    qp[i] = pd.create_qp(*cq[i], *cq[i], caps);
  }
  qp[0]->connect(qp[1]->info());
  qp[1]->connect(qp[0]->info());
}

}  // namespace gvt
