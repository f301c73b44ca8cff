// rma on GPUs: ranks of one process (World::create_local), each on a GPU (ranks share GPUs
// when there are fewer GPUs than ranks), over p2p (peer access, or the same GPU) and ib (the
// software HCA's GPU engine). Each test runs one kernel per rank, concurrently, on the rank's
// own stream; results are checked on the device where they can be and against host references.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include <gpuverbs/host/world.hpp>

#include "gpu_test.hpp"
#include "rma_kernels.cuh"

namespace gvt {
namespace {

using gv::Status;
using gv::World;
using gv::WorldOptions;
using gv::rma::Transport;

struct GpuParam {
  Transport transport;
  int ranks;
};
std::string gpu_param_name(const ::testing::TestParamInfo<GpuParam>& i) {
  return std::string(gv::rma::to_string(i.param.transport)) + "_" + std::to_string(i.param.ranks) + "ranks";
}

class RmaGpu : public ::testing::TestWithParam<GpuParam> {
 public:
  void SetUp() override {
    GV_REQUIRE_GPUS(1);
    // Streams before the World: with ib, the software HCA's engine is resident from then on,
    // and this test touches GPU memory only through these non-blocking streams.
    int gpus = 0;
    GV_CUDA_CHECK(cudaGetDeviceCount(&gpus));
    for (int r = 0; r < GetParam().ranks; ++r) {
      GV_CUDA_CHECK(cudaSetDevice(r % gpus));  // where create_local puts rank r
      cudaStream_t s;
      GV_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      streams_.push_back(s);
    }
    make(GetParam().transport, std::size_t{48} << 20, gv::Budget{20'000'000'000ull});
  }
  void make(Transport t, std::size_t heap, gv::Budget budget) {
    worlds_.clear();
    st_.clear();
    WorldOptions o;
    o.memory = WorldOptions::Memory::kGpu;
    o.transport = t;
    o.heap_bytes = heap;
    o.budget = budget;
    o.ib_lanes = 4;
    worlds_ = World::create_local(GetParam().ranks, o);
    for (auto& w : worlds_) st_.push_back(static_cast<std::uint32_t*>(w->alloc(64)));
  }
  void TearDown() override {
    int gpus = 1;
    (void)cudaGetDeviceCount(&gpus);
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      (void)cudaSetDevice(static_cast<int>(r) % gpus);
      (void)cudaStreamSynchronize(streams_[r]);
    }
    worlds_.clear();  // engines stop: streams may go
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      (void)cudaSetDevice(static_cast<int>(r) % gpus);
      (void)cudaStreamDestroy(streams_[r]);
    }
  }

  int n() const { return static_cast<int>(worlds_.size()); }
  World& world(int r) { return *worlds_[static_cast<std::size_t>(r)]; }
  const gv::rma::Endpoint& ep(int r) { return world(r).endpoint(); }
  cudaStream_t stream(int r) { return streams_[static_cast<std::size_t>(r)]; }
  std::uint32_t* st(int r) { return st_[static_cast<std::size_t>(r)]; }

  template <class T>
  std::vector<T*> alloc(std::size_t count) {
    std::vector<T*> out;
    for (int r = 0; r < n(); ++r) out.push_back(static_cast<T*>(world(r).alloc(count * sizeof(T))));
    return out;
  }

  /// Launch k on every rank's GPU and stream; then wait for all and check their statuses.
  template <class Launch>
  void on_ranks(Launch&& launch) {
    for (int r = 0; r < n(); ++r) {
      GV_CUDA_CHECK(cudaSetDevice(world(r).gpu()));
      launch(r);
      GV_CUDA_CHECK(cudaGetLastError());
    }
    for (int r = 0; r < n(); ++r) {
      GV_CUDA_CHECK(cudaSetDevice(world(r).gpu()));
      GV_CUDA_CHECK(cudaStreamSynchronize(stream(r)));
    }
  }
  void finish_all() {
    on_ranks([&](int r) { finish<<<1, 128, 0, stream(r)>>>(ep(r), st(r)); });
  }
  template <class T>
  std::vector<T> read(const T* p, std::size_t count, int r) {
    std::vector<T> h(count);
    EXPECT_EQ(cudaSetDevice(world(r).gpu()), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(h.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost, stream(r)), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream(r)), cudaSuccess);
    return h;
  }
  /// Host data into rank r's memory, complete before the next kernel of any rank starts.
  void write(void* p, const void* h, std::size_t bytes, int r) {
    ASSERT_EQ(cudaSetDevice(world(r).gpu()), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(p, h, bytes, cudaMemcpyHostToDevice, stream(r)), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream(r)), cudaSuccess);
  }
  void poison(void* p, std::size_t bytes, int r) {
    ASSERT_EQ(cudaSetDevice(world(r).gpu()), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(p, kPoison, bytes, stream(r)), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream(r)), cudaSuccess);
  }
  void expect_ok(const char* what) {
    for (int r = 0; r < n(); ++r) {
      const auto s = read(st(r), 2, r);
      EXPECT_EQ(s[0], 0u) << what << ": rank " << r << " status " << gv::to_string(static_cast<Status>(s[0])) << "\n"
                          << world(r).describe();
      EXPECT_EQ(s[1], 0u) << what << ": rank " << r << " barrier " << gv::to_string(static_cast<Status>(s[1]));
    }
  }

  std::vector<std::unique_ptr<World>> worlds_;
  std::vector<cudaStream_t> streams_;
  std::vector<std::uint32_t*> st_;
};

