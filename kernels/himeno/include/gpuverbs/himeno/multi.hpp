// Himeno on the ranks of a World, in the six synchronisation modes of modes.hpp. Needs the CUDA
// runtime: target gpuverbs::himeno_multi, built with nvcc.
//
//   MultiOptions o;                                              // capacity: iterations per reset
//   WorldOptions w;
//   w.heap_bytes = MultiDomain::heap_bytes(grid, 2, o);
//   auto worlds = gv::World::create_local(2, w);                 // or World::init(), one per process
//   MultiDomain dom(raw(worlds), grid, [](const Slab& s) { return standard_fields(s); }, o);
//   double ms = dom.run(Mode::kPersistent, 100);                 // throws with the reason on failure
//   double last = dom.gosa().back();
//
// A process drives either every rank of its World (create_local: one host thread per rank
// during a run) or the one rank of its process (World::init under mpirun or gvrun). Each rank
// allocates one block of its symmetric heap (HeapLayout), uploads its slab, and keeps two streams.
// Runs are timed with events on each rank's main stream; run() returns the longest.
//
// With the ib transport on GPUs a software-HCA engine kernel stays resident: MultiDomain calls
// no device-wide synchronisation while it runs (its destructor stops the engines of the ranks it
// drives while it frees). The World outlives the MultiDomain.
#pragma once
#include <gpuverbs/himeno/exchange.hpp>
#include <gpuverbs/himeno/fields.hpp>
#include <gpuverbs/himeno/modes.hpp>
#include <gpuverbs/host/world.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gv::himeno {

struct MultiOptions {
  int planes_per_block = 0;  ///< interior sweeps; <= 0 picks kDefaultPlanesPerBlock
  Arithmetic arithmetic = Arithmetic::kDouble;
  std::int64_t capacity = 1000;  ///< iterations a domain may run between two reset()s
};

/// The Worlds of a vector of owners, for MultiDomain's constructor.
std::vector<World*> raw(const std::vector<std::unique_ptr<World>>& worlds);

class MultiDomain {
 public:
  /// The initial fields of a slab (standard_fields, or random_fields with a seed).
  using FieldsOf = std::function<HostFields(const Slab&)>;

  /// Bytes of symmetric heap a World needs for this domain (WorldOptions::heap_bytes).
  static std::size_t heap_bytes(const GridSize& g, int ranks, const MultiOptions& o = {});

  /// `ranks`: every rank of one World in this process, or the single rank of this process.
  /// Every rank constructs its domain (in multi-process runs this is collective). Throws
  /// std::invalid_argument for a grid the ranks cannot share, std::runtime_error naming the CUDA
  /// call that failed.
  MultiDomain(std::vector<World*> ranks, const GridSize& g, const FieldsOf& fields, const MultiOptions& o = {});
  ~MultiDomain();
  MultiDomain(const MultiDomain&) = delete;
  MultiDomain& operator=(const MultiDomain&) = delete;

  /// Empty when every driven rank can run `m`; otherwise the first reason, naming the rank.
  std::string why_not(Mode m) const;

  /// The initial p in both buffers of every driven rank; signals, counters and errors cleared,
  /// the Gosa history NaN. poison: NaN also where the first sweep must write (the owned interior
  /// of its output buffer and the halos neighbours fill), so a point left unwritten shows. Across
  /// processes it ends with a World barrier. The constructor leaves the domain reset.
  void reset(bool poison = false);

  /// Runs `iters` more iterations in mode m; comm = false skips the halo puts and waits and the
  /// cross-rank Gosa (each rank keeps its own). Returns milliseconds: the longest of the driven
  /// ranks' runs, each from an event before its first step to one after its last. Throws
  /// std::runtime_error with why_not(m), or with the first failure (rank, step, iteration,
  /// status); after a failure only reset() or destruction are allowed.
  double run(Mode m, int iters, bool comm = true);

  /// Iterations since the last reset.
  std::int64_t iterations() const { return iterations_; }
  /// The global Gosa after each iteration since the reset, as driven rank `index` holds it.
  std::vector<double> gosa(int index = 0) const;
  /// The current p of driven rank `index` in its slab's layout (halo planes included).
  std::vector<float> download_p(int index) const;

  int driven() const { return int(ranks_.size()); }
  int ranks() const { return size_; }
  const RankPlan& plan(int index) const;
  int gpu(int index) const;
  /// The distinct GPUs of the driven ranks.
  int gpus() const;

 private:
  struct Rank;
  class HostExchange;
  void share_gpus(bool multi_process);
  void find_peer_blocks();
  void release() noexcept;
  void run_rank(Rank& r, Mode m, std::uint64_t n0, std::uint64_t end, bool comm, HostExchange* ex);
  void prepare_mode(Rank& r, Mode m, bool comm);
  void check_errors(Mode m) const;

  std::vector<std::unique_ptr<Rank>> ranks_;
  int size_ = 1;
  HeapLayout heap_;
  std::int64_t iterations_ = 0;
  bool failed_ = false;
};

}  // namespace gv::himeno
