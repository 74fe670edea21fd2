// 5. of mma_layout_test.cpp: the bf16 tensor-core forward and backward kernels
// (fused_attention_tc.cu) emulated warp by warp and lane by lane through the functions they call,
// against float64 naive softmax attention.
#include "tests/cuda/mma_emulation.h"
#include "tests/cuda/fire_table.h"

namespace mma_test {

namespace {

// ---------------------------------------------------------------------------------------------
// 5. Forward and backward kernels, emulated; float64 reference.

struct Problem {
  int seq_len, head_dim, head;
  ScoreMod mod;  // host pointers
  std::vector<float> q, k, v, d_o;  // (T, D), bf16 values
};

struct Outputs {
  std::vector<double> o, lse, fixed_mean, dq, dk, dv, dbias;  // dbias (T) for this head, (G + 2) with FIRE
  double dhead_scale = 0.0;
};

Outputs reference(const Problem& p) {
  const int T = p.seq_len, D = p.head_dim, h = p.head;
  const attention::cuda::test::FireReference fire(p.mod, h + 1);  // FIRE's terms in float64
  const ScoreMod plain = attention::cuda::test::without_query_bias(p.mod);
  Outputs r;
  r.o.assign(static_cast<size_t>(T) * D, 0.0);
  r.dq = r.dk = r.dv = r.o;
  r.lse.assign(T, 0.0);
  r.fixed_mean.assign(T, 0.0);
  r.dbias.assign(fire.active() ? fire.len : T, 0.0);
  for (int i = 0; i < T; ++i) {
    std::vector<double> dot(i + 1), prob(i + 1), dprob(i + 1);
    double max_logit = -INFINITY;
    for (int j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int d = 0; d < D; ++d) s += static_cast<double>(p.q[i * D + d]) * p.k[j * D + d];
      dot[j] = s;
      prob[j] = attention::logit<double>(plain, s, i, j, h) + (fire.active() ? fire.bias(h, i, i - j) : 0.0);
      max_logit = std::max(max_logit, prob[j]);
    }
    double sum = 0.0;
    for (int j = 0; j <= i; ++j) sum += std::exp(prob[j] - max_logit);
    r.lse[i] = max_logit + std::log(sum);
    double delta = 0.0;
    for (int j = 0; j <= i; ++j) {
      prob[j] = std::exp(prob[j] - r.lse[i]);
      r.fixed_mean[i] += prob[j] * attention::fixed_multiplier<double>(p.mod, i, i - j) * p.mod.scale * dot[j];
      double dp = 0.0;
      for (int d = 0; d < D; ++d) {
        r.o[i * D + d] += prob[j] * p.v[j * D + d];
        dp += static_cast<double>(p.d_o[i * D + d]) * p.v[j * D + d];
      }
      dprob[j] = dp;
      delta += prob[j] * dp;
    }
    for (int j = 0; j <= i; ++j) {
      const int t = i - j;
      const double dlogit = prob[j] * (dprob[j] - delta);
      const double ds = dlogit * attention::multiplier<double>(p.mod, i, t, h) * p.mod.scale;
      for (int d = 0; d < D; ++d) {
        r.dq[i * D + d] += ds * p.k[j * D + d];
        r.dk[j * D + d] += ds * p.q[i * D + d];
        r.dv[j * D + d] += prob[j] * p.d_o[i * D + d];
      }
      if (p.mod.head_scale) r.dhead_scale += attention::fixed_multiplier<double>(p.mod, i, t) * p.mod.scale * dot[j] * dlogit;
      if (!fire.active()) r.dbias[t] += dlogit;
      dprob[j] = dlogit;  // kept for FIRE's row gradient below
    }
    if (fire.active()) fire.add_row_gradient(h, i, dprob, r.dbias.data());
  }
  return r;
}

// fill_distance_table of the kernels (float).
void distance_table(const ScoreMod& mod, int i0, int j0, int head, int seq_len, std::vector<float>& factor,
                    std::vector<float>& bias) {
  factor.assign(mma::kDistanceTableLen, 0.f);
  bias.assign(mma::kDistanceTableLen, 0.f);
  for (int d = 0; d < mma::kDistances; ++d) {
    const int t = attention::table_distance(mma::distance_of_entry(d, i0, j0), seq_len);
    factor[d] = attention::distance_factor<float>(mod, t);
    bias[d] = attention::distance_bias<float>(mod, t, head);
  }
}

// fill_psi_table of the kernels: FIRE's ψ(t) for the same entries (empty without FIRE).
std::vector<float> psi_table(const ScoreMod& mod, int i0, int j0, int head, int seq_len) {
  if (!attention::has_query_bias(mod)) return {};
  const attention::FireRow<float> fire = attention::fire_row(mod, head);
  std::vector<float> psi(mma::kDistanceTableLen, 0.f);
  for (int d = 0; d < mma::kDistances; ++d)
    psi[d] = fire.psi(static_cast<float>(attention::table_distance(mma::distance_of_entry(d, i0, j0), seq_len)));
  return psi;
}

// tc_forward_kernel, one (batch, head): o (bf16 values), lse, fixed_logit_mean.
void emulate_forward(const Problem& p, std::vector<float>& o, std::vector<float>& lse,
                     std::vector<float>& fixed_mean) {
  const int T = p.seq_len, D = p.head_dim;
  o.assign(static_cast<size_t>(T) * D, NAN);
  lse.assign(T, NAN);
  fixed_mean.assign(T, NAN);
  const ScoreMod& mod = p.mod;
  const float head_scale = mod.head_scale ? mod.head_scale[p.head] : 1.f;
  const bool track = mod.head_scale != nullptr;
  const bool fire_on = attention::has_query_bias(mod);  // the kQueryBias instantiation
  const attention::FireRow<float> fire = attention::fire_row(mod, p.head);
  for (int m = 0; m < mma::num_tiles(T); ++m) {
    const int i0 = m * mma::kTileQ;
    const std::vector<float> q_img = tile_image(p.q, D, i0, T);
    for (int w = 0; w < mma::kWarps; ++w) {
      const int warp_row0 = w * mma::kWarpRows;
      std::vector<FragA> q_frag(D / 16);
      for (int s = 0; s < D / 16; ++s) q_frag[s] = as_a(ldsm(q_img, D, warp_row0, 16 * s, Pattern::kA, false));
      float row_coef[32][2], row_fixed[32][2], row_norm[32][2];
      for (int lane = 0; lane < 32; ++lane) {
        for (int h = 0; h < 2; ++h) {
          const float factor = attention::row_factor<float>(mod, i0 + warp_row0 + mma::c_row(lane, 2 * h));
          row_coef[lane][h] = head_scale * factor * mod.scale;
          row_fixed[lane][h] = factor * mod.scale;
          row_norm[lane][h] = fire_on ? fire.norm(i0 + warp_row0 + mma::c_row(lane, 2 * h)) : 0.f;
        }
      }
      std::vector<FragC> o_acc(D / 8, FragC{});
      float row_max[32][2], row_sum[32][2], fixed_sum[32][2];
      for (int lane = 0; lane < 32; ++lane)
        for (int h = 0; h < 2; ++h) row_max[lane][h] = -INFINITY, row_sum[lane][h] = 0.f, fixed_sum[lane][h] = 0.f;

      for (int n = 0; n < mma::fwd_key_tiles(m, T); ++n) {
        const int j0 = n * mma::kTileK;
        const std::vector<float> k_img = tile_image(p.k, D, j0, T), v_img = tile_image(p.v, D, j0, T);
        std::vector<float> factor_t, bias_t;
        distance_table(mod, i0, j0, p.head, T, factor_t, bias_t);
        const std::vector<float> psi_t = psi_table(mod, i0, j0, p.head, T);
        std::array<FragC, 8> s{};
        for (int ks = 0; ks < D / 16; ++ks) {
          for (int pp = 0; pp < 4; ++pp) {
            const Ldsm kb = ldsm(k_img, D, 16 * pp, 16 * ks, Pattern::kB, false);
            mma_emulate(s[2 * pp], q_frag[ks], as_b(kb, 0));
            mma_emulate(s[2 * pp + 1], q_frag[ks], as_b(kb, 1));
          }
        }
        const bool masked = mma::tile_needs_mask(i0, j0, T);
        std::array<FragC, 8> fixed{};
        std::array<std::array<float, 32>, 2> tile_max;
        for (auto& x : tile_max) x.fill(-INFINITY);
        for (int b = 0; b < 8; ++b) {
          for (int lane = 0; lane < 32; ++lane) {
            for (int e = 0; e < 4; ++e) {
              const int r = warp_row0 + mma::c_row(lane, e), c = 8 * b + mma::c_col(lane, e);
              const int d = mma::distance_index(r, c);
              const float acc = s[b][lane][e];
              fixed[b][lane][e] = row_fixed[lane][e >> 1] * factor_t[d] * acc;
              float bias = bias_t[d];
              if (fire_on) bias += fire.bias(psi_t[d], row_norm[lane][e >> 1]);
              float logit = mma::tc_logit(row_coef[lane][e >> 1], factor_t[d], bias, acc);
              if (masked && !mma::pair_visible(i0 + r, j0 + c, T)) logit = -INFINITY;
              s[b][lane][e] = logit;
              tile_max[e >> 1][lane] = std::max(tile_max[e >> 1][lane], logit);
            }
          }
        }
        float shift[32][2];
        for (int h = 0; h < 2; ++h) {
          quad_reduce(tile_max[h], true);
          for (int lane = 0; lane < 32; ++lane) {
            const float new_max = std::max(row_max[lane][h], tile_max[h][lane]);
            shift[lane][h] = new_max == -INFINITY ? 0.f : new_max;
            const float correction = std::exp(row_max[lane][h] - shift[lane][h]);
            row_max[lane][h] = new_max;
            row_sum[lane][h] *= correction;
            fixed_sum[lane][h] *= correction;
            for (auto& frag : o_acc) frag[lane][2 * h] *= correction, frag[lane][2 * h + 1] *= correction;
          }
        }
        for (int b = 0; b < 8; ++b) {
          for (int lane = 0; lane < 32; ++lane) {
            for (int e = 0; e < 4; ++e) {
              const float prob = std::exp(s[b][lane][e] - shift[lane][e >> 1]);
              row_sum[lane][e >> 1] += prob;
              if (track) fixed_sum[lane][e >> 1] = std::fma(prob, fixed[b][lane][e], fixed_sum[lane][e >> 1]);
              s[b][lane][e] = prob;
            }
          }
        }
        for (int kk = 0; kk < 4; ++kk) {
          const FragA pa = pack_a_from_c(s[2 * kk], s[2 * kk + 1]);
          for (int pp = 0; pp < D / 16; ++pp) {
            const Ldsm vb = ldsm(v_img, D, 16 * kk, 16 * pp, Pattern::kA, true);
            mma_emulate(o_acc[2 * pp], pa, as_b(vb, 0));
            mma_emulate(o_acc[2 * pp + 1], pa, as_b(vb, 1));
          }
        }
      }
      for (int h = 0; h < 2; ++h) {
        std::array<float, 32> total, fixed_total;
        for (int lane = 0; lane < 32; ++lane) total[lane] = row_sum[lane][h], fixed_total[lane] = fixed_sum[lane][h];
        quad_reduce(total, false);
        quad_reduce(fixed_total, false);
        for (int lane = 0; lane < 32; ++lane) {
          const int i = i0 + warp_row0 + mma::c_row(lane, 2 * h);
          if (i >= T) continue;
          const float inv_total = 1.f / total[lane];
          for (int b = 0; b < D / 8; ++b) {
            o[static_cast<size_t>(i) * D + 8 * b + mma::c_col(lane, 2 * h)] = bf16_round(o_acc[b][lane][2 * h] * inv_total);
            o[static_cast<size_t>(i) * D + 8 * b + mma::c_col(lane, 2 * h + 1)] = bf16_round(o_acc[b][lane][2 * h + 1] * inv_total);
          }
          if (mma::lane_in_group(lane) == 0) {
            lse[i] = row_max[lane][h] + std::log(total[lane]);
            if (track) fixed_mean[i] = fixed_total[lane] * inv_total;
          }
        }
      }
    }
  }
}

// tc_backward_kernel (and the row-delta kernel), one (batch, head), given the forward's o, lse
// and fixed_logit_mean. dq, dk, dv as bf16 values.
void emulate_backward(const Problem& p, const std::vector<float>& o, const std::vector<float>& lse,
                      const std::vector<float>& fixed_mean, std::vector<float>& dq, std::vector<float>& dk,
                      std::vector<float>& dv, float& dhead_scale, std::vector<float>& dbias) {
  const int T = p.seq_len, D = p.head_dim;
  const ScoreMod& mod = p.mod;
  const float head_scale = mod.head_scale ? mod.head_scale[p.head] : 1.f;
  const bool want_dhead = mod.head_scale != nullptr;
  const bool fire_on = attention::has_query_bias(mod);  // the kQueryBias instantiation
  const attention::FireRow<float> fire = attention::fire_row(mod, p.head);
  std::vector<float> delta(T, 0.f), dq_accum(static_cast<size_t>(T) * D, 0.f);
  for (int i = 0; i < T; ++i) {
    float sum = 0.f;
    for (int d = 0; d < D; ++d) sum += o[i * D + d] * p.d_o[i * D + d];
    delta[i] = sum;
  }
  dk.assign(static_cast<size_t>(T) * D, NAN);
  dv.assign(static_cast<size_t>(T) * D, NAN);
  dbias.assign(fire_on ? mod.bias_table_len : T, 0.f);  // FIRE: its d loss/d table row
  dhead_scale = 0.f;

  for (int kt = 0; kt < mma::num_tiles(T); ++kt) {
    const int j0 = kt * mma::kTileK;
    const std::vector<float> k_img = tile_image(p.k, D, j0, T), v_img = tile_image(p.v, D, j0, T);
    std::vector<std::vector<FragC>> dk_acc(mma::kWarps, std::vector<FragC>(D / 8, FragC{})), dv_acc = dk_acc;
    std::vector<std::vector<FragA>> k_frag(mma::kWarps, std::vector<FragA>(D / 16)), v_frag = k_frag;
    for (int w = 0; w < mma::kWarps; ++w) {
      for (int s = 0; s < D / 16; ++s) {
        k_frag[w][s] = as_a(ldsm(k_img, D, w * mma::kWarpRows, 16 * s, Pattern::kA, false));
        v_frag[w][s] = as_a(ldsm(v_img, D, w * mma::kWarpRows, 16 * s, Pattern::kA, false));
      }
    }
    float dhead_block = 0.f;
    for (int m = mma::bwd_first_q_tile(kt); m < mma::num_tiles(T); ++m) {
      const int i0 = m * mma::kTileQ;
      const std::vector<float> q_img = tile_image(p.q, D, i0, T), do_img = tile_image(p.d_o, D, i0, T);
      std::vector<float> factor_t, bias_t;
      distance_table(mod, i0, j0, p.head, T, factor_t, bias_t);
      const std::vector<float> psi_t = psi_table(mod, i0, j0, p.head, T);
      float row_lse[64], row_delta[64], row_coef[64], row_fixed[64], row_mean[64], row_norm[64];
      attention::FireRowSums<float> fire_sums[64];  // per query row of the tile, over its warps
      for (int r = 0; r < 64; ++r) {
        const int i = i0 + r;
        const bool valid = i < T;
        const float factor = attention::row_factor<float>(mod, i);
        row_lse[r] = valid ? lse[i] : 0.f;
        row_delta[r] = valid ? delta[i] : 0.f;
        row_coef[r] = head_scale * factor * mod.scale;
        row_fixed[r] = factor * mod.scale;
        row_mean[r] = valid && want_dhead ? fixed_mean[i] : 0.f;
        row_norm[r] = fire_on ? fire.norm(i) : 0.f;
      }
      const bool masked = mma::tile_needs_mask(i0, j0, T);
      std::vector<float> dst_img(64 * 64, NAN), dist_grad(mma::kDistanceTableLen, 0.f);
      for (int w = 0; w < mma::kWarps; ++w) {
        const int warp_row0 = w * mma::kWarpRows;
        float dhead_lane[32] = {};
        for (int chunk = 0; chunk < 4; ++chunk) {
          std::array<FragC, 2> s{}, dp{};
          for (int ks = 0; ks < D / 16; ++ks) {
            const Ldsm qb = ldsm(q_img, D, 16 * chunk, 16 * ks, Pattern::kB, false);
            const Ldsm dob = ldsm(do_img, D, 16 * chunk, 16 * ks, Pattern::kB, false);
            mma_emulate(s[0], k_frag[w][ks], as_b(qb, 0));
            mma_emulate(s[1], k_frag[w][ks], as_b(qb, 1));
            mma_emulate(dp[0], v_frag[w][ks], as_b(dob, 0));
            mma_emulate(dp[1], v_frag[w][ks], as_b(dob, 1));
          }
          for (int b = 0; b < 2; ++b) {
            for (int lane = 0; lane < 32; ++lane) {
              for (int e = 0; e < 4; ++e) {
                const int kr = warp_row0 + mma::c_row(lane, e);
                const int qr = 16 * chunk + 8 * b + mma::c_col(lane, e);
                const int d = mma::distance_index(qr, kr);
                const bool visible = !masked || mma::pair_visible(i0 + qr, j0 + kr, T);
                const float bias = fire_on ? bias_t[d] + fire.bias(psi_t[d], row_norm[qr]) : bias_t[d];
                const mma::BackwardTerms t = mma::tc_backward_terms(
                    visible, s[b][lane][e], dp[b][lane][e], row_coef[qr], row_fixed[qr], factor_t[d],
                    bias, row_lse[qr], row_delta[qr], row_mean[qr]);
                if (want_dhead) dhead_lane[lane] += t.dhead;
                if (visible && !fire_on) dist_grad[d] += t.dlogit;
                if (visible && fire_on)
                  attention::fire_pair_gradient(fire, psi_t[d], row_norm[qr], (i0 + qr) - (j0 + kr), t.dlogit,
                                                dbias.data(), fire_sums[qr]);
                s[b][lane][e] = t.p;
                dp[b][lane][e] = t.ds;
              }
            }
          }
          const FragA pa = pack_a_from_c(s[0], s[1]), dsa = pack_a_from_c(dp[0], dp[1]);
          for (int pp = 0; pp < D / 16; ++pp) {
            const Ldsm dob = ldsm(do_img, D, 16 * chunk, 16 * pp, Pattern::kA, true);
            const Ldsm qb = ldsm(q_img, D, 16 * chunk, 16 * pp, Pattern::kA, true);
            mma_emulate(dv_acc[w][2 * pp], pa, as_b(dob, 0));
            mma_emulate(dv_acc[w][2 * pp + 1], pa, as_b(dob, 1));
            mma_emulate(dk_acc[w][2 * pp], dsa, as_b(qb, 0));
            mma_emulate(dk_acc[w][2 * pp + 1], dsa, as_b(qb, 1));
          }
          // dSᵀ to shared memory (the bf16 pairs of ds_frag).
          for (int b = 0; b < 2; ++b) {
            for (int lane = 0; lane < 32; ++lane) {
              for (int h = 0; h < 2; ++h) {
                const int kr = warp_row0 + mma::c_row(lane, 2 * h);
                const int qr = 16 * chunk + 8 * b + mma::c_col(lane, 2 * h);
                const int base = mma::swizzled<64>(kr, qr);
                dst_img[base] = dsa[lane][4 * b + 2 * h];
                dst_img[base + 1] = dsa[lane][4 * b + 2 * h + 1];
              }
            }
          }
        }
        for (int lane = 0; lane < 32; ++lane) dhead_block += dhead_lane[lane];
      }
      for (int d = 0; d < mma::kDistances && !fire_on; ++d) {
        const int t = mma::distance_of_entry(d, i0, j0);
        if (t >= 0 && t < T) dbias[t] += dist_grad[d];
      }
      // FIRE: each query row's c and L gradient from the tile pair's sums.
      for (int r = 0; r < 64 && fire_on; ++r)
        if (i0 + r < T) attention::fire_row_gradient(fire, i0 + r, fire_sums[r], dbias.data());
      // dQ: warp w, query rows 16w .., dS (from dSᵀ with ldmatrix.trans) · K (ldmatrix.trans).
      for (int w = 0; w < mma::kWarps; ++w) {
        const int warp_row0 = w * mma::kWarpRows;
        for (int half = 0; half < D / 64; ++half) {
          std::array<FragC, 8> acc{};
          for (int kk = 0; kk < 4; ++kk) {
            const FragA a = as_a(ldsm(dst_img, 64, 16 * kk, warp_row0, Pattern::kB, true));
            for (int pp = 0; pp < 4; ++pp) {
              const Ldsm kb = ldsm(k_img, D, 16 * kk, 64 * half + 16 * pp, Pattern::kA, true);
              mma_emulate(acc[2 * pp], a, as_b(kb, 0));
              mma_emulate(acc[2 * pp + 1], a, as_b(kb, 1));
            }
          }
          for (int lane = 0; lane < 32; ++lane) {
            for (int e = 0; e < 4; ++e) {
              const int i = i0 + warp_row0 + mma::c_row(lane, e);
              if (i >= T) continue;
              for (int b = 0; b < 8; ++b)
                dq_accum[static_cast<size_t>(i) * D + 64 * half + 8 * b + mma::c_col(lane, e)] += acc[b][lane][e];
            }
          }
        }
      }
    }
    dhead_scale += dhead_block;
    for (int w = 0; w < mma::kWarps; ++w) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int e = 0; e < 4; ++e) {
          const int j = j0 + w * mma::kWarpRows + mma::c_row(lane, e);
          if (j >= T) continue;
          for (int b = 0; b < D / 8; ++b) {
            dk[static_cast<size_t>(j) * D + 8 * b + mma::c_col(lane, e)] = bf16_round(dk_acc[w][b][lane][e]);
            dv[static_cast<size_t>(j) * D + 8 * b + mma::c_col(lane, e)] = bf16_round(dv_acc[w][b][lane][e]);
          }
        }
      }
    }
  }
  dq.resize(dq_accum.size());
  for (size_t n = 0; n < dq_accum.size(); ++n) dq[n] = bf16_round(dq_accum[n]);
}

