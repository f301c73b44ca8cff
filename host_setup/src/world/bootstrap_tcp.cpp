// The built-in TCP rendezvous: rank 0 listens at GV_ROOT, every other rank connects to it, and
// collectives go through rank 0 (a star: each rank sends its part, rank 0 sends everyone the
// whole). Every receive has a deadline; a closed connection is a dead rank, reported by name.
// Between collectives a watcher thread notices a connection that closes, and rank 0 forwards
// the news to every other rank.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <gpuverbs/host/verbs.hpp>

#include "../parse.hpp"
#include "bootstrap.hpp"
#include "bootstrap_wire.hpp"

namespace gv::detail {
namespace {

using namespace wire;  // the messages and the checks made of them (bootstrap_wire.hpp)

enum class Io { kOk, kEof, kTimeout, kError };

int ms_until(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms > 1000000 ? 1000000 : ms);
}

Io wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms_until(deadline));
    if (r > 0) return Io::kOk;
    if (r == 0) return Io::kTimeout;
    if (errno != EINTR) return Io::kError;
  }
}

Io send_all(int fd, const void* buf, std::size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (const Io io = wait_fd(fd, POLLOUT, deadline); io != Io::kOk) return io;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return (errno == EPIPE || errno == ECONNRESET) ? Io::kEof : Io::kError;
  }
  return Io::kOk;
}

Io recv_all(int fd, void* buf, std::size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return Io::kEof;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const Io io = wait_fd(fd, POLLIN, deadline); io != Io::kOk) return io;
      continue;
    }
    if (errno == EINTR) continue;
    return errno == ECONNRESET ? Io::kEof : Io::kError;
  }
  return Io::kOk;
}

Io send_msg(int fd, MsgType t, std::uint32_t rank, const void* payload, std::size_t len, Clock::time_point deadline) {
  const Header h{t, rank, len};
  Io io = send_all(fd, &h, sizeof(h), deadline);
  if (io == Io::kOk && len != 0) io = send_all(fd, payload, len, deadline);
  return io;
}

/// host:port -> an IPv4 socket address.
sockaddr_in parse_root(const std::string& root) {
  const auto colon = root.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == root.size())
    throw Error("World (tcp): GV_ROOT='" + root + "' is not host:port");
  const std::string host = root.substr(0, colon), port = root.substr(colon + 1);
  std::uint64_t p = 0;
  std::string why;
  if (!parse_uint(port, 1, 65535, p, why)) throw Error("World (tcp): GV_ROOT='" + root + "': the port '" + port + "' " + why);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int e = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); e != 0 || res == nullptr)
    throw Error("World (tcp): GV_ROOT='" + root + "': cannot resolve '" + host + "': " + gai_strerror(e));
  sockaddr_in a{};
  std::memcpy(&a, res->ai_addr, sizeof(a));
  ::freeaddrinfo(res);
  a.sin_port = htons(static_cast<std::uint16_t>(p));
  return a;
}

std::string errno_text() { return std::strerror(errno); }

