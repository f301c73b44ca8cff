// Family 1, explicit copies (Comm|Scope's cudaMemcpyAsync_* and cudaMemcpyPeerAsync_*):
// pageable, pinned, registered and write-combined host memory each way, `_flush` variants,
// duplex, GPU to GPU on one device, and GPU to GPU between peers with and without peer access.
#include <cstdio>

#include "family.hpp"
#include "host_env.hpp"

namespace gv::scope {
namespace {

/// One side of a copy: a buffer and the GPU it belongs to (host kinds: the row's GPU).
struct End {
  Mem kind;
  int gpu;
};

bool on_host(Mem m) { return m != Mem::kDevice; }

class CopyCase final : public Case {
 public:
  CopyCase(End src, End dst, std::uint64_t bytes, bool flush, bool duplex, bool peer_api)
      : flush_(flush), duplex_(duplex), peer_api_(peer_api), src_end_(src), dst_end_(dst), bytes_(bytes) {
    for (int d = 0; d < (duplex ? 2 : 1); ++d) {
      const End a = d == 0 ? src : dst, b = d == 0 ? dst : src;
      src_.emplace_back(a.kind, bytes, a.gpu);
      dst_.emplace_back(b.kind, bytes, b.gpu);
      fill(src_.back(), 0x5c09e + static_cast<std::uint64_t>(d));
      fill(dst_.back(), 0xdead);  // poisoned: a copy that moves nothing fails verify()
    }
  }
  int streams() const override { return duplex_ ? 2 : 1; }
  bool holdable() const override { return src_end_.kind != Mem::kPageable && dst_end_.kind != Mem::kPageable; }
  int max_reps() const override { return 64; }
  std::uint64_t bytes() const override { return bytes_ * (duplex_ ? 2 : 1); }

  void enqueue(int i, cudaStream_t s) override {
    const auto k = static_cast<std::size_t>(i);
    const End from = i == 0 ? src_end_ : dst_end_, to = i == 0 ? dst_end_ : src_end_;
    if (peer_api_) {
      cuda_check(cudaMemcpyPeerAsync(dst_[k].device(), to.gpu, src_[k].device(), from.gpu, bytes_, s),
                 "cudaMemcpyPeerAsync");
    } else {
      cuda_check(cudaMemcpyAsync(ptr(dst_[k]), ptr(src_[k]), bytes_, cudaMemcpyDefault, s), "cudaMemcpyAsync");
    }
  }

  void before() override {
    if (!flush_) return;
    for (auto* v : {&src_, &dst_})
      for (const Buffer& b : *v)
        if (b.host() != nullptr) (void)flush_cache(b.host(), b.bytes());
  }

  void verify() override {
    for (std::size_t k = 0; k < src_.size(); ++k)
      if (sum(src_[k]) != sum(dst_[k]))
        throw Error("copy verification failed: destination checksum differs from the source's (" +
                    std::string(mem_name(src_[k].kind())) + " to " + mem_name(dst_[k].kind()) + ")");
  }

 private:
  static void* ptr(const Buffer& b) { return b.host() != nullptr && b.kind() != Mem::kManaged ? b.host() : b.device(); }
  std::uint64_t sum(const Buffer& b) {
    if (on_host(b.kind())) return checksum_host(b.host(), bytes_);
    detail::DeviceGuard g(b.gpu());
    return checksum_device(b.device(), bytes_, nullptr);
  }
  void fill(Buffer& b, std::uint64_t seed) {
    if (on_host(b.kind())) return fill_host(b.host(), bytes_, seed);
    detail::DeviceGuard g(b.gpu());
    fill_device(b.device(), bytes_, seed, nullptr);
  }
  bool flush_, duplex_, peer_api_;
  End src_end_, dst_end_;
  std::uint64_t bytes_;
  std::vector<Buffer> src_, dst_;
};

void host_gpu(const Plan& plan, const Where& w, Mem host, bool flush) {
  const std::string h = mem_name(host), f = flush ? "_flush" : "";
  add_sized(plan, "cudaMemcpyAsync_" + h + "ToGPU" + f, w, [=](const Where& x, std::uint64_t n) {
    return std::make_unique<CopyCase>(End{host, x.gpu}, End{Mem::kDevice, x.gpu}, n, flush, false, false);
  }, kMinLog2, kMaxLog2, flush);
  add_sized(plan, "cudaMemcpyAsync_GPUTo" + h + f, w, [=](const Where& x, std::uint64_t n) {
    return std::make_unique<CopyCase>(End{Mem::kDevice, x.gpu}, End{host, x.gpu}, n, flush, false, false);
  }, kMinLog2, kMaxLog2, flush);
}

}  // namespace

void register_copies(const Plan& plan) {
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    const Where w{plan.numa_of_gpu[i], plan.gpus[i]};
    for (const Mem m : {Mem::kPageable, Mem::kPinned, Mem::kRegistered, Mem::kWc}) host_gpu(plan, w, m, false);
    for (const Mem m : {Mem::kPageable, Mem::kPinned, Mem::kRegistered}) host_gpu(plan, w, m, true);
    for (const Mem m : {Mem::kPageable, Mem::kPinned})
      add_sized(plan, std::string("cudaMemcpyAsync_Duplex_") + mem_name(m), w, [=](const Where& x, std::uint64_t n) {
        return std::make_unique<CopyCase>(End{m, x.gpu}, End{Mem::kDevice, x.gpu}, n, false, true, false);
      });
    add_sized(plan, "cudaMemcpyAsync_GPUToGPU", w, [](const Where& x, std::uint64_t n) {
      return std::make_unique<CopyCase>(End{Mem::kDevice, x.gpu}, End{Mem::kDevice, x.gpu}, n, false, false, false);
    });
  }
  const auto pairs = peer_pairs(plan);
  if (pairs.empty()) {
    std::fprintf(stderr, "gv_scope: peer copy families not registered: %zu GPU(s) chosen, they need two that reach each other\n",
                 plan.gpus.size());
    return;
  }
  for (const auto& [a, b] : pairs) {
    const Where w{0, a, b};
    for (const bool access : {true, false}) {
      const std::string sfx = access ? "Peer" : "";
      const auto set_access = [a, b, access] {
        peer_access(a, b, access);
        peer_access(b, a, access);
      };
      add_sized(plan, "cudaMemcpyPeerAsync_GPUToGPU" + sfx, w, [=](const Where& x, std::uint64_t n) {
        set_access();
        return std::make_unique<CopyCase>(End{Mem::kDevice, x.gpu}, End{Mem::kDevice, x.peer}, n, false, false, true);
      }, kMinLog2, kMaxLog2);
      add_sized(plan, "cudaMemcpyPeerAsync_Duplex_GPUGPU" + sfx, w, [=](const Where& x, std::uint64_t n) {
        set_access();
        return std::make_unique<CopyCase>(End{Mem::kDevice, x.gpu}, End{Mem::kDevice, x.peer}, n, false, true, true);
      }, kMinLog2, kMaxLog2);
    }
  }
}

}  // namespace gv::scope
