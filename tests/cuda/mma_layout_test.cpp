// Host check of the bf16 tensor-core kernels' index arithmetic (fused_attention_tc.cu), through
// the very functions they call (mma_fragments.cuh). Plain C++17: no CUDA runtime, no torch.
//
//  1. The fragment layouts of mma.m16n8k16 (A, B, C) against a transcription of the PTX ISA's
//     tables; each is a bijection onto its tile.
//  2. ldmatrix.x4 (with and without .trans), emulated from the PTX description, reading a
//     swizzled shared-memory image at the kernels' per-lane addresses, yields exactly the A / B
//     fragments the layouts say (the four ways the kernels use it); the swizzle is a bijection
//     and every ldmatrix matrix and every cp.async phase touches 8 distinct bank groups.
//  3. One m16n8k16 MMA emulated for all 32 lanes from the fragments equals the plain product,
//     both on fragments placed by the layout functions and on fragments read by emulated
//     ldmatrix; the C -> A re-packing of P is element for element the A layout.
//  4. Tile logic for T = 1 .. 300 and 4096: the causal tile ranges (forward per query tile,
//     backward per key tile) cover every visible pair exactly once, skipped tiles hold none,
//     unmasked tiles hold only visible pairs, and the distance tables give t = i − j.
//  5. (mma_kernel_emulation.cpp) The forward kernel emulated warp by warp and lane by lane
//     (fragments, the score mod per accumulator element, the online softmax with quad shuffles,
//     P rounded to bf16 and re-packed, o and lse) and the backward kernel likewise (Sᵀ, dPᵀ, P from lse, dS, dV += Pᵀ·dO,
//     dK += dSᵀ·Q, dSᵀ through shared memory, dQ = dS·K, dhead_scale, dbias_table), against
//     float64 naive softmax attention, for T ∈ {37, 100, 130} (one, two, three 64-key tiles, the
//     last ragged), D = 64 (and 128 at T = 100), under scale-invariant + ALiBi, under LogN's
//     learned head scale + KERPLE's learned bias, and under LogN's head scale + a FIRE table (the
//     kQueryBias kernels: ψ and normaliser tables, the per-pair bias, d loss/d table).
//
// What it cannot check: that the hardware does what the PTX ISA says (the emulation is written
// from the same documentation), the PTX wrappers' operand order, races, and cp.async timing.
//
// Exit code 0 on success, 1 on any failure.
#include "tests/cuda/mma_emulation.h"

namespace mma_test {

void check_kernels(std::mt19937& rng);  // 5., mma_kernel_emulation.cpp

namespace {

void check_layouts() {
  std::vector<int> a_hits(16 * 16, 0), b_hits(16 * 8, 0), c_hits(16 * 8, 0);
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      EXPECT(mma::a_row(lane, e) == spec::a_row(lane, e) && mma::a_col(lane, e) == spec::a_col(lane, e),
             "A layout lane %d element %d", lane, e);
      ++a_hits[mma::a_row(lane, e) * 16 + mma::a_col(lane, e)];
    }
    for (int e = 0; e < 4; ++e) {
      EXPECT(mma::b_k(lane, e) == spec::b_row(lane, e) && mma::b_n(lane, e) == spec::b_col(lane, e),
             "B layout lane %d element %d", lane, e);
      EXPECT(mma::c_row(lane, e) == spec::c_row(lane, e) && mma::c_col(lane, e) == spec::c_col(lane, e),
             "C layout lane %d element %d", lane, e);
      ++b_hits[mma::b_k(lane, e) * 8 + mma::b_n(lane, e)];
      ++c_hits[mma::c_row(lane, e) * 8 + mma::c_col(lane, e)];
    }
    // P re-packing: A element e of a 16 × 16 tile is C element a_from_c_elem(e) of n-block
    // a_from_c_block(e), in the same lane.
    for (int e = 0; e < 8; ++e) {
      const int ce = mma::a_from_c_elem(e), cb = mma::a_from_c_block(e);
      EXPECT(mma::c_row(lane, ce) == mma::a_row(lane, e) && 8 * cb + mma::c_col(lane, ce) == mma::a_col(lane, e),
             "C -> A re-packing lane %d element %d", lane, e);
    }
    // Elements 2h, 2h + 1 of a C fragment are adjacent columns of one row (the bf16-pair stores).
    for (int h = 0; h < 2; ++h) {
      EXPECT(mma::c_row(lane, 2 * h) == mma::c_row(lane, 2 * h + 1) &&
                 mma::c_col(lane, 2 * h + 1) == mma::c_col(lane, 2 * h) + 1 && mma::c_col(lane, 2 * h) % 2 == 0,
             "C pair lane %d half %d", lane, h);
    }
  }
  EXPECT(std::all_of(a_hits.begin(), a_hits.end(), [](int n) { return n == 1; }), "A layout is not a bijection");
  EXPECT(std::all_of(b_hits.begin(), b_hits.end(), [](int n) { return n == 1; }), "B layout is not a bijection");
  EXPECT(std::all_of(c_hits.begin(), c_hits.end(), [](int n) { return n == 1; }), "C layout is not a bijection");
}


