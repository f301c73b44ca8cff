// How a gv_scope family becomes Google Benchmark rows. A family makes a Case per size; the
// method row times it with the stream held until everything is enqueued, the plain row times
// the same Case with events right around it (median of kPlainRuns), outside Google Benchmark's
// loop, so the summary can set one beside the other.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu.hpp"
#include "options.hpp"
#include "rounds.hpp"

namespace gv::scope {

/// One transfer at one size, set up and verified once.
class Case {
 public:
  virtual ~Case() = default;
  /// Streams the transfer uses (2 for duplex).
  virtual int streams() const { return 1; }
  /// Enqueues stream i's part once.
  virtual void enqueue(int i, cudaStream_t s) = 0;
  /// Whether the stream may be held while the region is enqueued: not where the copy call
  /// itself waits for the stream (pageable memory is staged by the host during the call).
  virtual bool holdable() const { return true; }
  /// Enqueues a timed region may repeat for small sizes: 1 where a repeat would not redo the
  /// work (pages already migrated, a chain already cached), more for copies and kernels.
  virtual int max_reps() const { return 1; }
  /// Before each timed region, outside it (the `_flush` families flush here).
  virtual void before() {}
  /// Bytes one enqueue of every stream moves (the rate's numerator).
  virtual std::uint64_t bytes() const = 0;
  /// After one untimed run: throws gv::Error if the data did not arrive intact.
  virtual void verify() {}
  /// Extra counters (latency_ns, ops_per_us, ...) from the time of one enqueue round.
  virtual void counters(benchmark::State& st, double seconds_per_round) const { (void)st, (void)seconds_per_round; }
};

/// Where a row runs: its host NUMA node and its GPU (peer rows: source and destination GPU).
struct Where {
  int numa = 0;
  int gpu = 0;
  int peer = -1;  ///< the second GPU of a peer row
};

using MakeCase = std::function<std::unique_ptr<Case>(const Where&, std::uint64_t bytes)>;

/// "<family>/<numa>/<cuda>" or, for peer rows, "<family>/<src>/<dst>" (Comm|Scope's scheme).
std::string row_name(const std::string& family, const Where& w);

/// What registration needs from the command line.
struct Plan {
  Options opt;
  bool min_time_given = false;  ///< --benchmark_min_time was passed: leave rows' min time alone
  std::vector<int> gpus;
  std::vector<int> numa_of_gpu;  ///< per gpus[i]: the node its rows pin to
};

/// Runs one row: the method (plain = false: every round held until enqueued; `repeat`: several
/// enqueues a round for small sizes) or the plain measurement. Errors become SkipWithError.
/// `row` names the row (with its arguments) so a Case set up for it is kept while Google
/// Benchmark reruns the row; release_cached() frees the last one before CUDA shuts down. A plain
/// row reuses its method row's Case (the same buffers) when it runs right after the method row
/// at the same size, so register the plain row's arguments last. `beside_plain`: a method row
/// at its plain row's arguments: its median round is taken over at least kPlainRuns rounds.
void run_case(benchmark::State& st, const std::string& row, const Where& w, const MakeCase& make, std::uint64_t size,
              bool plain, bool repeat, bool beside_plain = false);
void release_cached();

/// Registers the method rows of `family` over the plan's sizes (clamped to [lo, hi]) and its
/// plain row at the largest of them. Rates: bytes_per_second; each row also has bytes,
/// cuda_id, numa_id and `reps` (enqueues per timed region, raised for small sizes so launch
/// cost does not dominate). `costly_before`: the Case's before() costs far more than its
/// transfer (the `_flush` families): a fixed number of rounds per size instead of a min time.
void add_sized(const Plan& plan, const std::string& family, const Where& w, const MakeCase& make, int lo = kMinLog2,
               int hi = kMaxLog2, bool costly_before = false);

/// One row without a size (latency, launch cost); `plain` adds its plain row.
void add_single(const Plan& plan, const std::string& name, const Where& w, const MakeCase& make, bool plain);

/// Rows whose time is measured on the host (CPU work: demand faults from CPU threads,
/// launch and synchronisation calls): `body` runs one iteration and returns its seconds.
void add_host_timed(const Plan& plan, const std::string& name, const std::function<void(benchmark::State&)>& body);

// The families (one file each).
void register_copies(const Plan& plan);
void register_zero_copy(const Plan& plan);
void register_unified(const Plan& plan);
void register_latency(const Plan& plan);
void register_atomics(const Plan& plan);

/// Lets GPU `from` reach `to`'s memory (on: cudaDeviceEnablePeerAccess; off: disable); idempotent.
void peer_access(int from, int to, bool on);

/// GPU pairs (a, b), a != b, of the plan that can reach each other; empty with one GPU.
std::vector<std::pair<int, int>> peer_pairs(const Plan& plan);

}  // namespace gv::scope