std::vector<std::byte> host_pattern(std::uint64_t seed, std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(pattern_byte(seed, i));
  return v;
}

}  // namespace

namespace {
/// The groups of G in a block of `threads` (slice_of's range): each thread, each warp, or one.
template <class G>
constexpr unsigned groups_in(unsigned threads) {
  return std::is_same_v<G, gv::rma::Thread> ? threads : (std::is_same_v<G, gv::rma::Warp> ? threads / 32 : 1);
}

template <class G>
void put_get_every_size(RmaGpu& t, bool get, bool nbi) {
  constexpr unsigned kThreads = 128;
  const unsigned groups = groups_in<G>(kThreads);
  // 16384 and 16400 at 128 threads: a block's put of 8 words a member, the most its one-word loop
  // takes, and of one word more, which goes through the batches (group_copy).
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{100}, std::size_t{4096}, std::size_t{16384},
                                  std::size_t{16400}, std::size_t{65539}}) {
    const std::size_t total = groups * bytes;
    auto src = t.alloc<std::byte>(total), dst = t.alloc<std::byte>(total + 64);
    for (int r = 0; r < t.n(); ++r) {
      const auto h = host_pattern(1000u * static_cast<std::uint64_t>(r) + bytes, total);
      t.write(src[static_cast<std::size_t>(r)], h.data(), total, r);
      t.poison(dst[static_cast<std::size_t>(r)], total + 64, r);
    }
    t.on_ranks([&](int r) {
      const auto R = static_cast<std::size_t>(r);
      if (get) get_slices<G><<<1, kThreads, 0, t.stream(r)>>>(t.ep(r), dst[R], src[R], bytes, nbi, t.st(r));
      else put_slices<G><<<1, kThreads, 0, t.stream(r)>>>(t.ep(r), dst[R], src[R], bytes, nbi, t.st(r));
    });
    t.finish_all();
    t.expect_ok(get ? "get" : "put");
    for (int r = 0; r < t.n(); ++r) {
      const int from = (r + t.n() - 1) % t.n();  // put: the sender; get: whom r read from
      const auto want = host_pattern(1000u * static_cast<std::uint64_t>(from) + bytes, total);
      const auto got = t.read(dst[static_cast<std::size_t>(r)], total + 64, r);
      const auto bad = std::mismatch(want.begin(), want.end(), got.begin());
      EXPECT_EQ(bad.first, want.end()) << (get ? "get" : "put") << (nbi ? "_nbi" : "") << " of " << bytes << " bytes x "
                                       << groups << " groups, rank " << r << ": first wrong byte at "
                                       << (bad.first - want.begin());
      EXPECT_TRUE(std::all_of(got.begin() + static_cast<long>(total), got.end(), [](std::byte b) { return b == std::byte{kPoison}; }))
          << "bytes after the destination changed";
    }
  }
}
}  // namespace

TEST_P(RmaGpu, PutAtEveryScope) {
  put_get_every_size<gv::rma::Thread>(*this, false, false);
  put_get_every_size<gv::rma::Warp>(*this, false, false);
  put_get_every_size<gv::rma::Block>(*this, false, true);
}

TEST_P(RmaGpu, GetAtEveryScope) {
  put_get_every_size<gv::rma::Thread>(*this, true, false);
  put_get_every_size<gv::rma::Warp>(*this, true, true);
  put_get_every_size<gv::rma::Block>(*this, true, false);
}

