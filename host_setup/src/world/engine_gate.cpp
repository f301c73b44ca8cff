#include "engine_gate.hpp"

#include <algorithm>

namespace gv::detail {
namespace {

struct Entry {
  Device* dev;
  bool user_quiesced;  ///< World::quiesce() stopped it: gates leave it alone
};
struct Registry {
  std::mutex mu;
  std::vector<Entry> engines;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void engine_register(Device* dev) {
  std::lock_guard lk(registry().mu);
  registry().engines.push_back(Entry{dev, false});
  dev->resume();
}

void engine_unregister(Device* dev) {
  std::lock_guard lk(registry().mu);
  auto& v = registry().engines;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const Entry& e) { return e.dev == dev; }), v.end());
}

void engine_user_quiesce(Device* dev, bool quiesce) {
  std::lock_guard lk(registry().mu);
  for (Entry& e : registry().engines) {
    if (e.dev != dev || e.user_quiesced == quiesce) continue;
    if (quiesce) dev->quiesce();
    else dev->resume();
    e.user_quiesced = quiesce;
  }
}

EngineGate::EngineGate(const Device* self) : lk_(registry().mu) {
  for (const Entry& e : registry().engines) {
    if (e.dev == self || e.user_quiesced) continue;
    try {
      e.dev->quiesce();
      stopped_.push_back(e.dev);
    } catch (const Error&) {
      // a failed engine: nothing runs there to wait for
    }
  }
}

EngineGate::~EngineGate() {
  for (Device* d : stopped_) {
    try {
      d->resume();
    } catch (const Error&) {
      // its World reports a failed engine through its own calls
    }
  }
}

}  // namespace gv::detail
