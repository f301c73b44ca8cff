// gvrun: start N ranks of a gpuverbs program on this host with the built-in TCP rendezvous.
//
//   gvrun -n 4 ./app args...
//
// Each rank gets GV_RANK, GV_SIZE and GV_ROOT=127.0.0.1:<a free port>. gvrun waits for all of
// them; when one fails (non-zero exit or a signal), the others notice through their World and
// end on their own, and gvrun ends any that are still running --kill-after seconds later. It
// exits 0 when every rank did, else with the first failure's code (128 + signal for a signal).
//
// Each rank runs in a process group of its own, and gvrun ends the whole group: a rank started
// through a wrapper (`sh -c ...`, valgrind, nsys) leaves no orphan behind holding the output.
// SIGINT, SIGTERM and SIGHUP sent to gvrun are passed on to every rank's group.
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

#include "../src/parse.hpp"

extern char** environ;

namespace {

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: gvrun -n RANKS [--kill-after SECONDS] [--] PROGRAM [ARGS...]\n"
               "  Starts RANKS copies of PROGRAM with GV_RANK, GV_SIZE and GV_ROOT set for the built-in\n"
               "  TCP rendezvous of gpuverbs' World (World::init). If a rank fails, the rest are ended\n"
               "  SECONDS later (default 30) if they have not ended by then.\n");
}

/// The value of option `flag` (argv[i + 1]) as a whole number in [lo, hi], or a message.
bool option_number(int argc, char** argv, int& i, long lo, long hi, long& out) {
  const char* flag = argv[i];
  if (i + 1 >= argc) {
    std::fprintf(stderr, "gvrun: %s needs a value (a whole number %ld .. %ld)\n", flag, lo, hi);
    return false;
  }
  std::uint64_t v = 0;
  std::string why;
  if (!gv::detail::parse_uint(argv[++i], static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi), v, why)) {
    std::fprintf(stderr, "gvrun: %s '%s' %s\n", flag, argv[i], why.c_str());
    return false;
  }
  out = static_cast<long>(v);
  return true;
}

/// Every rank's process group (its pid: each rank leads its own), 0 once gvrun has ended it.
std::vector<pid_t> g_groups;
volatile sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  g_signal = sig;
  for (const pid_t g : g_groups)
    if (g > 0) kill(-g, sig);
}

void end_groups(int sig) {
  for (const pid_t g : g_groups)
    if (g > 0) kill(-g, sig);
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
    if (a == "-n") {
      if (!option_number(argc, argv, i, 1, 4096, n)) return 2;
    } else if (a == "--kill-after") {
      if (!option_number(argc, argv, i, 0, 86400, kill_after)) return 2;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "gvrun: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else {
      break;
    }
  }
  if (n == 0) {
    std::fprintf(stderr, "gvrun: say how many ranks to start with -n RANKS\n");
    usage(stderr);
    return 2;
  }
  if (i >= argc) {
    std::fprintf(stderr, "gvrun: no program to start %ld rank(s) of: give it after the options\n", n);
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
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // The rank's own process group (pgid = its pid): gvrun can end it with everything it started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  g_groups.reserve(static_cast<std::size_t>(n));
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
    const int e = posix_spawnp(&pid, argv[i], nullptr, &attr, argv + i, envp.data());
    if (e != 0) {
      std::fprintf(stderr, "gvrun: cannot start '%s': %s\n", argv[i], std::strerror(e));
      end_groups(SIGKILL);
      for (const pid_t p : pids) waitpid(p, nullptr, 0);
      return 1;
    }
    pids.push_back(pid);
    g_groups.push_back(pid);
  }
  posix_spawnattr_destroy(&attr);
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
        end_groups(SIGKILL);
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
        kill(-p, SIGKILL);  // the rank has ended: so does whatever it started
        g_groups[k] = 0;
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
  // What the ranks started and left behind (a wrapper's children) ends with them.
  end_groups(SIGKILL);
  if (g_signal != 0 && result == 0) result = 128 + g_signal;
  return result;
}
