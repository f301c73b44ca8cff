// Himeno on the host (CI, no GPU): geometry, initial values, the CPU references, and the GPU
// kernel's thread bodies run through emulate_sweep.
#include <gpuverbs/himeno/reference.hpp>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "compare.hpp"
#include "host_kernel.hpp"

namespace gv::himeno {
namespace {

using test::field_rel_error;
using test::HostKernel;
using test::rel_error;

TEST(HimenoGrid, NamedSizesAreTheBenchmarks) {
  EXPECT_EQ(grid_size(SizeClass::XS), (GridSize{32, 32, 64}));
  EXPECT_EQ(grid_size(SizeClass::S), (GridSize{64, 64, 128}));
  EXPECT_EQ(grid_size(SizeClass::M), (GridSize{128, 128, 256}));
  EXPECT_EQ(grid_size(SizeClass::L), (GridSize{256, 256, 512}));
  EXPECT_EQ(grid_size(SizeClass::XL), (GridSize{512, 512, 1024}));
  EXPECT_EQ(interior_points(grid_size(SizeClass::L)), 254LL * 254 * 510);
  EXPECT_EQ(parse_size_class("xl"), SizeClass::XL);
  EXPECT_EQ(parse_size_class("S"), SizeClass::S);
  EXPECT_EQ(parse_size_class("XXL"), std::nullopt);
}

TEST(HimenoGrid, LayoutPadsRowsTo16Bytes) {
  const Layout l = make_layout(5, 6, 63);
  EXPECT_EQ(l.pitch, 64);
  EXPECT_EQ(l.plane_elems(), 6 * 64);
  EXPECT_EQ(l.index(2, 3, 4), 2 * 6 * 64 + 3 * 64 + 4);
  EXPECT_EQ(l.plane_offset(4), 4 * 6 * 64);
  EXPECT_EQ(make_layout(3, 3, 64).pitch, 64);
  EXPECT_THROW(make_layout(2, 8, 8), std::invalid_argument);
  EXPECT_THROW(make_layout(8, 8, 2), std::invalid_argument);
}

TEST(HimenoGrid, RangesAndHalves) {
  const Layout l = make_layout(10, 8, 8);
  EXPECT_NO_THROW(check_range(l, {1, 9}));
  EXPECT_NO_THROW(check_range(l, {4, 4}));
  EXPECT_THROW(check_range(l, {0, 5}), std::invalid_argument);
  EXPECT_THROW(check_range(l, {1, 10}), std::invalid_argument);
  EXPECT_THROW(check_range(l, {6, 5}), std::invalid_argument);
  const Halves h = split_halves({1, 9});
  EXPECT_EQ(h.top, (PlaneRange{1, 5}));
  EXPECT_EQ(h.bottom, (PlaneRange{5, 9}));
  const Halves odd = split_halves({3, 6});
  EXPECT_EQ(odd.top, (PlaneRange{3, 4}));
  EXPECT_EQ(odd.bottom, (PlaneRange{4, 6}));
}

TEST(HimenoGrid, SlabsCoverTheInteriorOnceWithContiguousHalos) {
  const GridSize g = grid_size(SizeClass::XS);
  for (int parts = 1; parts <= 7; ++parts) {
    int next = 1;
    for (int part = 0; part < parts; ++part) {
      const Slab s = make_slab(g, parts, part);
      EXPECT_EQ(s.first_plane, next);
      EXPECT_GE(s.planes, (g.ni - 2) / parts);
      EXPECT_LE(s.planes, (g.ni - 2) / parts + 1);
      EXPECT_EQ(s.local.ni, s.planes + 2);
      EXPECT_EQ(s.owned(), (PlaneRange{1, s.planes + 1}));
      EXPECT_EQ(s.global_plane(0), s.first_plane - 1);
      const std::int64_t plane = s.local.plane_elems();
      EXPECT_EQ(s.recv_lower_offset(), 0);
      EXPECT_EQ(s.send_lower_offset(), plane);
      EXPECT_EQ(s.send_upper_offset(), s.planes * plane);
      EXPECT_EQ(s.recv_upper_offset(), (s.planes + 1) * plane);
      next += s.planes;
    }
    EXPECT_EQ(next, g.ni - 1) << parts << " parts";
  }
  EXPECT_THROW(make_slab(g, 31, 0), std::invalid_argument);
  EXPECT_THROW(make_slab(g, 2, 2), std::invalid_argument);
}

// Every interior (plane, row, 16-byte group) is owned by exactly one active thread, for whole
// and split ranges, odd sizes and every run length.
TEST(HimenoPlan, ThreadsCoverEachInteriorGroupOnce) {
  for (const Layout& l : {make_layout(32, 32, 64), make_layout(9, 13, 21), make_layout(7, 40, 300)})
    for (int ppb : {1, 3, 8})
      for (const PlaneRange r : {PlaneRange{1, l.ni - 1}, split_halves({1, l.ni - 1}).top,
                                 split_halves({1, l.ni - 1}).bottom}) {
        const LaunchPlan plan = plan_sweep(l, r, ppb);
        EXPECT_EQ(plan.groups_x * plan.rows, LaunchPlan::kThreads);
        std::map<std::tuple<int, int, int>, int> owners;
        for (int bz = 0; bz < plan.grid_z; ++bz)
          for (int by = 0; by < plan.grid_y; ++by)
            for (int bx = 0; bx < plan.grid_x; ++bx)
              for (int t = 0; t < LaunchPlan::kThreads; ++t) {
                const ThreadWork w = thread_work(plan, l, r, bx, by, bz, t);
                if (!w.active) continue;
                EXPECT_LE(w.i_end - w.i_begin, ppb);
                for (int i = w.i_begin; i < w.i_end; ++i) ++owners[{i, w.j, w.k0}];
              }
        const int groups = l.pitch / 4;
        EXPECT_EQ(owners.size(), std::size_t(r.size()) * (l.nj - 2) * groups);
        for (const auto& [at, n] : owners) {
          const auto [i, j, k0] = at;
          EXPECT_EQ(n, 1);
          EXPECT_TRUE(i >= r.begin && i < r.end && j >= 1 && j <= l.nj - 2 && k0 % 4 == 0 &&
                      k0 < l.pitch);
        }
      }
  EXPECT_EQ(plan_sweep(make_layout(9, 9, 9), {4, 4}).blocks(), 0);
  EXPECT_GE(max_sweep_blocks(make_layout(9, 9, 9)),
            plan_sweep(make_layout(9, 9, 9), {1, 8}, 1).blocks());
}

TEST(HimenoFields, StandardValues) {
  const HostFields f = standard_fields(grid_size(SizeClass::XS));
  const Layout& l = f.layout;
  for (const auto& [i, j, k] : {std::tuple{0, 0, 0}, {5, 7, 9}, {31, 31, 63}}) {
    const std::int64_t at = l.index(i, j, k);
    EXPECT_EQ(f.p[std::size_t(at)], float(i * i) / float(31 * 31));
    EXPECT_EQ(f.field(kA0)[at], 1.0f);
    EXPECT_EQ(f.field(kA3)[at], 1.0f / 6.0f);
    EXPECT_EQ(f.field(kB1)[at], 0.0f);
    EXPECT_EQ(f.field(kC2)[at], 1.0f);
    EXPECT_EQ(f.field(kBnd)[at], 1.0f);
    EXPECT_EQ(f.field(kWrk1)[at], 0.0f);
  }
  // A slab takes the global plane index: its local plane 1 is global plane first_plane.
  const Slab s = make_slab(grid_size(SizeClass::XS), 3, 1);
  EXPECT_EQ(standard_fields(s).p[std::size_t(s.local.index(1, 2, 3))],
            float(s.first_plane * s.first_plane) / float(31 * 31));
}

TEST(HimenoFields, RandomValuesDependOnThePointNotTheSlab) {
  const GridSize g{12, 9, 10};
  const HostFields whole = random_fields(g, 42);
  const Slab s = make_slab(g, 3, 1);
  const HostFields part = random_fields(s, 42);
  for (int i = 0; i < s.local.ni; ++i)
    for (int j = 0; j < g.nj; ++j)
      for (int k = 0; k < g.nk; ++k) {
        const std::int64_t a = s.local.index(i, j, k), b = whole.layout.index(s.global_plane(i), j, k);
        ASSERT_EQ(part.p[std::size_t(a)], whole.p[std::size_t(b)]);
        for (int c = 0; c < kCoefCount; ++c)
          ASSERT_EQ(part.field(Coef(c))[a], whole.field(Coef(c))[b]);
      }
  EXPECT_NE(random_fields(g, 43).p, whole.p);
  int masked = 0;
  for (float v : std::vector<float>(whole.field(kBnd), whole.field(kBnd) + whole.layout.elems()))
    masked += v == 0.0f;
  EXPECT_GT(masked, 0);
}

// The check value of the RIKEN distribution: XS, 3 iterations, float arithmetic.
TEST(HimenoReference, FloatReproducesTheBenchmarksXsCheckValue) {
  Reference<float> ref(standard_fields(grid_size(SizeClass::XS)));
  float gosa = 0.0f;
  for (int n = 0; n < 3; ++n) gosa = ref.iterate();
  EXPECT_GT(gosa, 6.2270e-3f);
  EXPECT_LT(gosa, 6.2280e-3f);
}

// With the standard values the first residual is the same at every interior point:
// (p(i+1) + p(i-1) + 4 p(i)) / 6 - p(i) = 1 / (3 (ni-1)^2), up to the float rounding of p.
TEST(HimenoReference, DoubleFirstGosaMatchesTheClosedForm) {
  for (SizeClass sc : {SizeClass::XS, SizeClass::S}) {
    const GridSize g = grid_size(sc);
    Reference<double> ref(standard_fields(g));
    const double ss = 1.0 / (3.0 * (g.ni - 1) * (g.ni - 1));
    EXPECT_LT(rel_error(ref.iterate(), double(interior_points(g)) * ss * ss), 2e-3) << to_string(sc);
  }
}

// Float (benchmark order) against double on the same inputs. The bounds are what float
// arithmetic allows here (measured: Gosa 4e-4 at XS, 2.8e-3 at S; p 3.5e-7).
TEST(HimenoReference, FloatTracksDoubleOnXsAndS) {
  for (const auto& [sc, gosa_bound] : {std::pair{SizeClass::XS, 1e-3}, {SizeClass::S, 5e-3}}) {
    const HostFields f = standard_fields(grid_size(sc));
    Reference<float> lo(f);
    Reference<double> hi(f);
    int n = 0;
    for (int target : {1, 3, 10, 30}) {
      float glo = 0.0f;
      double ghi = 0.0;
      for (; n < target; ++n) {
        glo = lo.iterate();
        ghi = hi.iterate();
      }
      EXPECT_LT(rel_error(glo, ghi), gosa_bound) << to_string(sc) << " n=" << n;
      EXPECT_LT(field_rel_error(f.layout, lo.p(), hi.p()), 1e-6) << to_string(sc) << " n=" << n;
      EXPECT_GT(ghi, 0.0);
    }
  }
}

struct KernelCase {
  SizeClass size;
  Arithmetic arithmetic;
  double gosa_bound, p_bound;
};

// The GPU sweep's thread bodies against the double reference, standard values. Double
// arithmetic meets the 1e-4; float arithmetic is bounded by its cancellation in ss.
TEST(HimenoEmulatedKernel, StandardValuesMatchDoubleReference) {
  for (const KernelCase c : {KernelCase{SizeClass::XS, Arithmetic::kDouble, 1e-4, 1e-4},
                             {SizeClass::S, Arithmetic::kDouble, 1e-4, 1e-4},
                             {SizeClass::XS, Arithmetic::kFloat, 1e-4, 1e-5},
                             {SizeClass::S, Arithmetic::kFloat, 1e-3, 1e-5}}) {
    const HostFields f = standard_fields(grid_size(c.size));
    Reference<double> ref(f);
    HostKernel gpu(f, c.arithmetic);
    int n = 0;
    for (int target : {1, 3, 10, 30}) {
      double want = 0.0, got = 0.0;
      for (; n < target; ++n) {
        want = ref.iterate();
        got = gpu.iterate();
      }
      const char* arith = c.arithmetic == Arithmetic::kDouble ? "double" : "float";
      EXPECT_LT(rel_error(got, want), c.gosa_bound) << to_string(c.size) << " " << arith << " n=" << n;
      EXPECT_LT(field_rel_error(f.layout, gpu.p(), ref.p()), c.p_bound)
          << to_string(c.size) << " " << arith << " n=" << n;
    }
  }
}

// Seeded random coefficients (masked points, b terms, wrk1) on an odd size with padded rows.
TEST(HimenoEmulatedKernel, RandomFieldsMatchDoubleReference) {
  const HostFields f = random_fields(GridSize{19, 23, 37}, 20261122);
  for (Arithmetic arith : {Arithmetic::kDouble, Arithmetic::kFloat}) {
    Reference<double> ref(f);
    HostKernel gpu(f, arith, 3);
    for (int n = 1; n <= 10; ++n) {
      const double want = ref.iterate(), got = gpu.iterate();
      EXPECT_LT(rel_error(got, want), 1e-5) << "n=" << n;
      EXPECT_LT(field_rel_error(f.layout, gpu.p(), ref.p()), 1e-5) << "n=" << n;
    }
  }
}

// Top and bottom halves launched separately compute the same points as one launch.
TEST(HimenoEmulatedKernel, SplitHalvesEqualOneSweep) {
  const HostFields f = random_fields(grid_size(SizeClass::XS), 7);
  HostKernel whole(f, Arithmetic::kDouble), split(f, Arithmetic::kDouble);
  const PlaneRange all{1, f.layout.ni - 1};
  const Halves h = split_halves(all);
  for (int n = 0; n < 5; ++n) {
    const double a = whole.iterate({all}), b = split.iterate({h.top, h.bottom});
    EXPECT_LT(rel_error(b, a), 1e-12);
    ASSERT_EQ(whole.p(), split.p()) << "n=" << n;
  }
}

// Slabs that exchange halo planes through the Slab offsets reproduce the whole grid exactly.
TEST(HimenoEmulatedKernel, SlabsWithHaloExchangeEqualTheWholeGrid) {
  const GridSize g = grid_size(SizeClass::XS);
  const HostFields whole_f = random_fields(g, 11);
  HostKernel whole(whole_f, Arithmetic::kDouble);
  constexpr int kParts = 3;
  std::vector<Slab> slabs;
  std::vector<HostFields> fields;
  for (int part = 0; part < kParts; ++part) {
    slabs.push_back(make_slab(g, kParts, part));
    fields.push_back(random_fields(slabs.back(), 11));
  }
  std::vector<HostKernel> parts;
  for (int part = 0; part < kParts; ++part) parts.emplace_back(fields[std::size_t(part)], Arithmetic::kDouble);
  for (int n = 0; n < 4; ++n) {
    const double want = whole.iterate();
    double got = 0.0;
    for (int part = 0; part < kParts; ++part)
      got += parts[std::size_t(part)].iterate({slabs[std::size_t(part)].owned()});
    // Exchange: each slab's first/last owned plane into its neighbour's halo.
    const std::size_t plane = std::size_t(slabs[0].local.plane_elems());
    for (int part = 0; part + 1 < kParts; ++part) {
      const Slab &lo = slabs[std::size_t(part)], &hi = slabs[std::size_t(part) + 1];
      float* lo_p = parts[std::size_t(part)].p().data();
      float* hi_p = parts[std::size_t(part) + 1].p().data();
      std::copy_n(lo_p + lo.send_upper_offset(), plane, hi_p + hi.recv_lower_offset());
      std::copy_n(hi_p + hi.send_lower_offset(), plane, lo_p + lo.recv_upper_offset());
    }
    EXPECT_LT(rel_error(got, want), 1e-12);
    for (int part = 0; part < kParts; ++part) {
      const Slab& s = slabs[std::size_t(part)];
      for (int i = 0; i < s.local.ni; ++i)
        for (int j = 0; j < g.nj; ++j)
          for (int k = 0; k < g.nk; ++k)
            ASSERT_EQ(parts[std::size_t(part)].p()[std::size_t(s.local.index(i, j, k))],
                      whole.p()[std::size_t(whole_f.layout.index(s.global_plane(i), j, k))])
                << "n=" << n << " part " << part << " (" << i << "," << j << "," << k << ")";
    }
  }
}

}  // namespace
}  // namespace gv::himeno
