// The CPU engine: a host thread that executes the WQEs of a host arena with the semantics of
// semantics/hca.hpp.
#pragma once
#include <atomic>
#include <string>
#include <thread>

#include "arena_store.hpp"

#include "../shared_file.hpp"

namespace gv::detail {

class CpuEngine final : public Engine {
 public:
  /// Starts the thread; it serves the QPs of `arena` (named `path`, how its peers name it).
  CpuEngine(soft::Arena arena, std::string path, const EngineSite& site);
  ~CpuEngine() override;

 private:
  void loop();

  soft::Arena arena_;
  std::string path_;
  EngineSite site_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Map the arena file at `path` (another process's, as its QpInfo names it); {} if it is gone
/// or not an arena of this version.
Mapping map_arena_path(const char* path);

}  // namespace gv::detail