// A block's put (and put_nbi) from and to offsets of every 16-byte alignment class: ends that are both
// 16-byte aligned take the one-word-a-member loop up to 8 words a member (16384 B at 128 threads) and
// the batches beyond it; any other pair takes the general copy. Every byte lands once, none around it.
TEST_P(RmaGpu, BlockPutAtEveryAlignment) {
  constexpr std::size_t kMax = 16400, kPad = 64;
  auto src = alloc<std::byte>(kMax + kPad), dst = alloc<std::byte>(kMax + 2 * kPad);
  for (const std::size_t so : {std::size_t{0}, std::size_t{1}, std::size_t{8}}) {
    for (const std::size_t dof : {std::size_t{0}, std::size_t{4}, std::size_t{8}}) {
      for (const std::size_t bytes : {std::size_t{15}, std::size_t{16}, std::size_t{100}, std::size_t{2048},
                                      std::size_t{16384}, std::size_t{16400}}) {
        const bool nbi = (so + dof + bytes) % 2 == 1;
        const auto seed = [&](int r) { return 7919u * static_cast<std::uint64_t>(r) + 31u * so + 17u * dof + bytes; };
        for (int r = 0; r < n(); ++r) {
          const auto h = host_pattern(seed(r), kMax + kPad);
          write(src[static_cast<std::size_t>(r)], h.data(), kMax + kPad, r);
          poison(dst[static_cast<std::size_t>(r)], kMax + 2 * kPad, r);
        }
        on_ranks([&](int r) {
          const auto R = static_cast<std::size_t>(r);
          put_slices<gv::rma::Block>
              <<<1, 128, 0, stream(r)>>>(ep(r), dst[R] + kPad + dof, src[R] + so, bytes, nbi, st(r));
        });
        finish_all();
        expect_ok(nbi ? "put_nbi" : "put");
        for (int r = 0; r < n(); ++r) {
          const auto from = host_pattern(seed((r + n() - 1) % n()), kMax + kPad);
          const auto got = read(dst[static_cast<std::size_t>(r)], kMax + 2 * kPad, r);
          const auto at = static_cast<long>(kPad + dof);
          const auto first = from.begin() + static_cast<long>(so), last = first + static_cast<long>(bytes);
          const auto bad = std::mismatch(first, last, got.begin() + at);
          EXPECT_EQ(bad.first, last) << bytes << " bytes from offset " << so << " to " << dof << ", rank " << r
                                     << ": first wrong byte at " << (bad.first - first);
          const auto poisoned = [](std::byte b) { return b == std::byte{kPoison}; };
          EXPECT_TRUE(std::all_of(got.begin(), got.begin() + at, poisoned) &&
                      std::all_of(got.begin() + at + static_cast<long>(bytes), got.end(), poisoned))
              << bytes << " bytes from offset " << so << " to " << dof << ", rank " << r << ": bytes around it changed";
        }
      }
    }
  }
}

namespace {
template <class G>
void put_signal_many_blocks(RmaGpu& t, std::size_t bytes, int rounds, unsigned threads = 128) {
  constexpr unsigned kBlocks = 8;
  auto buf = t.alloc<std::byte>(kBlocks * bytes), src = t.alloc<std::byte>(kBlocks * bytes);
  auto sig = t.alloc<std::uint64_t>(kBlocks), ack = t.alloc<std::uint64_t>(kBlocks);
  auto errors = t.alloc<std::uint32_t>(1);
  t.on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    put_signal_rounds<G><<<kBlocks, threads, 0, t.stream(r)>>>(t.ep(r), buf[R], src[R], bytes, sig[R], ack[R], rounds,
                                                               t.st(r), errors[R]);
  });
  t.finish_all();
  t.expect_ok("put_signal");
  for (int r = 0; r < t.n(); ++r) {
    EXPECT_EQ(t.read(errors[static_cast<std::size_t>(r)], 1, r)[0], 0u)
        << "rank " << r << " saw data that was not there when its signal arrived (" << bytes << " bytes)";
    const auto s = t.read(sig[static_cast<std::size_t>(r)], kBlocks, r);
    for (unsigned b = 0; b < kBlocks; ++b) EXPECT_EQ(s[b], static_cast<std::uint64_t>(rounds)) << "block " << b;
  }
}
}  // namespace

