#include "shared_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail {

SharedFile::SharedFile(std::size_t bytes, const char* who) : size_(bytes) {
  const auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw Error(std::string(who) + ": " + what + " of " + std::to_string(bytes) + " bytes of shared memory: " + why);
  };
  fd_ = memfd_create("gpuverbs-shared", MFD_CLOEXEC);
  if (fd_ < 0) fail("memfd_create");
  if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) fail("ftruncate");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) fail("mmap");
  base_ = static_cast<std::byte*>(p);  // a new file reads as zeros
  path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd_);
}

SharedFile::~SharedFile() {
  munmap(base_, size_);
  ::close(fd_);
}

Mapping map_shared_file(const char* path) {
  // Whatever a peer names: never block opening it (a FIFO), map only a regular file (a memfd).
  const int fd = ::open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return {};
  struct stat st {};
  Mapping m;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) m = {static_cast<std::byte*>(p), static_cast<std::size_t>(st.st_size)};
  }
  ::close(fd);
  return m;
}

void unmap_shared_file(const Mapping& m) {
  if (m.base != nullptr) munmap(m.base, m.size);
}

}  // namespace gv::detail
