// Host memory shared with other processes of this user, one way for the whole library: the
// software HCA's host arenas and a World's host heaps. A memfd, which a peer maps by the path
// /proc/<pid>/fd/<fd> while the creating process lives: there is no name to remove, and the
// memory goes with its last mapping, however a process ends.
#pragma once
#include <cstddef>
#include <string>

namespace gv::detail {

class SharedFile {
 public:
  /// `bytes` of zeroed memory, mapped here; `who` begins the message of an error.
  SharedFile(std::size_t bytes, const char* who);
  ~SharedFile();
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;
  std::byte* base() const { return base_; }
  std::size_t size() const { return size_; }
  /// How another process opens it (map_shared_file).
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
};

/// A whole shared file of another process mapped here.
struct Mapping {
  std::byte* base = nullptr;
  std::size_t size = 0;
};
/// The SharedFile at `path` mapped here whole; {} when it cannot be opened or mapped (its
/// process ended, or the path is not one).
Mapping map_shared_file(const char* path);
void unmap_shared_file(const Mapping& m);

}  // namespace gv::detail