// ---------------------------------------------------------------------------------------------
// 2. ldmatrix, swizzle, bank conflicts; 3. one MMA.

// 2a. The swizzle of a (64, cols) tile and the cp.async copy mapping.
void check_swizzle_and_copy(int cols) {
  // Swizzle: a bijection of the (64, cols) tile; chunks stay whole (8 contiguous elements).
  std::vector<int> hits(64 * cols, 0);
  for (int r = 0; r < 64; ++r) {
    for (int c = 0; c < cols; ++c) {
      const int offset = swizzled(cols, r, c);
      EXPECT(offset >= 0 && offset < 64 * cols, "swizzle out of range");
      if (offset >= 0 && offset < 64 * cols) ++hits[offset];
      EXPECT(offset / cols == r, "swizzle leaves row %d", r);
      if (c % 8) EXPECT(offset == swizzled(cols, r, c - 1) + 1, "swizzle splits a chunk");
    }
  }
  EXPECT(std::all_of(hits.begin(), hits.end(), [](int n) { return n == 1; }), "swizzle (cols %d) is not a bijection", cols);

  // cp.async copy: every chunk once; each 8-thread phase (128 bytes) hits 8 distinct bank groups.
  std::vector<int> copied(64 * cols / 8, 0);
  for (int index = 0; index < 64 * cols / 8; ++index) {
    const int r = cols == 64 ? mma::copy_row<64>(index) : mma::copy_row<128>(index);
    const int c = cols == 64 ? mma::copy_col<64>(index) : mma::copy_col<128>(index);
    ++copied[r * (cols / 8) + c / 8];
  }
  EXPECT(std::all_of(copied.begin(), copied.end(), [](int n) { return n == 1; }), "copy mapping (cols %d)", cols);
  for (int phase = 0; phase < 64 * cols / 64; ++phase) {
    int groups = 0;
    for (int x = 0; x < 8; ++x) {
      const int index = 8 * phase + x;
      const int r = cols == 64 ? mma::copy_row<64>(index) : mma::copy_row<128>(index);
      const int c = cols == 64 ? mma::copy_col<64>(index) : mma::copy_col<128>(index);
      groups |= 1 << ((swizzled(cols, r, c) * 2 / 16) % 8);
    }
    EXPECT(groups == 0xff, "cp.async phase %d (cols %d) has bank conflicts", phase, cols);
  }
}

