// PTX pin: single-byte atomic stores are one instruction each (sync::detail::store_byte), not
// the compare-and-swap loop on the containing word that libcu++ emits for a 1-byte atomic_ref.
// ptx_byte_store.expected lists the instructions; check_ptx_order.cmake compares.
#include <gpuverbs/sync.hpp>

extern "C" __global__ void gv_pin_byte_stores(std::uint8_t* p, std::uint8_t v) {
  namespace sync = gv::sync;
  sync::store_release(p, v, sync::Scope::kSystem);
  sync::store_release(p + 1, v, sync::Scope::kGpu);
  sync::store_relaxed(p + 2, v, sync::Scope::kSystem);
  sync::store_relaxed(p + 3, v, sync::Scope::kGpu);
  sync::store_release(p + 4, v);
  sync::store_relaxed(p + 5, v);
}