TEST_P(RmaGpu, PutSignalManyBlocksDataBeforeSignal) {
  // Whole 8-byte words take put_signal_words' tiers (one word a member, then up to eight; a
  // block's own of one word a thread); every other size the general copy.
  put_signal_many_blocks<gv::rma::Thread>(*this, 8, 100);
  put_signal_many_blocks<gv::rma::Thread>(*this, 24, 60);
  put_signal_many_blocks<gv::rma::Thread>(*this, 64, 60);
  put_signal_many_blocks<gv::rma::Thread>(*this, 72, 40);
  put_signal_many_blocks<gv::rma::Thread>(*this, 13, 40);
  put_signal_many_blocks<gv::rma::Warp>(*this, 256, 60);
  put_signal_many_blocks<gv::rma::Warp>(*this, 264, 40);
  put_signal_many_blocks<gv::rma::Warp>(*this, 2048, 40);
  // A block's put_signal of up to kBlockByWarp bytes is its first warp's (the other warps wait):
  // a word, an odd size and the largest such; then the block's own copy.
  put_signal_many_blocks<gv::rma::Block>(*this, 8, 100);
  put_signal_many_blocks<gv::rma::Block>(*this, 1000, 40);
  put_signal_many_blocks<gv::rma::Block>(*this, gv::rma::detail::kBlockByWarp, 40);
  put_signal_many_blocks<gv::rma::Block>(*this, 4096, 40);
  put_signal_many_blocks<gv::rma::Block>(*this, 4096, 40, 512);  // a word a thread
  put_signal_many_blocks<gv::rma::Block>(*this, 100003, 5);
}

namespace {
/// put_signal from every group of a block of 128 (each its own slice, 64 poisoned bytes between
/// slices), from and to offsets of three alignment classes, at sizes in and just past each of
/// put_signal_words' tiers: every byte lands once, none around it, and every signal is 1.
template <class G>
void put_signal_every_alignment(RmaGpu& t) {
  constexpr unsigned kThreads = 128;
  const unsigned groups = groups_in<G>(kThreads);
  constexpr std::size_t kMax = 4096, kPad = 64, kStride = kMax + 16 + kPad;
  const std::size_t area = groups * kStride + 2 * kPad;
  auto src = t.alloc<std::byte>(area), dst = t.alloc<std::byte>(area);
  auto sig = t.alloc<std::uint64_t>(groups);
  const std::vector<std::uint64_t> zeros(groups, 0);
  for (const std::size_t so : {std::size_t{0}, std::size_t{8}, std::size_t{1}}) {
    for (const std::size_t dof : {std::size_t{0}, std::size_t{8}, std::size_t{4}}) {
      for (const std::size_t bytes : {std::size_t{8}, std::size_t{13}, std::size_t{24}, std::size_t{64}, std::size_t{72},
                                      std::size_t{128}, std::size_t{256}, std::size_t{264}, std::size_t{2048}, kMax}) {
        const auto seed = [&](int r) { return 6151u * static_cast<std::uint64_t>(r) + 37u * so + 11u * dof + bytes; };
        for (int r = 0; r < t.n(); ++r) {
          const auto h = host_pattern(seed(r), area);
          t.write(src[static_cast<std::size_t>(r)], h.data(), area, r);
          t.poison(dst[static_cast<std::size_t>(r)], area, r);
          t.write(sig[static_cast<std::size_t>(r)], zeros.data(), groups * sizeof(std::uint64_t), r);
        }
        t.on_ranks([&](int r) {
          const auto R = static_cast<std::size_t>(r);
          put_signal_slices<G><<<1, kThreads, 0, t.stream(r)>>>(t.ep(r), dst[R] + kPad + dof, src[R] + so, bytes, kStride,
                                                                sig[R], t.st(r));
        });
        t.finish_all();
        t.expect_ok("put_signal");
        for (int r = 0; r < t.n(); ++r) {
          const auto from = host_pattern(seed((r + t.n() - 1) % t.n()), area);
          const auto got = t.read(dst[static_cast<std::size_t>(r)], area, r);
          std::vector<std::byte> want(area, std::byte{kPoison});
          for (unsigned k = 0; k < groups; ++k)
            std::copy_n(from.begin() + static_cast<long>(so + k * kStride), bytes,
                        want.begin() + static_cast<long>(kPad + dof + k * kStride));
          const auto bad = std::mismatch(want.begin(), want.end(), got.begin());
          EXPECT_EQ(bad.first, want.end()) << bytes << " bytes from offset " << so << " to " << dof << ", rank " << r
                                           << ": first wrong byte at " << (bad.first - want.begin()) << " (slices "
                                           << kStride << " apart from " << kPad + dof << ")";
          const auto s = t.read(sig[static_cast<std::size_t>(r)], groups, r);
          EXPECT_TRUE(std::all_of(s.begin(), s.end(), [](std::uint64_t v) { return v == 1; }))
              << bytes << " bytes from offset " << so << " to " << dof << ", rank " << r << ": a signal is not 1";
        }
      }
    }
  }
}
}  // namespace

TEST_P(RmaGpu, PutSignalAtEveryAlignmentAndScope) {
  put_signal_every_alignment<gv::rma::Thread>(*this);
  put_signal_every_alignment<gv::rma::Warp>(*this);
  put_signal_every_alignment<gv::rma::Block>(*this);
}