// 2b. ldmatrix.x4 in its four uses on a swizzled (64, cols) image: bank groups and fragments.
void check_ldmatrix_uses(int cols) {
  // A logical (64, cols) tile of distinct values, stored swizzled.
  std::vector<float> logical(64 * cols), image(64 * cols);
  for (int n = 0; n < 64 * cols; ++n) logical[n] = static_cast<float>(n);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < cols; ++c) image[swizzled(cols, r, c)] = logical[r * cols + c];
  auto at = [&](int r, int c) { return logical[r * cols + c]; };

  for (int row0 = 0; row0 < 64; row0 += 16) {
    for (int col0 = 0; col0 < cols; col0 += 16) {
      for (const Pattern pattern : {Pattern::kA, Pattern::kB}) {
        // Bank conflicts: each matrix's 8 row addresses fall in 8 distinct 16-byte bank groups.
        const std::array<int, 32> address = ldsm_addresses(cols, row0, col0, pattern);
        for (int m = 0; m < 4; ++m) {
          int groups = 0;
          for (int r = 0; r < 8; ++r) {
            EXPECT(address[8 * m + r] % 8 == 0, "ldmatrix row address not 16-byte aligned");
            groups |= 1 << ((address[8 * m + r] * 2 / 16) % 8);
          }
          EXPECT(groups == 0xff, "ldmatrix matrix %d at (%d, %d), cols %d: bank conflicts", m, row0, col0, cols);
        }
      }
      // (a) A from a [m][k] tile: pattern a, no .trans (Q in the forward; K, V in the backward).
      const FragA a = as_a(ldsm(image, cols, row0, col0, Pattern::kA, false));
      // (b) B pair from a [n][k] tile: pattern b, no .trans (K in the forward; Q, dO in the backward).
      const Ldsm nk = ldsm(image, cols, row0, col0, Pattern::kB, false);
      // (c) B pair from a [k][n] tile: pattern a, .trans (V in the forward; dO, Q, K in the backward).
      const Ldsm kn = ldsm(image, cols, row0, col0, Pattern::kA, true);
      // (d) A from a [k][m] tile: pattern b, .trans (dS from dSᵀ in the backward).
      const FragA at_ = as_a(ldsm(image, cols, row0, col0, Pattern::kB, true));
      for (int lane = 0; lane < 32; ++lane) {
        for (int e = 0; e < 8; ++e) {
          EXPECT(a[lane][e] == at(row0 + mma::a_row(lane, e), col0 + mma::a_col(lane, e)),
                 "ldmatrix A (cols %d, block %d,%d) lane %d element %d", cols, row0, col0, lane, e);
          EXPECT(at_[lane][e] == at(row0 + mma::a_col(lane, e), col0 + mma::a_row(lane, e)),
                 "ldmatrix.trans A (cols %d, block %d,%d) lane %d element %d", cols, row0, col0, lane, e);
        }
        for (int j = 0; j < 2; ++j) {
          const FragB b_nk = as_b(nk, j), b_kn = as_b(kn, j);
          for (int e = 0; e < 4; ++e) {
            EXPECT(b_nk[lane][e] == at(row0 + 8 * j + mma::b_n(lane, e), col0 + mma::b_k(lane, e)),
                   "ldmatrix B[n][k] (cols %d) lane %d block %d element %d", cols, lane, j, e);
            EXPECT(b_kn[lane][e] == at(row0 + mma::b_k(lane, e), col0 + 8 * j + mma::b_n(lane, e)),
                   "ldmatrix.trans B[k][n] (cols %d) lane %d block %d element %d", cols, lane, j, e);
          }
        }
      }
    }
  }
}

// 3a. One MMA, fragments placed by the layout functions, against the plain product.
void check_one_mma(std::mt19937& rng, std::normal_distribution<float>& normal) {
  for (int trial = 0; trial < 20; ++trial) {
    float A[16][16], B[16][8], C[16][8];
    for (auto& row : A) for (float& x : row) x = bf16_round(normal(rng));
    for (auto& row : B) for (float& x : row) x = bf16_round(normal(rng));
    for (auto& row : C) for (float& x : row) x = normal(rng);
    FragA a{};
    FragB b{};
    FragC c{};
    for (int lane = 0; lane < 32; ++lane) {
      for (int e = 0; e < 8; ++e) a[lane][e] = A[mma::a_row(lane, e)][mma::a_col(lane, e)];
      for (int e = 0; e < 4; ++e) b[lane][e] = B[mma::b_k(lane, e)][mma::b_n(lane, e)];
      for (int e = 0; e < 4; ++e) c[lane][e] = C[mma::c_row(lane, e)][mma::c_col(lane, e)];
    }
    mma_emulate(c, a, b);
    double max_err = 0.0;
    for (int lane = 0; lane < 32; ++lane) {
      for (int e = 0; e < 4; ++e) {
        const int r = mma::c_row(lane, e), col = mma::c_col(lane, e);
        double want = C[r][col];
        for (int kk = 0; kk < 16; ++kk) want += static_cast<double>(A[r][kk]) * B[kk][col];
        max_err = std::max(max_err, std::fabs(want - c[lane][e]));
      }
    }
    EXPECT(max_err < 1e-4, "MMA emulation vs plain product: %g", max_err);
  }
}

