// The proxy mode: a host thread rings the doorbells of QPs whose posters cannot reach the
// doorbell register themselves (a GPU the driver will not let map it, or host threads, whose
// writes to the write-combined UAR page need a flush the device API does not issue). Posters
// store the doorbell value into a word of ordinary memory; the thread sees the send record move,
// checks the word names the WQE that ends there (proxy_should_ring), and writes the word to the
// register followed by a store fence. NVSHMEM and DOCA GPUNetIO have the same fallback.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace gv::detail::mlx5 {

class DoorbellProxy {
 public:
  DoorbellProxy() = default;
  ~DoorbellProxy();
  DoorbellProxy(const DoorbellProxy&) = delete;
  DoorbellProxy& operator=(const DoorbellProxy&) = delete;

  /// Ring `reg` for QP `qpn` whenever its send record (`snd_record`, big-endian, in host memory)
  /// moves past a post whose doorbell value the poster left in `word`. Starts the thread.
  void add(std::uint32_t qpn, std::uint64_t* word, std::uint32_t* snd_record, void* reg);
  /// After it returns, the thread will not touch the QP's record, word or register again.
  void remove(std::uint32_t qpn);

 private:
  struct Entry {
    std::uint32_t qpn;
    std::uint64_t* word;
    std::uint32_t* record;
    std::uint64_t* reg;  ///< MMIO: written with one 8-byte store, never read
    std::uint16_t last_rung;
  };
  void run();

  std::mutex mu_;
  std::vector<Entry> entries_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gv::detail::mlx5
