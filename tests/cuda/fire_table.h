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
#include <cstdio>
#include <random>
#include <vector>

#include "attention/score_mod.h"
#include "tests/cuda/relative_error.h"

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
    // Beyond T = 512 a table without such a pair is not to be found (millions of pairs), and one
    // pair's jump is a negligible share of the gradient: one draw, the note below.
    const int attempts = T <= 512 ? 1000 : 1;
    bool unambiguous = false;
    for (int attempt = 0; attempt < attempts && !unambiguous; ++attempt) {
      row[G] = 0.1f * nudge(rng);
      unambiguous = fire_cells_unambiguous(row, G, T);
    }
    if (!unambiguous)
      std::printf("note: no FIRE table of head %d at T = %d without a pair on a kink; its c and L gradients may "
                  "differ by a kink's jump\n", h, T);
  }
  return table;
}

// d loss/d table of a FIRE table in its three parts, each as relative_error measures it: the grid
// (every head's G values), c and L. One measure over the whole row would be dominated by |d c|,
// 50–100× the rest at T = 200, and let a wrong grid or L gradient pass. d L sums terms of both
// signs over the rows below the threshold only, so its floor is 1% of |d c| (at least 1): dropping
// it still reads ~0.1, its rounding does not.
struct FireGradientErrors {
  double grid, c, threshold;
};
template <class Got>
FireGradientErrors fire_gradient_errors(const std::vector<Got>& got, const std::vector<double>& want, int G) {
  const size_t len = static_cast<size_t>(G) + 2, heads = want.size() / len;
  std::vector<double> got_parts[3], want_parts[3];
  for (size_t h = 0; h < heads; ++h)
    for (size_t e = 0; e < len; ++e) {
      const int part = e < static_cast<size_t>(G) ? 0 : e == static_cast<size_t>(G) ? 1 : 2;
      got_parts[part].push_back(static_cast<double>(got[h * len + e]));
      want_parts[part].push_back(want[h * len + e]);
    }
  double max_c = 0.0;
  for (double c : want_parts[1]) max_c = std::max(max_c, std::fabs(c));
  return {relative_error(got_parts[0], want_parts[0], 1e-3), relative_error(got_parts[1], want_parts[1], 1e-3),
          relative_error(got_parts[2], want_parts[2], std::max(1.0, 0.01 * max_c))};
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