TEST_P(RmaGpu, AtomicsAreExactlyOnce) {
  constexpr int kBlocks = 2, kThreads = 64, kPer = 10;
  const std::size_t per_rank = kBlocks * kThreads * kPer;
  auto c64 = alloc<std::uint64_t>(1);
  auto c32 = alloc<std::uint32_t>(2);
  auto cas = alloc<std::uint64_t>(1);
  auto winners = alloc<std::uint32_t>(1);
  auto o64 = alloc<std::uint64_t>(per_rank);
  auto o32 = alloc<std::uint32_t>(per_rank);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    atomics_exactly_once<<<kBlocks, kThreads, 0, stream(r)>>>(ep(r), c64[R], c32[R] + 1, o64[R], o32[R], kPer, cas[R],
                                                             winners[R], st(r));
  });
  finish_all();
  expect_ok("atomics");
  const std::uint64_t total = per_rank * static_cast<std::size_t>(n());
  EXPECT_EQ(read(c64[0], 1, 0)[0], total);
  EXPECT_EQ(read(c32[0], 2, 0)[1], total);
  EXPECT_EQ(read(c32[0], 2, 0)[0], 0u) << "a 32-bit atomic changed its neighbour";
  std::vector<std::uint64_t> all64, all32;
  std::uint32_t won = 0;
  for (int r = 0; r < n(); ++r) {
    const auto a = read(o64[static_cast<std::size_t>(r)], per_rank, r);
    const auto b = read(o32[static_cast<std::size_t>(r)], per_rank, r);
    all64.insert(all64.end(), a.begin(), a.end());
    all32.insert(all32.end(), b.begin(), b.end());
    won += read(winners[static_cast<std::size_t>(r)], 1, r)[0];
  }
  std::sort(all64.begin(), all64.end());
  std::sort(all32.begin(), all32.end());
  for (std::uint64_t i = 0; i < total; ++i) {
    ASSERT_EQ(all64[i], i) << "64-bit fetch_add: an old value seen twice or never";
    ASSERT_EQ(all32[i], i) << "32-bit fetch_add: an old value seen twice or never";
  }
  EXPECT_EQ(won, 1u) << "compare_swap must have exactly one winner";
}

TEST_P(RmaGpu, PAndGOfEveryWidth) {
  auto w8 = alloc<std::uint8_t>(8);
  auto w16 = alloc<std::int16_t>(4);
  auto w32 = alloc<std::int32_t>(2);
  auto w64 = alloc<std::uint64_t>(1);
  auto wd = alloc<double>(1);
  auto errors = alloc<std::uint32_t>(1);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    p_and_g<<<1, 32, 0, stream(r)>>>(ep(r), w8[R] + 3, w16[R] + 1, w32[R] + 1, w64[R], wd[R], st(r), errors[R]);
  });
  finish_all();
  expect_ok("p/g");
  for (int r = 0; r < n(); ++r) EXPECT_EQ(read(errors[static_cast<std::size_t>(r)], 1, r)[0], 0u) << "rank " << r;
}

TEST_P(RmaGpu, BarrierSeparatesRounds) {
  auto slots = alloc<std::uint64_t>(64);
  auto errors = alloc<std::uint32_t>(1);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    barrier_rounds<<<1, 64, 0, stream(r)>>>(ep(r), slots[R], 50, st(r), errors[R]);
  });
  expect_ok("barrier");
  for (int r = 0; r < n(); ++r) EXPECT_EQ(read(errors[static_cast<std::size_t>(r)], 1, r)[0], 0u) << "rank " << r;
}

TEST_P(RmaGpu, BadInputGetsAStatus) {
  make(GetParam().transport, std::size_t{1} << 20, gv::Budget{20'000'000});  // 20 ms: the last wait must time out
  auto buf = alloc<std::byte>(256);
  poison(buf[0], 256, 0);
  on_ranks([&](int r) {
    if (r == 0) bad_input<<<1, 32, 0, stream(r)>>>(ep(r), buf[0], st(r));
  });
  const auto s = read(st(0), 8, 0);
  const Status want[] = {Status::kInvalidPe, Status::kInvalidPe, Status::kOutOfBounds, Status::kOutOfBounds,
                         Status::kOutOfBounds, Status::kInvalidArgument, Status::kOutOfBounds, Status::kTimeout};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(static_cast<Status>(s[static_cast<std::size_t>(i)]), want[i])
        << "request " << i << ": " << gv::to_string(static_cast<Status>(s[static_cast<std::size_t>(i)]));
  const auto b = read(buf[0], 256, 0);
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{kPoison}; }));
}

