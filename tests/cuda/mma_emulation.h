// What the host emulation of the bf16 tensor-core kernels shares (mma_layout_test.cpp: layouts,
// ldmatrix, tiles; mma_kernel_emulation.cpp: the kernels lane by lane): the check counter, bf16
// rounding, the PTX ISA's fragment tables and the warp-level emulation of mma, ldmatrix, quad
// shuffles and the kernels' shared-memory tiles. Plain C++17, no CUDA runtime.
#pragma once

#include "tests/cuda/relative_error.h"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention/cuda/mma_fragments.cuh"
#include "attention/score_mod.h"

namespace mma_test {


namespace mma = attention::cuda::mma;
using attention::ScoreMod;

inline int failures = 0;  // over both translation units of the test
inline int checks = 0;

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    ++checks;                                                      \
    if (!(cond)) {                                                 \
      if (++failures <= 20) {                                      \
        std::printf("FAIL %s:%d: ", __FILE__, __LINE__);           \
        std::printf(__VA_ARGS__);                                  \
        std::printf("\n");                                         \
      }                                                            \
    }                                                              \
  } while (0)

inline float bf16_round(float x) {  // round to nearest even, as __float2bfloat16_rn
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}


// ---------------------------------------------------------------------------------------------
// 1. The PTX ISA's fragment tables for mma.m16n8k16 with .bf16 A/B and .f32 C, as written there
// (groupID = laneid >> 2, threadID_in_group = laneid % 4; a_i, b_i, c_i the i-th element).

namespace spec {
inline int group_id(int lane) { return lane >> 2; }
inline int thread_in_group(int lane) { return lane % 4; }
inline int a_row(int lane, int i) { return (i < 2 || (4 <= i && i < 6)) ? group_id(lane) : group_id(lane) + 8; }
inline int a_col(int lane, int i) {
  return i < 4 ? thread_in_group(lane) * 2 + (i & 1) : thread_in_group(lane) * 2 + (i & 1) + 8;
}
inline int b_row(int lane, int i) {
  return i < 2 ? thread_in_group(lane) * 2 + (i & 1) : thread_in_group(lane) * 2 + (i & 1) + 8;
}
inline int b_col(int lane, int /*i*/) { return group_id(lane); }
inline int c_row(int lane, int i) { return i < 2 ? group_id(lane) : group_id(lane) + 8; }
inline int c_col(int lane, int i) { return thread_in_group(lane) * 2 + (i & 1); }
}  // namespace spec

// ---------------------------------------------------------------------------------------------
// Warp-level emulation: per-lane registers as element values (bf16 values held in floats).

using FragA = std::array<std::array<float, 8>, 32>;  // [lane][element]
using FragB = std::array<std::array<float, 4>, 32>;
using FragC = std::array<std::array<float, 4>, 32>;
using Ldsm = std::array<std::array<std::array<float, 2>, 4>, 32>;  // [lane][register][half]

// d += a·b, from the PTX tables (spec::), fp32 accumulation.
inline void mma_emulate(FragC& d, const FragA& a, const FragB& b) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) A[spec::a_row(lane, i)][spec::a_col(lane, i)] = a[lane][i];
    for (int i = 0; i < 4; ++i) B[spec::b_row(lane, i)][spec::b_col(lane, i)] = b[lane][i];
    for (int i = 0; i < 4; ++i) C[spec::c_row(lane, i)][spec::c_col(lane, i)] = d[lane][i];
  }
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 8; ++c) {
      float sum = C[r][c];
      for (int kk = 0; kk < 16; ++kk) sum += A[r][kk] * B[kk][c];
      C[r][c] = sum;
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) d[lane][i] = C[spec::c_row(lane, i)][spec::c_col(lane, i)];
}

inline int swizzled(int cols, int row, int col) {
  return cols == 64 ? mma::swizzled<64>(row, col) : mma::swizzled<128>(row, col);
}

