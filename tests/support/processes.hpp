// The multi-process tests' helpers (label mp; tests/README.md): a child of the test binary
// itself, a bounded wait for a child, and a command line run with its output. Every wait is
// bounded: a hung child fails its test instead of hanging the suite.
#pragma once
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gvt {

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

/// A command line's exit code (128 + signal if it was killed), its stdout and stderr together,
/// and how long it took.
struct Outcome {
  int code = -1;
  std::string out;
  double seconds = 0;
};

/// Runs `cmd` through the shell and waits for it; the command bounds its own time (the
/// programs under test take a time limit, e.g. GV_BOOTSTRAP_TIMEOUT, and ctest's TIMEOUT
/// ends the test otherwise).
inline Outcome run_command(const std::string& cmd) {
  Outcome r;
  const auto t0 = std::chrono::steady_clock::now();
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace gvt