// World::abort(): every GPU operation of that rank returns kAborted, to itself and to a peer,
// but a p2p put_nbi (to itself, or to a peer over p2p), which waits for nothing and reads no
// abort word there (its quiet, the last operation, reports the abort). A p2p operation the abort overtakes may land (rma.hpp), so only
// the status is checked here; the host ranks' test (RmaFaults.AfterAbort...) checks that nothing
// is touched there.
TEST_P(RmaGpu, AfterAbortEveryOperationReturnsAborted) {
  auto buf = alloc<std::byte>(1024), local = alloc<std::byte>(64);
  world(0).abort();
  for (const int pe : {0, 1}) {
    poison(st(0), 64, 0);
    on_ranks([&](int r) {
      if (r == 0) after_abort<<<1, 32, 0, stream(r)>>>(ep(r), buf[0], local[0], pe, st(r));
    });
    const auto s = read(st(0), 12, 0);
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(static_cast<Status>(s[static_cast<std::size_t>(i)]),
                i == 2 && (pe == 0 || GetParam().transport != Transport::kIb) ? Status::kOk : Status::kAborted)
          << "operation " << i << " to PE " << pe << ": " << gv::to_string(static_cast<Status>(s[static_cast<std::size_t>(i)]));
  }
}

TEST_P(RmaGpu, RandomSoakIsExactlyOnce) {
  constexpr int kBlocks = 4, kThreads = 128;
  const int ops = 1'000'000 / (kBlocks * kThreads * n()) + 1;  // 1e6 operations over all ranks
  const auto N = static_cast<std::size_t>(n());
  auto counters = alloc<std::uint64_t>(N), arrivals = alloc<std::uint64_t>(N), mail = alloc<std::uint64_t>(8 * N);
  auto payloads = alloc<std::uint64_t>(8 * kBlocks * kThreads);
  auto tally_add = alloc<std::uint64_t>(N), tally_put = alloc<std::uint64_t>(N);
  on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    soak<<<kBlocks, kThreads, 0, stream(r)>>>(ep(r), counters[R], arrivals[R], mail[R], payloads[R], tally_add[R],
                                              tally_put[R], ops, st(r));
  });
  finish_all();
  expect_ok("soak");
  std::vector<std::vector<std::uint64_t>> adds, puts;
  for (int r = 0; r < n(); ++r) {
    adds.push_back(read(tally_add[static_cast<std::size_t>(r)], N, r));
    puts.push_back(read(tally_put[static_cast<std::size_t>(r)], N, r));
  }
  std::uint64_t ops_seen = 0;
  for (int q = 0; q < n(); ++q) {
    const auto c = read(counters[static_cast<std::size_t>(q)], N, q);
    const auto a = read(arrivals[static_cast<std::size_t>(q)], N, q);
    for (std::size_t s = 0; s < N; ++s) {
      EXPECT_EQ(c[s], adds[s][static_cast<std::size_t>(q)]) << "adds of rank " << s << " at rank " << q;
      EXPECT_EQ(a[s], puts[s][static_cast<std::size_t>(q)]) << "put_signals of rank " << s << " at rank " << q;
      ops_seen += a[s];
    }
  }
  EXPECT_GT(ops_seen, 100000u);
}

namespace {
/// Which calls ll_every_size makes: put_ll/wait_ll or an LlChannel's put/wait (ll_rounds), an
/// LlChannel's wait_put around the ring or in a ping-pong (ll_wait_put_rounds).
enum class LlCalls { kPutWait, kChannel, kWaitPut, kWaitPutPingPong };

/// Those calls' rounds at every size min_bytes..max_bytes (300 B: past one batch of a thread, 64 B,
/// and one word per thread of a block; or as given), four blocks at once.
template <class G, LlCalls kCalls = LlCalls::kPutWait>
void ll_every_size(RmaGpu& t, unsigned threads, std::size_t min_bytes = 0, std::size_t max_bytes = 300) {
  constexpr unsigned kBlocks = 4;
  const std::size_t box_span = (gv::rma::ll_bytes(max_bytes) + 15) & ~std::size_t{15};
  auto box = t.alloc<std::byte>(kBlocks * box_span);
  auto src = t.alloc<std::byte>(kBlocks * (max_bytes + 16)), out = t.alloc<std::byte>(kBlocks * (max_bytes + 16));
  auto errors = t.alloc<std::uint32_t>(1);
  t.on_ranks([&](int r) {
    const auto R = static_cast<std::size_t>(r);
    if constexpr (kCalls == LlCalls::kPutWait || kCalls == LlCalls::kChannel)
      ll_rounds<G, kCalls == LlCalls::kChannel><<<kBlocks, threads, 0, t.stream(r)>>>(t.ep(r), box[R], src[R], out[R], min_bytes,
                                                                                      max_bytes, t.st(r), errors[R]);
    else
      ll_wait_put_rounds<G, kCalls == LlCalls::kWaitPutPingPong><<<kBlocks, threads, 0, t.stream(r)>>>(
          t.ep(r), box[R], src[R], out[R], min_bytes, max_bytes, t.st(r), errors[R]);
  });
  t.finish_all();
  static constexpr const char* kWhat[] = {"put_ll/wait_ll", "LlChannel put/wait", "LlChannel wait_put",
                                          "LlChannel wait_put (ping-pong)"};
  t.expect_ok(kWhat[static_cast<int>(kCalls)]);
  for (int r = 0; r < t.n(); ++r)
    EXPECT_EQ(t.read(errors[static_cast<std::size_t>(r)], 1, r)[0], 0u) << "rank " << r << ", " << threads << " threads a group";
}
}  // namespace

