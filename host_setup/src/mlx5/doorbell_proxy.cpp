// doorbell_proxy.hpp.
#include "doorbell_proxy.hpp"

#include <algorithm>

#include <gpuverbs/endian.hpp>

#include "translate.hpp"

namespace gv::detail::mlx5 {

DoorbellProxy::~DoorbellProxy() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void DoorbellProxy::add(std::uint32_t qpn, std::uint64_t* word, std::uint32_t* snd_record, void* reg) {
  std::scoped_lock lk(mu_);
  const auto rec = static_cast<std::uint16_t>(
      be32{std::atomic_ref<std::uint32_t>(*snd_record).load(std::memory_order_acquire)}.get());
  entries_.push_back(Entry{qpn, word, snd_record, static_cast<std::uint64_t*>(reg), rec});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void DoorbellProxy::remove(std::uint32_t qpn) {
  std::scoped_lock lk(mu_);  // the thread scans under the lock: once we hold it, it is between scans
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.qpn == qpn; }),
                 entries_.end());
}

void DoorbellProxy::run() {
  std::uint32_t idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool rang = false;
    {
      std::scoped_lock lk(mu_);
      for (Entry& e : entries_) {
        // The record is released after the WQEs (wqe_visible_before_dbrec), the word after the
        // record (dbrec_before_doorbell): acquiring the record makes the WQEs visible here and so
        // to the HCA, which reads host memory coherently.
        const std::uint32_t raw = std::atomic_ref<std::uint32_t>(*e.record).load(std::memory_order_acquire);
        const auto rec = static_cast<std::uint16_t>(be32{raw}.get());
        if (rec == e.last_rung) continue;
        const std::uint64_t w = std::atomic_ref<std::uint64_t>(*e.word).load(std::memory_order_acquire);
        if (!proxy_should_ring(w, rec, e.last_rung)) continue;  // the poster's word is not there yet
        std::atomic_thread_fence(std::memory_order_seq_cst);  // record and WQEs before the MMIO write
        std::atomic_ref<std::uint64_t>(*e.reg).store(w, std::memory_order_relaxed);  // one 8-byte store
        std::atomic_thread_fence(std::memory_order_seq_cst);  // flushes the write-combining buffer
        e.last_rung = rec;
        rang = true;
      }
    }
    if (rang) {
      idle = 0;
    } else if (++idle > 4096) {
      std::this_thread::yield();
    }
  }
}

}  // namespace gv::detail::mlx5
