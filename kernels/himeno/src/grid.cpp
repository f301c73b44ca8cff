#include <gpuverbs/himeno/grid.hpp>
#include <gpuverbs/himeno/sweep.hpp>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

namespace gv::himeno {

GridSize grid_size(SizeClass s) {
  switch (s) {
    case SizeClass::XS: return {32, 32, 64};
    case SizeClass::S: return {64, 64, 128};
    case SizeClass::M: return {128, 128, 256};
    case SizeClass::L: return {256, 256, 512};
    case SizeClass::XL: return {512, 512, 1024};
  }
  throw std::invalid_argument("unknown Himeno size class");
}

std::optional<SizeClass> parse_size_class(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(),
                 [](unsigned char ch) { return char(std::toupper(ch)); });
  for (SizeClass s : {SizeClass::XS, SizeClass::S, SizeClass::M, SizeClass::L, SizeClass::XL})
    if (up == to_string(s)) return s;
  return std::nullopt;
}

const char* to_string(SizeClass s) {
  switch (s) {
    case SizeClass::XS: return "XS";
    case SizeClass::S: return "S";
    case SizeClass::M: return "M";
    case SizeClass::L: return "L";
    case SizeClass::XL: return "XL";
  }
  return "?";
}

Layout make_layout(int ni, int nj, int nk) {
  if (ni < 3 || nj < 3 || nk < 3)
    throw std::invalid_argument("Himeno grid " + std::to_string(ni) + "x" + std::to_string(nj) +
                                "x" + std::to_string(nk) +
                                " has no interior point: every dimension must be >= 3");
  return Layout{ni, nj, nk, (nk + 3) / 4 * 4};
}

void check_range(const Layout& l, PlaneRange r) {
  if (r.begin < 1 || r.end > l.ni - 1 || r.begin > r.end)
    throw std::invalid_argument("plane range [" + std::to_string(r.begin) + ", " +
                                std::to_string(r.end) + ") is not inside the interior planes [1, " +
                                std::to_string(l.ni - 1) + ")");
}

Halves split_halves(PlaneRange r) {
  const int mid = r.begin + r.size() / 2;
  return {{r.begin, mid}, {mid, r.end}};
}

Slab make_slab(const GridSize& g, int parts, int part) {
  const int interior = g.ni - 2;
  if (parts < 1 || part < 0 || part >= parts)
    throw std::invalid_argument("slab " + std::to_string(part) + " of " + std::to_string(parts) +
                                " does not exist");
  if (interior < parts)
    throw std::invalid_argument(std::to_string(interior) + " interior planes cannot be split into " +
                                std::to_string(parts) + " non-empty slabs");
  const int base = interior / parts, extra = interior % parts;
  Slab s;
  s.global = g;
  s.part = part;
  s.parts = parts;
  s.planes = base + (part < extra ? 1 : 0);
  s.first_plane = 1 + part * base + std::min(part, extra);
  s.local = make_layout(s.planes + 2, g.nj, g.nk);
  return s;
}

LaunchPlan plan_sweep(const Layout& l, PlaneRange r, int planes_per_block, Arithmetic arithmetic) {
  check_range(l, r);
  LaunchPlan p;
  const int groups = l.pitch / 4;
  p.groups_x = 1;
  while (p.groups_x < groups && p.groups_x < 32) p.groups_x *= 2;
  p.rows = LaunchPlan::kThreads / p.groups_x;
  p.planes_per_block = planes_per_block > 0 ? planes_per_block : kDefaultPlanesPerBlock;
  p.arithmetic = arithmetic;
  p.grid_x = (groups + p.groups_x - 1) / p.groups_x;
  p.grid_y = (l.nj - 2 + p.rows - 1) / p.rows;
  p.grid_z = (r.size() + p.planes_per_block - 1) / p.planes_per_block;
  if (r.empty()) p.grid_x = p.grid_y = p.grid_z = 0;
  return p;
}

std::int64_t max_sweep_blocks(const Layout& l) {
  // Every block of a sweep holds at least one plane, so one-plane runs over every interior
  // plane bound any set of disjoint sweeps.
  const LaunchPlan p = plan_sweep(l, {1, l.ni - 1}, 1);
  return std::int64_t(p.grid_x) * p.grid_y * p.grid_z;
}

}  // namespace gv::himeno