// Flag-in-data messages around the ring at every scope: every size 0..300 at every alignment of
// source and destination, four blocks at once, each checked byte for byte on the device.
TEST_P(RmaGpu, LlEverySizeAtEveryAlignmentAndScope) {
  ll_every_size<gv::rma::Thread>(*this, 1);
  ll_every_size<gv::rma::Warp>(*this, 32);
  ll_every_size<gv::rma::Block>(*this, 256);
}

// The same rounds through an LlChannel per block (opened once, credit read with the polls).
TEST_P(RmaGpu, LlChannelEverySizeAtEveryAlignmentAndScope) {
  ll_every_size<gv::rma::Thread, LlCalls::kChannel>(*this, 1);
  ll_every_size<gv::rma::Warp, LlCalls::kChannel>(*this, 32);
  ll_every_size<gv::rma::Block, LlCalls::kChannel>(*this, 256);
}

// A warp's and a block's channel past a line a member, through every receive batch of their
// common case (a warp's two lines a lane at 257-512 B, four at 513 B-1 KiB; a block of 64's
// line a member to 512 B) and just past it (the general path).
TEST_P(RmaGpu, LlChannelEverySizeToPastItsCommonCase) {
  ll_every_size<gv::rma::Warp, LlCalls::kChannel>(*this, 32, 250, 1040);
  ll_every_size<gv::rma::Block, LlCalls::kChannel>(*this, 64, 500, 530);
}

// wait_put around the ring at every scope: sizes to past a thread's batch (64 B) and a warp's line
// a lane (256 B), then a warp's every receive batch to past its common case (1 KiB); the relay
// (src is out) after each.
TEST_P(RmaGpu, LlChannelWaitPutEverySizeAndScopeAndRelays) {
  ll_every_size<gv::rma::Thread, LlCalls::kWaitPut>(*this, 1);
  ll_every_size<gv::rma::Warp, LlCalls::kWaitPut>(*this, 32);
  ll_every_size<gv::rma::Warp, LlCalls::kWaitPut>(*this, 32, 250, 1040);
  ll_every_size<gv::rma::Block, LlCalls::kWaitPut>(*this, 256);
}

// wait_put in a ping-pong between ranks 0 and 1, as gv_rma measures it: there the credit for each
// reply comes with the round it answers, so a thread's and a warp's single pass is the common case.
TEST_P(RmaGpu, LlChannelWaitPutPingPongEverySizeAndScope) {
  ll_every_size<gv::rma::Thread, LlCalls::kWaitPutPingPong>(*this, 1);
  ll_every_size<gv::rma::Warp, LlCalls::kWaitPutPingPong>(*this, 32, 0, 1040);
  ll_every_size<gv::rma::Block, LlCalls::kWaitPutPingPong>(*this, 256);
}

namespace {
template <class G>
void ll_wait_unsent_times_out(RmaGpu& t, unsigned threads, std::size_t bytes) {
  auto box = t.alloc<std::byte>(gv::rma::ll_bytes(bytes)), dst = t.alloc<std::byte>(bytes);
  auto status = t.alloc<std::uint32_t>(threads);
  t.poison(dst[0], bytes, 0);
  t.poison(status[0], threads * sizeof(std::uint32_t), 0);
  t.on_ranks([&](int r) {
    if (r == 0) ll_wait_unsent<G><<<1, threads, 0, t.stream(r)>>>(t.ep(r), box[0], bytes, dst[0], status[0]);
  });
  const auto s = t.read(status[0], threads, 0);
  for (unsigned m = 0; m < threads; ++m)
    EXPECT_EQ(static_cast<Status>(s[m]), Status::kTimeout)
        << threads << " threads, " << bytes << " B, member " << m << ": " << gv::to_string(static_cast<Status>(s[m]));
  const auto d = t.read(dst[0], bytes, 0);
  EXPECT_TRUE(std::all_of(d.begin(), d.end(), [](std::byte x) { return x == std::byte{kPoison}; }))
      << threads << " threads, " << bytes << " B: the destination was written";
}
}  // namespace