// ldmatrix.sync.aligned.m8n8.x4{.trans}.b16 per the PTX ISA: lanes 8m .. 8m + 7 give the element
// offsets of rows 0..7 of matrix m; without .trans lane l gets, in register m, row l/4, columns
// 2(l%4), 2(l%4) + 1 of matrix m; with .trans, rows 2(l%4), 2(l%4) + 1 of column l/4.
inline Ldsm ldsm_emulate(const std::vector<float>& smem, const std::array<int, 32>& address, bool trans) {
  Ldsm out{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int m = 0; m < 4; ++m) {
      for (int half = 0; half < 2; ++half) {
        const int row = trans ? 2 * (lane % 4) + half : lane / 4;
        const int col = trans ? lane / 4 : 2 * (lane % 4) + half;
        out[lane][m][half] = smem[address[8 * m + row] + col];
      }
    }
  }
  return out;
}

enum class Pattern { kA, kB };

// The kernels' per-lane ldmatrix addresses into a [rows][cols] swizzled tile, for the 16 × 16
// block at (row0, col0).
inline std::array<int, 32> ldsm_addresses(int cols, int row0, int col0, Pattern pattern) {
  std::array<int, 32> address{};
  for (int lane = 0; lane < 32; ++lane) {
    const int r = pattern == Pattern::kA ? mma::ldsm_a_row(lane) : mma::ldsm_b_row(lane);
    const int c = pattern == Pattern::kA ? mma::ldsm_a_col(lane) : mma::ldsm_b_col(lane);
    address[lane] = swizzled(cols, row0 + r, col0 + c);
  }
  return address;
}

inline Ldsm ldsm(const std::vector<float>& smem, int cols, int row0, int col0, Pattern pattern, bool trans) {
  return ldsm_emulate(smem, ldsm_addresses(cols, row0, col0, pattern), trans);
}

inline FragA as_a(const Ldsm& regs) {
  FragA a{};
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 8; ++e) a[lane][e] = regs[lane][e / 2][e % 2];
  return a;
}

// B fragment of n-block j ∈ {0, 1}: registers 2j, 2j + 1.
inline FragB as_b(const Ldsm& regs, int j) {
  FragB b{};
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) b[lane][e] = regs[lane][2 * j + e / 2][e % 2];
  return b;
}

// A fragment from two C fragments (columns 0–7, 8–15), rounded to bf16: the kernels' pack_a_from_c.
inline FragA pack_a_from_c(const FragC& c0, const FragC& c1) {
  FragA a{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      const FragC& c = mma::a_from_c_block(e) == 0 ? c0 : c1;
      a[lane][e] = bf16_round(c[lane][mma::a_from_c_elem(e)]);
    }
  }
  return a;
}

// __shfl_xor_sync butterflies over the 4 lanes of a group.
inline void quad_reduce(std::array<float, 32>& x, bool max) {
  for (int offset = 1; offset <= 2; offset <<= 1) {
    std::array<float, 32> y = x;
    for (int lane = 0; lane < 32; ++lane) y[lane] = max ? std::max(x[lane], x[lane ^ offset]) : x[lane] + x[lane ^ offset];
    x = y;
  }
}

// Shared-memory image of rows [row0, row0 + 64) of a (T, cols) row-major matrix, swizzled, rows
// past T zero (cp.async with src-size 0), written through the kernels' copy mapping.
inline std::vector<float> tile_image(const std::vector<float>& x, int cols, int row0, int seq_len) {
  std::vector<float> image(64 * cols, NAN);
  const int chunks = 64 * cols / 8;
  for (int index = 0; index < chunks; ++index) {
    const int r = cols == 64 ? mma::copy_row<64>(index) : mma::copy_row<128>(index);
    const int c = cols == 64 ? mma::copy_col<64>(index) : mma::copy_col<128>(index);
    for (int x8 = 0; x8 < 8; ++x8) {
      const int row = row0 + r;
      image[swizzled(cols, r, c + x8)] = row < seq_len ? x[static_cast<size_t>(row) * cols + c + x8] : 0.f;
    }
  }
  return image;
}

}  // namespace mma_test