// 3b. The forward through ldmatrix images, against plain products.
void check_forward_through_ldmatrix(std::mt19937& rng, std::normal_distribution<float>& normal) {
  // The forward's S = Q·Kᵀ and O += P·V for one warp through ldmatrix images, against plain
  // products: Q (16 × 64) [m][k], K (64 × 64) [n][k], V (64 × 64) [k][n].
  {
    const int cols = 64;
    std::vector<float> Q(64 * cols), K(64 * cols), V(64 * cols);
    for (float& x : Q) x = bf16_round(normal(rng));
    for (float& x : K) x = bf16_round(normal(rng));
    for (float& x : V) x = bf16_round(normal(rng));
    const std::vector<float> q_img = tile_image(Q, cols, 0, 64), k_img = tile_image(K, cols, 0, 64),
                             v_img = tile_image(V, cols, 0, 64);
    const int warp_row0 = 32;  // warp 2
    std::array<FragC, 8> s{};
    for (int kk = 0; kk < cols / 16; ++kk) {
      const FragA qa = as_a(ldsm(q_img, cols, warp_row0, 16 * kk, Pattern::kA, false));
      for (int p = 0; p < 4; ++p) {
        const Ldsm kb = ldsm(k_img, cols, 16 * p, 16 * kk, Pattern::kB, false);
        mma_emulate(s[2 * p], qa, as_b(kb, 0));
        mma_emulate(s[2 * p + 1], qa, as_b(kb, 1));
      }
    }
    double max_err = 0.0;
    for (int nb = 0; nb < 8; ++nb) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int e = 0; e < 4; ++e) {
          const int i = warp_row0 + mma::c_row(lane, e), j = 8 * nb + mma::c_col(lane, e);
          double want = 0.0;
          for (int d = 0; d < cols; ++d) want += static_cast<double>(Q[i * cols + d]) * K[j * cols + d];
          max_err = std::max(max_err, std::fabs(want - s[nb][lane][e]));
        }
      }
    }
    EXPECT(max_err < 1e-3, "Q·Kᵀ through ldmatrix: %g", max_err);
    // P·V with P = S (rounded to bf16 by the re-packing).
    std::array<FragC, 8> o{};
    for (int kk = 0; kk < 4; ++kk) {
      const FragA pa = pack_a_from_c(s[2 * kk], s[2 * kk + 1]);
      for (int p = 0; p < cols / 16; ++p) {
        const Ldsm vb = ldsm(v_img, cols, 16 * kk, 16 * p, Pattern::kA, true);
        mma_emulate(o[2 * p], pa, as_b(vb, 0));
        mma_emulate(o[2 * p + 1], pa, as_b(vb, 1));
      }
    }
    max_err = 0.0;
    double max_ref = 0.0;
    for (int nb = 0; nb < cols / 8; ++nb) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int e = 0; e < 4; ++e) {
          const int i = warp_row0 + mma::c_row(lane, e), col = 8 * nb + mma::c_col(lane, e);
          double want = 0.0;
          for (int j = 0; j < 64; ++j) {
            // the S value of (i, j) as the warp holds it, rounded as the re-packing rounds it
            const int lane_of = (((i - warp_row0) % 8) << 2) | ((j % 8) >> 1);
            const int e_of = ((i - warp_row0) >= 8 ? 2 : 0) + (j % 2);
            want += static_cast<double>(bf16_round(s[j / 8][lane_of][e_of])) * V[j * cols + col];
          }
          max_err = std::max(max_err, std::fabs(want - o[nb][lane][e]));
          max_ref = std::max(max_ref, std::fabs(want));
        }
      }
    }
    EXPECT(max_err < 1e-5 * std::max(1.0, max_ref), "P·V through re-packing and ldmatrix.trans: %g", max_err);
  }
}

void check_ldmatrix_and_swizzle(std::mt19937& rng) {
  for (const int cols : {64, 128}) {
    check_swizzle_and_copy(cols);
    check_ldmatrix_uses(cols);
  }
  std::normal_distribution<float> normal(0.f, 1.f);  // one stream of draws, as the checks were written
  check_one_mma(rng, normal);
  check_forward_through_ldmatrix(rng, normal);
}

// ---------------------------------------------------------------------------------------------
// 4. Tile logic.