// A round that never comes: every member of every scope leaves the wait with kTimeout once the
// budget is spent, together (a warp's lanes poll their own lines and leave on one vote, lane 0's
// clock deciding for all), with lanes that have a line and lanes that have none, in one poll
// batch and in several, and nothing is written to the destination.
TEST_P(RmaGpu, LlChannelWaitForARoundNeverSentTimesOutInEveryMember) {
  make(GetParam().transport, std::size_t{1} << 20, gv::Budget{20'000'000});  // 20 ms
  for (const std::size_t bytes : {8, 256, 1024}) {
    ll_wait_unsent_times_out<gv::rma::Thread>(*this, 1, bytes);
    ll_wait_unsent_times_out<gv::rma::Warp>(*this, 32, bytes);
    ll_wait_unsent_times_out<gv::rma::Block>(*this, 128, bytes);
  }
}

namespace {
template <class G>
void wait_word_outcomes(RmaGpu& t, unsigned threads) {
  auto word = t.alloc<std::uint64_t>(1), seen = t.alloc<std::uint64_t>(threads);
  auto status = t.alloc<std::uint32_t>(threads);
  const std::uint64_t value = 0x5eed5eed5eedull;
  t.write(word[0], &value, sizeof(value), 0);
  for (const bool with_seen : {false, true}) {
    for (const std::uint64_t want : {value, value + 1}) {
      t.poison(status[0], threads * sizeof(std::uint32_t), 0);
      t.poison(seen[0], threads * sizeof(std::uint64_t), 0);
      t.on_ranks([&](int r) {
        if (r == 0) wait_word<G><<<1, threads, 0, t.stream(r)>>>(t.ep(r), word[0], want, with_seen, status[0], seen[0]);
      });
      const Status expect = want == value ? Status::kOk : Status::kTimeout;
      const auto s = t.read(status[0], threads, 0);
      const auto v = t.read(seen[0], threads, 0);
      for (unsigned m = 0; m < threads; ++m) {
        EXPECT_EQ(static_cast<Status>(s[m]), expect) << threads << " threads, seen " << with_seen << ", member " << m
                                                     << ": " << gv::to_string(static_cast<Status>(s[m]));
        EXPECT_EQ(v[m], with_seen ? value : ~std::uint64_t{0})
            << threads << " threads, seen " << with_seen << ", member " << m;
      }
    }
  }
}
}  // namespace

// The endpoint says whether every direct peer's heap is in this rank's GPU memory (signals to
// them are then released at device scope): this rank, and p2p ranks on the same GPU; a rank
// reached over ib is not a direct peer, a p2p rank on another GPU clears it.
TEST_P(RmaGpu, EndpointSaysWhetherItsDirectPeersShareItsGpu) {
  for (int r = 0; r < n(); ++r) {
    bool want = true;
    for (int q = 0; q < n(); ++q) {
      const bool direct = q == r || GetParam().transport == Transport::kP2p;
      if (direct && world(q).gpu() != world(r).gpu()) want = false;
    }
    EXPECT_EQ(ep(r).direct_same_gpu, want ? 1u : 0u) << "rank " << r;
  }
}

// wait_until at every scope hands every member the leader's outcome: kOk when the word holds,
// kTimeout once the budget is spent when it never does, with and without `seen` (a block shares
// its status through a different path without it), and `seen` the value the poll last read.
TEST_P(RmaGpu, WaitUntilGivesEveryMemberTheOutcomeWithAndWithoutSeen) {
  make(GetParam().transport, std::size_t{1} << 20, gv::Budget{20'000'000});  // 20 ms
  wait_word_outcomes<gv::rma::Thread>(*this, 1);
  wait_word_outcomes<gv::rma::Warp>(*this, 32);
  wait_word_outcomes<gv::rma::Block>(*this, 128);
  wait_word_outcomes<gv::rma::Block>(*this, 1024);
}

INSTANTIATE_TEST_SUITE_P(Transports, RmaGpu,
                         // 3 and 4 ranks oversubscribe the GPUs of a one- or two-GPU machine: the
                         // code paths of N > 2 ranks, not a scaling result.
                         ::testing::Values(GpuParam{Transport::kP2p, 2}, GpuParam{Transport::kP2p, 3},
                                           GpuParam{Transport::kP2p, 4}, GpuParam{Transport::kIb, 2},
                                           GpuParam{Transport::kIb, 3}, GpuParam{Transport::kIb, 4}),
                         gpu_param_name);

}  // namespace gvt
