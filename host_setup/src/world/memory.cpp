#include "memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <gpuverbs/host/verbs.hpp>


namespace gv::detail {

std::byte* create_shared_heap(std::size_t bytes, std::string& name) {
  static std::atomic<unsigned> serial{0};
  name = "/gv-world-" + std::to_string(getpid()) + "-" + std::to_string(serial.fetch_add(1));
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("World: shm_open(" + name + "): " + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw Error("World: cannot size the shared heap " + name + " to " + std::to_string(bytes) +
                " bytes: " + std::strerror(e) + " (is /dev/shm large enough?)");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw Error("World: mmap of the shared heap: " + std::string(std::strerror(e)));
  }
  return static_cast<std::byte*>(p);  // a new file reads as zeros
}

std::byte* map_shared_heap(const HeapExport& e) {
  const int fd = shm_open(e.shm_name, O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(std::string("World: cannot open a peer's shared heap ") + e.shm_name + ": " + std::strerror(errno));
  void* p = mmap(nullptr, e.offset + e.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) throw Error(std::string("World: cannot map a peer's shared heap: ") + std::strerror(err));
  return static_cast<std::byte*>(p) + e.offset;
}

void unmap_heap(void* p, std::size_t bytes) {
  if (p != nullptr) munmap(p, bytes);
}

void unlink_shared_heap(const std::string& name) {
  if (!name.empty()) shm_unlink(name.c_str());
}

}  // namespace gv::detail
