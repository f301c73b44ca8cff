// Shared by the GPU-engine test programs (test_gpu_engine*, one per fixture): the engine's
// options, host access to GPU buffers on a non-blocking stream, seeded bytes, and children of
// the test binary itself (for tests that need a process of their own).
//
// While a kGpu device is open its engine kernel is resident: these tests launch on
// non-blocking streams and synchronise those streams only, and allocate CUDA memory before
// opening the device (or while it is quiesced).
#pragma once
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <gpuverbs/host/verbs.hpp>

extern char** environ;

namespace gvt {

inline gv::DeviceOptions engine_on(int gpu) {
  gv::DeviceOptions o;
  o.engine = gv::DeviceOptions::Engine::kGpu;
  o.gpu = gpu;
  return o;
}

/// Host-side access to GPU buffers, on a non-blocking stream (never the legacy one).
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { (void)cudaStreamDestroy(s); }
  void put(void* dst, const void* src, std::size_t n) {
    ASSERT_EQ(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  std::vector<std::uint8_t> get(const void* src, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    EXPECT_EQ(cudaMemcpyAsync(v.data(), src, n, cudaMemcpyDefault, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    return v;
  }
  void sync() { ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess); }
};

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

inline constexpr std::uint32_t kAllAccess = gv::kLocalWrite | gv::kRemoteWrite | gv::kRemoteRead | gv::kRemoteAtomic;

// ---- Child processes ---------------------------------------------------------------------------
// Tests that need a process of their own (a second engine reached through CUDA IPC, a GPU filled
// on purpose, a CUDA context killed on purpose) spawn this binary again with a mode flag that
// main() dispatches on; the parent bounds the child's lifetime and reads its exit status.

/// Spawns this binary (/proc/self/exe, its argv[0] `name`) with `args`; fds[i] becomes the
/// child's descriptor 3 + i. The child's stdout and stderr are the parent's. -1 if the spawn
/// failed.
inline pid_t spawn_self(const char* name, const std::vector<std::string>& args, const std::vector<int>& fds = {}) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (std::size_t i = 0; i < fds.size(); ++i) posix_spawn_file_actions_adddup2(&fa, fds[i], static_cast<int>(3 + i));
  std::vector<std::string> all{name};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

struct ChildEnd {
  bool killed = false;  ///< still running at the limit: killed with SIGKILL
  bool lost = false;    ///< waitpid failed: the status is unknown
  int status = 0;       ///< waitpid status
  std::string text() const {
    if (killed) return "did not finish in time and was killed";
    if (lost) return "could not be waited for";
    if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("died of signal ") + strsignal(WTERMSIG(status));
    return "ended with wait status " + std::to_string(status);
  }
  bool ok() const { return !killed && !lost && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

/// Waits for child `pid` at most `limit`, then kills it: a hung child fails its test instead
/// of hanging the suite.
inline ChildEnd wait_child(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  ChildEnd end;
  for (;;) {
    const pid_t r = waitpid(pid, &end.status, WNOHANG);
    if (r == pid) return end;
    if (r < 0 && errno != EINTR) {
      end.lost = true;
      return end;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      (void)waitpid(pid, &end.status, 0);
      end.killed = true;
      return end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace gvt