class TcpBootstrap final : public Bootstrap {
 public:
  TcpBootstrap(int rank, int size, const std::string& root, std::chrono::milliseconds timeout, int listen_fd)
      : rank_(rank), size_(size), root_(root), timeout_(timeout), fds_(static_cast<std::size_t>(size), -1),
        listen_fd_(listen_fd) {
    const sockaddr_in addr = parse_root(root);
    try {
      if (rank == 0) accept_all(addr);
      else connect_root(addr);
    } catch (...) {
      close_all();
      throw;
    }
  }
  ~TcpBootstrap() override {
    unwatch();
    close_all();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void allgather(const void* mine, void* all, std::size_t bytes) override {
    std::lock_guard lk(io_mu_);
    if (failed()) throw Error(failure());
    ++collective_;
    const auto deadline = Clock::now() + timeout_;
    if (rank_ == 0) gather_at_root(mine, all, bytes, deadline);
    else gather_at_rank(mine, all, bytes, deadline);
  }

  void watch(std::function<void(const std::string&)> on_failure) override {
    unwatch();
    on_failure_ = std::move(on_failure);
    stop_ = false;
    watcher_ = std::thread([this] { watch_loop(); });
  }
  void unwatch() override {
    stop_ = true;
    if (watcher_.joinable()) watcher_.join();
  }

 private:
  // ---- setup ----
  void accept_all(const sockaddr_in& addr) {
    if (listen_fd_ < 0) {
      listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (listen_fd_ < 0) throw Error("World (tcp): socket(): " + errno_text());
      const int one = 1;
      ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
        throw Error("World (tcp): rank 0 cannot listen at GV_ROOT=" + root_ + ": " + errno_text() +
                    " (is another job using that port?)");
      if (::listen(listen_fd_, size_) != 0) throw Error("World (tcp): listen(): " + errno_text());
    }
    const auto deadline = Clock::now() + timeout_;
    int joined = 1;
    while (joined < size_) {
      if (wait_fd(listen_fd_, POLLIN, deadline) != Io::kOk) {
        std::string missing;
        for (int r = 1; r < size_; ++r)
          if (fds_[static_cast<std::size_t>(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        fail_all("World (tcp): rank(s) " + missing + " did not connect to rank 0 at " + root_ + " within " +
                 seconds() + " s");
      }
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Header h;
      Hello hello;
      const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
      if (recv_all(fd, &h, sizeof(h), hello_deadline) != Io::kOk || !is_hello(h) ||
          recv_all(fd, &hello, sizeof(hello), hello_deadline) != Io::kOk || hello.magic != kMagic) {
        ::close(fd);  // not one of ours (a port scan, another program)
        continue;
      }
      std::vector<bool> in(fds_.size());
      for (std::size_t r = 0; r < fds_.size(); ++r) in[r] = fds_[r] >= 0;
      if (const std::string why = refusal(h, hello, size_, in); !why.empty()) {
        (void)send_msg(fd, kFail, 0, why.data(), why.size(), hello_deadline);
        ::close(fd);
        fail_all(why);
      }
      const int nodelay = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
      fds_[h.rank] = fd;
      ++joined;
    }
    ::close(listen_fd_);
    listen_fd_ = -1;
    for (int r = 1; r < size_; ++r) (void)send_msg(fds_[static_cast<std::size_t>(r)], kWelcome, 0, nullptr, 0, deadline);
  }

  void connect_root(const sockaddr_in& addr) {
    const auto deadline = Clock::now() + timeout_;
    int fd = -1;
    for (;;) {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) throw Error("World (tcp): socket(): " + errno_text());
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
      const std::string why = errno_text();
      ::close(fd);
      if (Clock::now() >= deadline)
        throw Error("World (tcp): rank " + std::to_string(rank_) + " cannot reach rank 0 at GV_ROOT=" + root_ +
                    " within " + seconds() + " s (" + why + "): is rank 0 running, and GV_ROOT the same for all?");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int nodelay = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
    fds_[0] = fd;
    const Hello hello{kMagic, static_cast<std::uint32_t>(size_)};
    if (send_msg(fd, kHello, static_cast<std::uint32_t>(rank_), &hello, sizeof(hello), deadline) != Io::kOk)
      throw Error("World (tcp): rank " + std::to_string(rank_) + " lost rank 0 while joining");
    Header h;
    const Io io = recv_all(fd, &h, sizeof(h), deadline);
    if (io == Io::kTimeout)
      throw Error("World (tcp): rank 0 did not admit rank " + std::to_string(rank_) + " within " + seconds() +
                  " s: some other rank did not join");
    if (io != Io::kOk) throw Error("World (tcp): rank 0 closed the connection while rank " + std::to_string(rank_) + " joined");
    if (h.type == kFail) throw Error(read_text(fd, h, deadline));
    if (h.type != kWelcome) throw Error("World (tcp): unexpected message from rank 0 while joining");
  }

  // ---- collectives ----
  void gather_at_root(const void* mine, void* all, std::size_t bytes, Clock::time_point deadline) {
    char* out = static_cast<char*>(all);
    if (bytes != 0) std::memcpy(out, mine, bytes);
    std::vector<bool> have(static_cast<std::size_t>(size_), false);
    have[0] = true;
    int left = size_ - 1;
    std::vector<pollfd> pfds;
    while (left > 0) {
      pfds.clear();
      for (int r = 1; r < size_; ++r)
        if (!have[static_cast<std::size_t>(r)]) pfds.push_back(pollfd{fds_[static_cast<std::size_t>(r)], POLLIN, 0});
      const int n = ::poll(pfds.data(), pfds.size(), ms_until(deadline));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string missing;
        for (int r = 1; r < size_; ++r)
          if (!have[static_cast<std::size_t>(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        fail_all("World (tcp): rank(s) " + missing + " did not reach collective #" + std::to_string(collective_) +
                 " within " + seconds() + " s (they are alive but elsewhere: a missing or extra host call)");
      }
      for (const pollfd& p : pfds) {
        if (p.revents == 0) continue;
        const int r = rank_of(p.fd);
        Header h;
        const Io io = recv_all(p.fd, &h, sizeof(h), deadline);
        if (io != Io::kOk) fail_all(death_of(r));
        if (!gather_header_ok(h, bytes))
          fail_all("World (tcp): rank " + std::to_string(r) + " passed " + std::to_string(h.len) +
                   " bytes to collective #" + std::to_string(collective_) + ", rank 0 passed " + std::to_string(bytes));
        if (bytes != 0 && recv_all(p.fd, out + static_cast<std::size_t>(r) * bytes, bytes, deadline) != Io::kOk)
          fail_all(death_of(r));
        have[static_cast<std::size_t>(r)] = true;
        --left;
      }
    }
    const std::size_t total = static_cast<std::size_t>(size_) * bytes;
    for (int r = 1; r < size_; ++r)
      if (send_msg(fds_[static_cast<std::size_t>(r)], kResult, 0, out, total, deadline) != Io::kOk) fail_all(death_of(r));
  }

  void gather_at_rank(const void* mine, void* all, std::size_t bytes, Clock::time_point deadline) {
    const int fd = fds_[0];
    if (send_msg(fd, kGather, static_cast<std::uint32_t>(rank_), mine, bytes, deadline) != Io::kOk) fail_local(death_of(0));
    Header h;
    const Io io = recv_all(fd, &h, sizeof(h), deadline);
    if (io == Io::kTimeout)
      fail_local("World (tcp): collective #" + std::to_string(collective_) + " did not complete within " + seconds() +
                 " s: rank 0 or another rank did not reach it");
    if (io != Io::kOk) fail_local(death_of(0));
    if (h.type == kFail) fail_local(read_text(fd, h, deadline));
    const std::size_t total = static_cast<std::size_t>(size_) * bytes;
    if (!result_header_ok(h, size_, bytes)) fail_local("World (tcp): a malformed reply from rank 0");
    if (total != 0 && recv_all(fd, all, total, deadline) != Io::kOk) fail_local(death_of(0));
  }

  // ---- failures ----
  std::string death_of(int r) const {
    return "World (tcp): rank " + std::to_string(r) + (r == 0 ? " (root)" : "") +
           " died: its connection closed (the process ended or was killed)";
  }
  /// A failure's text, which follows its header: read with a second's grace past `deadline`,
  /// since rank 0 reports a timeout when the ranks' common deadline has just passed.
  std::string read_text(int fd, const Header& h, Clock::time_point deadline) {
    std::string s(fail_text_bytes(h), '\0');
    const Clock::time_point until = std::max(deadline, Clock::now() + std::chrono::seconds(1));
    if (recv_all(fd, s.data(), s.size(), until) != Io::kOk) return "World (tcp): rank 0 reported a failure and closed";
    return s;
  }
  bool failed() const override { return failed_.load(std::memory_order_acquire); }
  std::string failure() const {
    std::lock_guard lk(failure_mu_);
    return failure_;
  }
  /// Record the first failure; true if this call recorded it.
  bool record(const std::string& why) {
    std::lock_guard lk(failure_mu_);
    if (failed_.load(std::memory_order_relaxed)) return false;
    failure_ = why;
    failed_.store(true, std::memory_order_release);
    return true;
  }
  /// Root: tell every rank still connected, then throw.
  [[noreturn]] void fail_all(const std::string& why) {
    tell_all(why);
    throw Error(failure());
  }
  void tell_all(const std::string& why) {
    record(why);
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    for (int r = 1; r < size_; ++r) {
      const int fd = fds_[static_cast<std::size_t>(r)];
      if (fd >= 0) (void)send_msg(fd, kFail, 0, why.data(), why.size(), deadline);
    }
  }
  [[noreturn]] void fail_local(const std::string& why) {
    record(why);
    throw Error(failure());
  }

  int rank_of(int fd) const {
    for (int r = 0; r < size_; ++r)
      if (fds_[static_cast<std::size_t>(r)] == fd) return r;
    return -1;
  }

  /// Between collectives: a connection that closes is a dead rank; rank 0 tells the others.
  void watch_loop() {
    std::vector<pollfd> pfds;
    while (!stop_ && !failed()) {
      pfds.clear();
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && fds_[static_cast<std::size_t>(r)] >= 0) pfds.push_back(pollfd{fds_[static_cast<std::size_t>(r)], POLLIN, 0});
      const int n = ::poll(pfds.data(), pfds.size(), 200);
      if (n <= 0 || stop_) continue;
      std::unique_lock lk(io_mu_, std::try_to_lock);
      if (!lk.owns_lock()) continue;  // a collective is reading: it reports what it finds
      bool pending = false;
      for (const pollfd& p : pfds) {
        if (p.revents == 0) continue;
        char c;
        const ssize_t k = ::recv(p.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          const std::string why = death_of(rank_of(p.fd));
          if (rank_ == 0) tell_all(why);
          else record(why);
          break;
        }
        if (k > 0 && rank_ != 0) {
          Header h;
          const auto deadline = Clock::now() + std::chrono::seconds(1);
          if (::recv(p.fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof(h)) && h.type == kFail &&
              recv_all(p.fd, &h, sizeof(h), deadline) == Io::kOk) {
            record(read_text(p.fd, h, deadline));
            break;
          }
        }
        pending = pending || k > 0;
      }
      lk.unlock();
      if (failed()) break;
      // A part of the next collective arrived early: leave it for the collective to read.
      if (pending) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (failed() && !stop_ && on_failure_) on_failure_(failure());
  }

  void close_all() {
    for (int& fd : fds_)
      if (fd >= 0) ::close(std::exchange(fd, -1));
    if (listen_fd_ >= 0) ::close(std::exchange(listen_fd_, -1));
  }
  std::string seconds() const { return std::to_string(timeout_.count() / 1000.0).substr(0, 5); }

  int rank_, size_;
  std::string root_;
  std::chrono::milliseconds timeout_;
  std::string name_ = "tcp";
  std::vector<int> fds_;  ///< root: one per rank; others: fds_[0] = rank 0
  int listen_fd_ = -1;
  std::uint64_t collective_ = 0;
  std::mutex io_mu_;  ///< held by a collective; the watcher reads only when it can take it
  mutable std::mutex failure_mu_;
  std::string failure_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> stop_{true};
  std::function<void(const std::string&)> on_failure_;
  std::thread watcher_;
};

}  // namespace

std::unique_ptr<Bootstrap> tcp_bootstrap(int rank, int size, const std::string& root, std::chrono::milliseconds timeout,
                                         int listen_fd) {
  return std::make_unique<TcpBootstrap>(rank, size, root, timeout, listen_fd);
}

int tcp_listen_any(int backlog, int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("World (tcp): socket(): " + errno_text());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw Error("World (tcp): rank 0 cannot listen on a TCP port: " + why);
  }
  port = ntohs(a.sin_port);
  return fd;
}

}  // namespace gv::detail
