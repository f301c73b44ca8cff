// gvrun: start N ranks of a gpuverbs program on this host with the built-in TCP rendezvous.
//
//   gvrun -n 4 ./app args...
//
// Each rank gets GV_RANK, GV_SIZE and GV_ROOT=127.0.0.1:<a free port>. gvrun waits for all of
// them; when one fails (non-zero exit or a signal), the others notice through their World and
// end on their own, and gvrun ends any that are still running --kill-after seconds later. It
// exits 0 when every rank did, else with the first failure's code (128 + signal for a signal).
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: gvrun -n RANKS [--kill-after SECONDS] [--] PROGRAM [ARGS...]\n"
               "  Starts RANKS copies of PROGRAM with GV_RANK, GV_SIZE and GV_ROOT set for the built-in\n"
               "  TCP rendezvous of gpuverbs' World (World::init). If a rank fails, the rest are ended\n"
               "  SECONDS later (default 30) if they have not ended by then.\n");
}

bool parse_int(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

/// A port nobody listens on now (the kernel's choice for an ephemeral bind).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

}  // namespace

int main(int argc, char** argv) {
  long n = 0, kill_after = 30;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    }
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-n" && i + 1 < argc) {
      if (!parse_int(argv[++i], 1, 4096, n)) {
        std::fprintf(stderr, "gvrun: -n takes 1..4096\n");
        return 2;
      }
    } else if (a == "--kill-after" && i + 1 < argc) {
      if (!parse_int(argv[++i], 0, 86400, kill_after)) {
        std::fprintf(stderr, "gvrun: --kill-after takes 0..86400 seconds\n");
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "gvrun: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else {
      break;
    }
  }
  if (n == 0 || i >= argc) {
    usage(stderr);
    return 2;
  }
  const int port = free_port();
  if (port < 0) {
    std::fprintf(stderr, "gvrun: no free TCP port on 127.0.0.1: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string root = "127.0.0.1:" + std::to_string(port);
  std::vector<pid_t> pids;
  for (long r = 0; r < n; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string v = *e;
      if (v.rfind("GV_RANK=", 0) == 0 || v.rfind("GV_SIZE=", 0) == 0 || v.rfind("GV_ROOT=", 0) == 0) continue;
      env.push_back(v);
    }
    env.push_back("GV_RANK=" + std::to_string(r));
    env.push_back("GV_SIZE=" + std::to_string(n));
    env.push_back("GV_ROOT=" + root);
    std::vector<char*> envp;
    for (auto& v : env) envp.push_back(v.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int e = posix_spawnp(&pid, argv[i], nullptr, nullptr, argv + i, envp.data());
    if (e != 0) {
      std::fprintf(stderr, "gvrun: cannot start '%s': %s\n", argv[i], std::strerror(e));
      for (const pid_t p : pids) kill(p, SIGKILL);
      for (const pid_t p : pids) waitpid(p, nullptr, 0);
      return 1;
    }
    pids.push_back(pid);
  }
  int result = 0;
  long left = n;
  std::chrono::steady_clock::time_point deadline{};
  bool failing = false;
  while (left > 0) {
    int status = 0;
    const pid_t p = waitpid(-1, &status, failing ? WNOHANG : 0);
    if (p == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr, "gvrun: ending the %ld rank(s) still running %ld s after the first failure\n", left, kill_after);
        for (const pid_t q : pids)
          if (q > 0) kill(q, SIGKILL);
        failing = false;  // block in waitpid for the killed ones
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --left;
    long rank = -1;
    for (std::size_t k = 0; k < pids.size(); ++k)
      if (pids[k] == p) {
        rank = static_cast<long>(k);
        pids[k] = -1;
      }
    int code = 0;
    if (WIFEXITED(status)) code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) code = 128 + WTERMSIG(status);
    if (code != 0) {
      if (WIFSIGNALED(status)) std::fprintf(stderr, "gvrun: rank %ld was killed by signal %d\n", rank, WTERMSIG(status));
      else std::fprintf(stderr, "gvrun: rank %ld exited with code %d\n", rank, code);
      if (result == 0) {
        result = code;
        failing = left > 0;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kill_after);
      }
    }
  }
  return result;
}
