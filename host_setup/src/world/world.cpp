// World: the calls a rank makes on its World after setup (world_setup.cpp): addresses, the
// symmetric allocator, host collectives, failures and their diagnosis, the engine's pauses.
#include <gpuverbs/host/world.hpp>

#include <cstdio>
#include <cstring>

#include "engine_gate.hpp"
#include "world_impl.hpp"

namespace gv {

using rma::Transport;

World::Impl::~Impl() {
  if (boot) boot->unwatch();
  if (dev) detail::engine_unregister(dev.get());
  detail::EngineGate gate(dev.get());  // this World's frees, with no other engine of the process running
  // The engine first: it may still touch queues, tables and heaps.
  qps.clear();
  cqs.clear();
  results_mr.reset();
  heap_mr.reset();
  pd.reset();
  dev.reset();
  peer_heaps.reset();
  heap.reset();
  space->free(peers);
  space->free(lanes);
  space->free(lane_states);
  if (abort_flag != nullptr) space->free_flag(abort_flag);
  space = &detail::host_space();
  gpu_memory.reset();
}

// The host flag ends every wait; the heap word (rma::Reserved::aborted) makes every later
// operation return kAborted at its start.
void World::Impl::raise_abort() {
  if (abort_flag == nullptr || !heap) return;  // setup had not got that far
  __atomic_store_n(abort_flag, 1u, __ATOMIC_RELEASE);
  heap->memory().raise(&reinterpret_cast<rma::Reserved*>(heap->base())->aborted, abort_flag);
  if (dev) dev->abort();
}

void World::Impl::on_failure(const std::string& why) {
  {
    std::lock_guard lk(fail_mu);
    if (failure.empty()) failure = why;
  }
  raise_abort();
}

// The provider's asynchronous errors (the GPU engine stopped, a CQ overran, a QP failed
// outside a completion) end this rank's waits (the provider raised its abort, or the lane's
// completions carry the error); the World names them as its failure, so check() and describe()
// say why a kernel saw kAborted.
void World::Impl::take_device_events() {
  if (!dev) return;
  while (auto e = dev->poll_async_event())
    on_failure("rank " + std::to_string(rank) + ": the software HCA reported: " + e->message);
}

World::World(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

World::~World() {
  if (!impl_) return;
  impl_->boot->unwatch();
  if (impl_->left) {
    // A rank that called abort() has left: its last collective would wait out the bootstrap's
    // limit for peers that may be waiting elsewhere (in a kernel's barrier for this rank). The
    // peers see it go as they see a death (or, threads of one process, fail at once).
    impl_->boot->leave("rank " + std::to_string(impl_->rank) + " left (World::abort())");
    return;
  }
  try {
    impl_->boot->finalize();  // nobody frees its heap while a peer may still write into it
  } catch (const Error&) {
  }
}

int World::rank() const { return impl_->rank; }
int World::size() const { return impl_->size; }
int World::local_rank() const { return impl_->local_rank; }
int World::local_size() const { return impl_->local_size; }
int World::gpu() const { return impl_->gpu; }
const std::string& World::bootstrap_name() const { return impl_->boot->name(); }
const rma::Endpoint& World::endpoint() const { return impl_->ep; }

void* World::ptr(const void* sym, int pe) const {
  const Impl& m = *impl_;
  const std::byte* heap = m.heap->base();
  const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(sym) - heap);
  if (pe < 0 || pe >= m.size || static_cast<const std::byte*>(sym) < heap + m.user_offset || off >= m.heap->bytes())
    return nullptr;
  std::byte* base = m.peer_base[static_cast<std::size_t>(pe)];
  return base == nullptr ? nullptr : base + off;
}

rma::Transport World::transport_to(int pe) const {
  if (pe < 0 || pe >= impl_->size) return Transport::kNone;
  return impl_->transports[static_cast<std::size_t>(pe)];
}

void* World::alloc(std::size_t bytes, std::size_t align) {
  if (align == 0 || (align & (align - 1)) != 0) throw Error("World::alloc: align must be a power of two");
  Impl& m = *impl_;
  const std::uint64_t off = bytes > heap_bytes() || align > heap_bytes() ? 0 : m.blocks.alloc(bytes == 0 ? 1 : bytes, align);
  if (off == 0)
    throw Error("World::alloc: the symmetric heap is exhausted: " + std::to_string(bytes) + " bytes asked, " +
                std::to_string(heap_free()) + " of " + std::to_string(heap_bytes()) +
                " free (in pieces, aligned to " + std::to_string(align) +
                "): raise WorldOptions::heap_bytes (GV_HEAP_BYTES, NVSHMEM_SYMMETRIC_SIZE)");
  std::byte* p = m.heap->base() + off;
  m.heap->memory().clear(p, m.blocks.size_of(off), "World::alloc: clearing the block");
  return p;
}

void World::free(void* p) {
  if (p == nullptr) return;
  Impl& m = *impl_;
  const std::uint64_t off = static_cast<std::uint64_t>(static_cast<std::byte*>(p) - m.heap->base());
  if (static_cast<std::byte*>(p) < m.heap->base() || m.blocks.size_of(off) == 0)
    throw Error("World::free: the pointer is not a block World::alloc returned");
  m.blocks.release(off);
}

std::size_t World::heap_bytes() const { return impl_->heap->bytes() - impl_->user_offset; }
std::size_t World::heap_free() const { return impl_->blocks.free_bytes(); }

void World::barrier() {
  check();
  impl_->boot->barrier();
}

void World::allgather(const void* mine, void* all, std::size_t bytes) {
  if (bytes != 0 && (mine == nullptr || all == nullptr))
    throw Error(std::string("World::allgather: ") + (mine == nullptr ? "mine" : "all") + " is null with bytes = " +
                std::to_string(bytes) + ": pass " + std::to_string(bytes) + " readable bytes and " +
                std::to_string(impl_->size) + " x " + std::to_string(bytes) + " writable ones");
  if (bytes > (std::size_t{1} << 40) / static_cast<std::size_t>(impl_->size))
    throw Error("World::allgather: " + std::to_string(bytes) + " bytes per rank times " + std::to_string(impl_->size) +
                " ranks is beyond 1 TiB");
  check();
  impl_->boot->allgather(mine, all, bytes);
}

void World::check() const {
  impl_->take_device_events();
  std::lock_guard lk(impl_->fail_mu);
  if (!impl_->failure.empty()) throw Error(impl_->failure);
}

std::string World::describe() const {
  impl_->take_device_events();
  const Impl& m = *impl_;
  std::string out = "rank " + std::to_string(m.rank) + " of " + std::to_string(m.size) + " (" + m.boot->name() + ")\n";
  {
    std::lock_guard lk(m.fail_mu);
    if (!m.failure.empty()) out += "  failed: " + m.failure + "\n";
  }
  if (m.dev) out += "  device: " + m.dev->describe() + "\n";
  const std::uint32_t L = m.opt.ib_lanes;
  for (int q = 0; q < m.size; ++q) {
    const auto i = static_cast<std::size_t>(q);
    out += "  peer " + std::to_string(q) + ": " + rma::to_string(m.transports[i]) + "\n";
    if (m.transports[i] != Transport::kIb) continue;
    for (std::uint32_t l = 0; l < L; ++l) {
      const std::size_t k = i * L + l;
      const ib::QpHandle qh = m.qps[k]->device_handle();
      const ib::CqHandle ch = m.cqs[k]->device_handle();
      ib::QpCounters qs{};
      ib::CqCounters cs{};
      rma::LaneState ls{};
      m.space->snapshot(&qs, qh.state, sizeof(qs));
      m.space->snapshot(&cs, ch.state, sizeof(cs));
      m.space->snapshot(&ls, m.lane_states + k, sizeof(ls));
      const std::string broken =
          qs.sq.broken != 0 ? "; queue broken at WQEBB " + std::to_string(~qs.sq.broken) + " (an abandoned reservation)" : "";
      char line[384];
      std::snprintf(line, sizeof(line),
                    "    lane %u: QP 0x%x sq reserved %llu published %llu completed %llu (ring %u WQEBBs)%s; checked to %llu; "
                    "CQ 0x%x taken %llu; %s%s\n",
                    l, qh.qpn, static_cast<unsigned long long>(qs.sq.reserved), static_cast<unsigned long long>(qs.sq.published),
                    static_cast<unsigned long long>(qs.sq.completed), qh.sq_bbs, broken.c_str(), static_cast<unsigned long long>(ls.done), ch.cqn,
                    static_cast<unsigned long long>(cs.claimed), ls.first_bad ? "failed at WQEBB " : "healthy",
                    ls.first_bad ? (std::to_string(ls.first_bad - 1) + " (" + to_string(static_cast<Status>(ls.status)) +
                                    ", syndrome " + std::to_string(ls.syndrome) + ")").c_str()
                                 : "");
      out += line;
    }
  }
  return out;
}

void World::abort() {
  impl_->left = true;
  impl_->on_failure("rank " + std::to_string(impl_->rank) + ": World::abort() was called");
}

void World::quiesce() {
  if (impl_->dev) detail::engine_user_quiesce(impl_->dev.get(), true);
}
void World::resume() {
  if (impl_->dev) detail::engine_user_quiesce(impl_->dev.get(), false);
}

}  // namespace gv