using attention::cuda::relative_error;  // tests/cuda/relative_error.h

// One problem through both emulated kernels against the float64 reference; a line of errors.
void check_problem(const Problem& p, const char* name) {
  const Outputs want = reference(p);
  std::vector<float> o, lse, fixed_mean, dq, dk, dv, dbias;
  float dhead_scale = 0.f;
  emulate_forward(p, o, lse, fixed_mean);
  emulate_backward(p, o, lse, fixed_mean, dq, dk, dv, dhead_scale, dbias);

  struct Check {
    const char* name;
    double error, tolerance;
  };
  // Tolerances as the GPU test's for bf16 (tests/cuda/fused_attention_test.cu: 2e-2,
  // max |err| / max |ref|); lse and the fixed-logit mean are fp32 throughout.
  std::vector<Check> results = {
      {"o", relative_error(o, want.o, 1e-3), 2e-2},
      {"lse", relative_error(lse, want.lse, 1.0), 1e-5},
      {"dq", relative_error(dq, want.dq, 1.0), 2e-2},
      {"dk", relative_error(dk, want.dk, 1.0), 2e-2},
      {"dv", relative_error(dv, want.dv, 1e-3), 2e-2},
  };
  if (attention::has_query_bias(p.mod)) {  // FIRE: grid, c and L apart (fire_table.h)
    const auto e = attention::cuda::test::fire_gradient_errors(dbias, want.dbias, p.mod.bias_table_len - 2);
    results.push_back({"dgrid", e.grid, 2e-2});
    results.push_back({"dc", e.c, 2e-2});
    results.push_back({"dL", e.threshold, 2e-2});
  } else {
    results.push_back({"dbias", relative_error(dbias, want.dbias, 1.0), 2e-2});
  }
  if (p.mod.head_scale) {
    results.push_back({"fixed_mean", relative_error(fixed_mean, want.fixed_mean, 1.0), 1e-5});
    results.push_back({"dhead_scale", std::fabs(dhead_scale - want.dhead_scale) / std::max(1.0, std::fabs(want.dhead_scale)), 2e-2});
  }
  std::string line;
  bool ok = true;
  for (const Check& check : results) {
    const bool pass = check.error <= check.tolerance;
    ok = ok && pass;
    char text[64];
    std::snprintf(text, sizeof(text), " %s=%.1e%s", check.name, check.error, pass ? "" : "!");
    line += text;
    EXPECT(pass, "emulated kernels T=%d D=%d %s: %s error %.3e > %.0e", p.seq_len, p.head_dim, name,
           check.name, check.error, check.tolerance);
  }
  std::printf("%-4s emulated T=%-3d D=%-3d %-23s%s\n", ok ? "ok" : "FAIL", p.seq_len, p.head_dim, name, line.c_str());
}


}  // namespace

