// The software HCA's GPU engines of this process, and the gate CUDA allocations pass.
//
// While a GPU engine (a resident kernel) runs, a CUDA allocation or free can wait for it forever:
// seen on an H100 as a World torn down (cudaFreeHost) while another rank's engine of the same
// process ran. So an engine runs only while its Device is registered here, and every World step
// that allocates or frees CUDA memory holds an EngineGate, which quiesces every other registered
// engine meanwhile (the registry's lock also keeps two such steps apart). A World's own engine
// stays quiesced from its start until its setup is done.
#pragma once
#include <mutex>
#include <vector>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail {

/// From now on `dev`'s engine runs (resumed here), and other Worlds' gates stop it meanwhile.
void engine_register(Device* dev);
/// Before `dev` is destroyed.
void engine_unregister(Device* dev);
/// World::quiesce / resume: the user stops or restarts `dev`'s engine (gates leave it stopped).
void engine_user_quiesce(Device* dev, bool quiesce);

class EngineGate {
 public:
  /// Quiesces every registered engine but `self`'s (null: all of them) until destroyed.
  explicit EngineGate(const Device* self);
  ~EngineGate();
  EngineGate(const EngineGate&) = delete;
  EngineGate& operator=(const EngineGate&) = delete;

 private:
  std::unique_lock<std::mutex> lk_;
  std::vector<Device*> stopped_;
};

}  // namespace gv::detail
