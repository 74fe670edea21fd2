// FIRE tables (score_mod.h, TableIndex::kFire) for the CUDA kernels' tests (fused_attention_test.cu
// on a GPU, the host emulation of the tensor-core kernels, gpu_check.cpp): a random table, the
// float64 reference terms, and the check that makes a float32 kernel comparable with float64 on it.
// Plain C++, no CUDA.
//
// f is continuous in x = ψ(t) / N_i, its slope is not: at a grid point it jumps, and so does a
// pair's share of d loss/d c and d loss/d L (and at L = i, the row's share of d loss/d L). Where
// rounding could put a pair on either side, float32 and float64 may both be right and still differ
// by that jump (a few percent of the c gradient at T = 200). The tests use tables where no visible
// pair is that close to a kink (fire_cells_unambiguous).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attention/score_mod.h"

namespace attention::cuda::test {

// Distance in x from a grid point under which float32 rounding (ψ, N_i and their quotient, a few
// ulp) might change a pair's cell.
constexpr double kFireCellMargin = 4e-7;

// Whether head row `row` (G + 2 values: f on the grid, c, L) has no visible pair (t ≤ i < T)
// within kFireCellMargin of a grid point where f's slope jumps, and L is not within rounding of a
// row index below T.
template <class Real>
bool fire_cells_unambiguous(const Real* row, int G, int T) {
  std::vector<double> copy(row, row + G + 2);  // float64: ψ and N_i as the reference has them
  const FireRow<double> fire{copy.data(), G};
  const double L = fire.threshold();
  if (L < T && std::fabs(L - std::round(L)) < 1e-6 * std::max(1.0, std::fabs(L))) return false;
  // Interior grid points where the slope jumps by more than 1% of its largest value: a pair there
  // changes the c gradient by ≲ 1% / sqrt(pairs) (a smooth f on a fine grid has no such points).
  double step = 0.0;
  for (int g = 0; g + 1 < G; ++g) step = std::max(step, std::fabs(copy[g + 1] - copy[g]));
  std::vector<char> kink(G, 0);
  for (int g = 1; g + 1 < G; ++g) kink[g] = std::fabs(copy[g + 1] - 2 * copy[g] + copy[g - 1]) > 1e-2 * step;
  std::vector<double> psi(T);
  for (int t = 0; t < T; ++t) psi[t] = fire.psi(static_cast<double>(t));
  for (int i = 0; i < T; ++i) {
    const double norm = fire.norm(i);
    for (int t = 0; t <= i; ++t) {
      const double u = psi[t] / norm * (G - 1);
      const int g = static_cast<int>(std::lround(u));
      if (g > 0 && g < G - 1 && kink[g] && std::fabs(u - g) < kFireCellMargin * (G - 1)) return false;
    }
  }
  return true;
}

// A random (heads, G + 2) table: f ~ N(0, 1) on the grid, c ≈ 0.1 and L ≈ 0.3·T (not an
// integer: rows on both sides of the threshold), c nudged per head until the head's cells are
// unambiguous at T.
inline std::vector<float> random_fire_table(int heads, int G, int T, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> nudge(0.9f, 1.1f);
  std::vector<float> table(static_cast<size_t>(heads) * (G + 2));
  for (int h = 0; h < heads; ++h) {
    float* row = table.data() + static_cast<size_t>(h) * (G + 2);
    for (int g = 0; g < G; ++g) row[g] = normal(rng);
    row[G + 1] = 0.3f * static_cast<float>(T) + 0.37f + 0.1f * static_cast<float>(h);
    for (int attempt = 0; attempt < 1000; ++attempt) {
      row[G] = 0.1f * nudge(rng);
      if (fire_cells_unambiguous(row, G, T)) break;
    }
  }
  return table;
}

// The float64 FIRE terms a reference adds: the bias of (i, t) and the gradient of a row's pairs.
// Inactive (no terms) without a FIRE table.
struct FireReference {
  std::vector<double> table;  // (H, G + 2) float64 copy of mod.bias_table (host pointer)
  int len = 0;                // G + 2

  FireReference(const ScoreMod& mod, int heads) {
    if (!has_query_bias(mod)) return;
    len = mod.bias_table_len;
    table.assign(mod.bias_table, mod.bias_table + static_cast<size_t>(heads) * len);
  }
  bool active() const { return !table.empty(); }
  FireRow<double> row(int h) const { return {table.data() + static_cast<size_t>(h) * len, len - 2}; }
  double bias(int h, int i, int t) const {
    const FireRow<double> r = row(h);
    return r.bias(r.psi(static_cast<double>(t)), r.norm(i));
  }
  // drow (head h's row of d loss/d table) += the gradient of row i's pairs, dlogit[j] for j ≤ i.
  void add_row_gradient(int h, int i, const std::vector<double>& dlogit, double* drow) const {
    const FireRow<double> r = row(h);
    const double norm = r.norm(i);
    FireRowSums<double> sums;
    for (int j = 0; j <= i; ++j)
      fire_pair_gradient(r, r.psi(static_cast<double>(i - j)), norm, i - j, dlogit[j], drow, sums);
    fire_row_gradient(r, i, sums, drow);
  }
};

// mod without its FIRE table (for score_mod.h's logit in float64: the reference adds FIRE's bias
// from FireReference).
inline ScoreMod without_query_bias(ScoreMod mod) {
  if (has_query_bias(mod)) mod.bias_table = nullptr;
  return mod;
}

}  // namespace attention::cuda::test