void check_tiles(int seq_len) {
  const int n = mma::num_tiles(seq_len);
  const bool small = seq_len <= 300;
  std::vector<unsigned char> fwd(small ? static_cast<size_t>(seq_len) * seq_len : 0, 0),
      bwd(small ? static_cast<size_t>(seq_len) * seq_len : 0, 0);
  auto pairs = [&](int q_tile, int k_tile, auto&& f) {
    for (int r = 0; r < mma::kTileQ; ++r)
      for (int c = 0; c < mma::kTileK; ++c) f(q_tile * mma::kTileQ + r, k_tile * mma::kTileK + c, r, c);
  };
  for (int m = 0; m < n; ++m) {
    const int i0 = m * mma::kTileQ;
    for (int kt = 0; kt < n; ++kt) {
      const int j0 = kt * mma::kTileK;
      const bool fwd_visits = kt < mma::fwd_key_tiles(m, seq_len);
      const bool bwd_visits = m >= mma::bwd_first_q_tile(kt);
      EXPECT(fwd_visits == bwd_visits, "T=%d: forward and backward visit different tile pairs", seq_len);
      int visible = 0, total = 0;
      bool table_ok = true;
      pairs(m, kt, [&](int i, int j, int r, int c) {
        ++total;
        if (!mma::pair_visible(i, j, seq_len)) return;
        ++visible;
        const int d = mma::distance_index(r, c);
        if (d < 0 || d >= mma::kDistances || mma::distance_of_entry(d, i0, j0) != i - j) table_ok = false;
        if (small && fwd_visits) ++fwd[static_cast<size_t>(i) * seq_len + j];
        if (small && bwd_visits) ++bwd[static_cast<size_t>(i) * seq_len + j];
      });
      EXPECT(table_ok, "T=%d tiles (%d, %d): distance table index", seq_len, m, kt);
      if (!fwd_visits) EXPECT(visible == 0, "T=%d: skipped tile (%d, %d) holds visible pairs", seq_len, m, kt);
      if (fwd_visits && !mma::tile_needs_mask(i0, j0, seq_len))
        EXPECT(visible == total, "T=%d: unmasked tile (%d, %d) holds masked pairs", seq_len, m, kt);
      // Off-diagonal tiles of full query tiles need no mask (the mask is for diagonal / ragged tiles).
      if (kt < m && i0 + mma::kTileQ <= seq_len) EXPECT(!mma::tile_needs_mask(i0, j0, seq_len), "T=%d: mask on an inner tile", seq_len);
    }
    // A real row sees key 0 in the first tile: the running max is finite from tile 0 on.
    for (int r = 0; r < mma::kTileQ && i0 + r < seq_len; ++r)
      EXPECT(mma::pair_visible(i0 + r, 0, seq_len), "T=%d row %d misses key 0", seq_len, i0 + r);
  }
  if (small) {
    for (int i = 0; i < seq_len; ++i) {
      for (int j = 0; j < seq_len; ++j) {
        const unsigned char want = j <= i ? 1 : 0;
        EXPECT(fwd[static_cast<size_t>(i) * seq_len + j] == want && bwd[static_cast<size_t>(i) * seq_len + j] == want,
               "T=%d: pair (%d, %d) covered %d/%d times", seq_len, i, j, fwd[static_cast<size_t>(i) * seq_len + j],
               bwd[static_cast<size_t>(i) * seq_len + j]);
      }
    }
  }
}

}  // namespace

}  // namespace mma_test

using namespace mma_test;

int main() {
  std::mt19937 rng(35);
  check_layouts();
  std::printf("fragment layouts vs the PTX tables: %s\n", failures ? "FAIL" : "ok");
  const int before_ldsm = failures;
  check_ldmatrix_and_swizzle(rng);
  std::printf("ldmatrix (4 uses), swizzle, bank groups, one MMA, S = Q·Kᵀ and P·V through ldmatrix: %s\n",
              failures > before_ldsm ? "FAIL" : "ok");
  const int before_tiles = failures;
  for (int seq_len = 1; seq_len <= 300; ++seq_len) check_tiles(seq_len);
  check_tiles(4096);
  std::printf("causal tile ranges, masks and distance tables, T = 1..300 and 4096: %s\n",
              failures > before_tiles ? "FAIL" : "ok");
  check_kernels(rng);
  std::printf("%s: %d check(s), %d failure(s)\n", failures ? "FAILED" : "PASSED", checks, failures);
  return failures ? 1 : 0;
}