void check_kernels(std::mt19937& rng) {
  const float head_scales[2] = {0.8f, 1.3f};
  const float alibi_slopes[2] = {0.25f, 0.0625f};
  // A learned bias table for 2 heads: KERPLE-log's −r1·ln(1 + r2·t) with (r1, r2) = (1.5, 0.8)
  // and (0.6, 2.0), exactly T entries a head as the binding passes it (made per shape below); the
  // problems use head 1, the last, so a read past its row leaves the buffer (AddressSanitizer's
  // build of this test, attention_mma_layout_test_asan, stops there).
  std::vector<float> kerple_table;
  const float r[2][2] = {{1.5f, 0.8f}, {0.6f, 2.0f}};
  struct ModCase {
    const char* name;
    const ScoreMod* mod;  // logn_kerple's table is set per shape
  };
  ScoreMod si_alibi;
  si_alibi.distance = attention::DistanceMod::kScaleInvariant;
  si_alibi.inv_tau = 0.1f;
  si_alibi.alibi_slope = alibi_slopes;
  ScoreMod logn_kerple;
  logn_kerple.row = attention::RowFactor::kLogN;
  logn_kerple.head_scale = head_scales;
  // FIRE (a random table for 2 heads, G = 33, exactly 2 (G + 2) entries, made per shape) on top of
  // LogN's learned head scale: the per-pair bias in both forward passes and its gradient.
  constexpr int kFireGrid = 33;
  std::vector<float> fire_table;
  ScoreMod logn_fire;
  logn_fire.row = attention::RowFactor::kLogN;
  logn_fire.head_scale = head_scales;
  logn_fire.table_index = attention::TableIndex::kFire;
  logn_fire.bias_table_len = kFireGrid + 2;
  const ModCase mods[] = {{"scale-invariant+alibi", &si_alibi},
                          {"logn+head_scale+kerple", &logn_kerple},
                          {"logn+head_scale+fire", &logn_fire}};

  std::normal_distribution<float> normal(0.f, 1.f);
  struct Shape {
    int seq_len, head_dim;
  };
  for (const Shape shape : {Shape{37, 64}, Shape{100, 64}, Shape{130, 64}, Shape{100, 128}}) {
    const int table_len = shape.seq_len;
    kerple_table.assign(2 * table_len, 0.f);
    kerple_table.shrink_to_fit();  // no slack past the last head's row
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < table_len; ++t) kerple_table[h * table_len + t] = -r[h][0] * std::log1p(r[h][1] * t);
    logn_kerple.bias_table = kerple_table.data();
    logn_kerple.bias_table_len = table_len;
    fire_table = attention::cuda::test::random_fire_table(2, kFireGrid, shape.seq_len, rng);
    fire_table.shrink_to_fit();
    logn_fire.bias_table = fire_table.data();
    for (const ModCase& c : mods) {
      Problem p;
      p.seq_len = shape.seq_len;
      p.head_dim = shape.head_dim;
      p.head = 1;
      p.mod = *c.mod;
      p.mod.scale = 1.f / std::sqrt(static_cast<float>(shape.head_dim));
      for (std::vector<float>* x : {&p.q, &p.k, &p.v, &p.d_o}) {
        x->resize(static_cast<size_t>(p.seq_len) * p.head_dim);
        for (float& value : *x) value = bf16_round(normal(rng));
      }
      check_problem(p, c.name);
    }
  }
}

}  // namespace mma_test
