#include "attention/reference.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace attention {

namespace {

void check_inputs(const torch::Tensor& q, const torch::Tensor& k, const Method& m) {
  if (q.dim() != 4 || k.sizes() != q.sizes())
    throw std::invalid_argument("attention reference: q and k must both be (B, H, T, D)");
  if (q.size(1) != m.heads || q.size(3) != m.head_dim)
    throw std::invalid_argument("attention reference: q is (B, H, T, D) with H = " +
                                std::to_string(q.size(1)) + ", D = " + std::to_string(q.size(3)) +
                                " but the method has heads = " + std::to_string(m.heads) +
                                ", head_dim = " + std::to_string(m.head_dim));
  check_context(m, q.size(2));
}

// The transform's matrices for query rows [start, start + n) over keys [0, Tk) of a sequence of
// length `context`, float64 on `f64`'s device, straight from the closed forms (method.h). The whole
// sequence is start = 0, n = Tk = context.
struct ClosedForms {
  torch::Tensor mult;   // (n, Tk) or (n, 1): scale · row factor · distance factor
  torch::Tensor bias;   // (n, Tk) distance bias, or undefined (= 0)
  torch::Tensor i;      // (n, 1) query positions
  torch::Tensor t;      // (n, Tk) distance i − j (0 above the diagonal)
  torch::Tensor t_index;  // (1, n·Tk) the same as int64, for a learned bias table; undefined without
  bool fire = false;      // the learned table is FIRE's (H, G + 2): f_h on a grid, c_h, L_h

  torch::Tensor above;  // (n, Tk) bool, j > i
  torch::Tensor slopes; // (H) ALiBi slopes, or undefined
};

ClosedForms closed_forms(const Method& m, int64_t start, int64_t rows, int64_t keys, int64_t context,
                         const torch::TensorOptions& f64) {
  ClosedForms c;
  const double scale = m.score_scale * yarn_logit_multiplier(m, context);
  c.i = torch::arange(start, start + rows, f64).unsqueeze(1);  // (n, 1)
  const auto j = torch::arange(keys, f64).unsqueeze(0);          // (1, Tk)
  const auto& i = c.i;
  const auto t = (i - j).clamp_min(0);                           // (n, Tk)
  const auto n = i + 1;                                          // (n, 1) visible keys
  c.t = t;
  c.mult = torch::full({rows, 1}, scale, f64);
  switch (m.transform) {
    case Transform::kLogN:
      c.mult = n.log() * scale;
      break;
    case Transform::kInfoScale: {
      const double e = -2.0 / double(m.head_dim);
      const double denom = 1.0 - std::pow(double(m.train_context), e);
      c.mult = ((1 - n.pow(e)) / denom).clamp_min(1.0).sqrt() * scale;  // max(1, sqrt(r))
      break;
    }
    case Transform::kScaleInvariant: {
      // The paper's a_t and m_t written again, not score_mod.h's: the oracle the kernels (and
      // that policy) are tested against stays independent of them.
      const auto lg = (t / m.value(Parameter::kTau)).log1p();
      c.mult = (1 + 2 * lg).sqrt() * scale;
      c.bias = -2 * lg;
      break;
    }
    default:
      break;
  }
  if (m.learned_bias()) c.t_index = t.to(torch::kLong).reshape({1, rows * keys});
  c.fire = transform_spec(m.transform).table == TableIndex::kFire;
  c.slopes = alibi_slope_tensor(m, f64);  // made on the device (undefined without ALiBi)
  c.above = j.gt(i);
  return c;
}

// FIRE's bias (H', n, Tk) from its table (H', G + 2) at query positions i (n, 1) and distances
// t (n, Tk), straight from arXiv 2310.04418 with f_h interpolated on its grid: f_h(x),
// x = ψ(t) / (ψ(max(L_h, i)) + ε), ψ(y) = ln(1 + c_h·y), by torch ops that autograd differentiates
// w.r.t. the table (the kernels' hand-written gradient is checked against this).
torch::Tensor fire_bias(const torch::Tensor& table, const torch::Tensor& i, const torch::Tensor& t) {
  const auto tb = table.to(torch::kFloat64);
  const int64_t Hs = tb.size(0), G = tb.size(1) - 2, n = t.size(0), Tk = t.size(1);
  const auto c = tb.narrow(1, G, 1).view({Hs, 1, 1}), L = tb.narrow(1, G + 1, 1).view({Hs, 1, 1});
  const auto x = (c * t).log1p() / ((c * torch::maximum(i, L)).log1p() + double(kFireEps));  // (H', n, Tk)
  const auto u = x * double(G - 1);
  const auto cell = u.detach().floor().clamp(0, double(G - 2));
  const auto w = u - cell;
  const auto index = cell.to(torch::kLong).view({Hs, n * Tk});
  const auto f = tb.narrow(1, 0, G);
  const auto f0 = f.gather(1, index).view({Hs, n, Tk}), f1 = f.gather(1, index + 1).view({Hs, n, Tk});
  return f0 + w * (f1 - f0);
}

// Masked logits (B', H', n, Tk) for heads [h0, h0 + H') from the raw dot products s (B', H', n, Tk).
// head_scale: (H') or undefined; bias_table: (H', T' >= Tk) for a learned bias. in_place: overwrite
// s (inference only).
torch::Tensor logits_from_dots(torch::Tensor s, const ClosedForms& c, const torch::Tensor& head_scale,
                               const torch::Tensor& bias_table, int64_t h0, bool in_place) {
  const int64_t Hs = s.size(1);
  const double inf = std::numeric_limits<double>::infinity();
  const torch::Tensor slopes =
      c.slopes.defined() ? c.slopes.narrow(0, h0, Hs).view({Hs, 1, 1}) : torch::Tensor();
  const torch::Tensor hs =
      head_scale.defined() ? head_scale.to(torch::kFloat64).view({Hs, 1, 1}) : torch::Tensor();
  const int64_t n = s.size(2), Tk = s.size(3);
  torch::Tensor learned;  // (H', n, Tk): bias_table[h][i − j]
  if (c.fire) {
    if (!bias_table.defined() || bias_table.dim() != 2 || bias_table.size(0) != Hs || bias_table.size(1) < 4)
      throw std::invalid_argument("attention reference: fire needs its table (H, G + 2 >= 4)");
    learned = fire_bias(bias_table, c.i, c.t);
  } else if (c.t_index.defined()) {
    if (!bias_table.defined() || bias_table.dim() != 2 || bias_table.size(0) != Hs || bias_table.size(1) < Tk)
      throw std::invalid_argument("attention reference: this method learns a distance bias and needs bias_table (H, >= T)");
    learned = bias_table.to(torch::kFloat64).gather(1, c.t_index.expand({Hs, n * Tk})).view({Hs, n, Tk});
  }
  if (in_place) {
    s.mul_(c.mult);
    if (hs.defined()) s.mul_(hs);
    if (c.bias.defined()) s.add_(c.bias);
    if (slopes.defined()) s.sub_(slopes * c.t);
    if (learned.defined()) s.add_(learned);
    return s.masked_fill_(c.above, -inf);
  }
  auto logits = s * c.mult;
  if (hs.defined()) logits = logits * hs;
  if (c.bias.defined()) logits = logits + c.bias;
  if (slopes.defined()) logits = logits - slopes * c.t;
  if (learned.defined()) logits = logits + learned;
  return logits.masked_fill(c.above, -inf);
}

std::pair<torch::Tensor, torch::Tensor> rotated_f64(const torch::Tensor& q, const torch::Tensor& k,
                                                    const Method& m) {
  const RotaryTables rot = rotary_tables(m, q.size(2), q.options().dtype(torch::kFloat64));
  return {apply_rotary(q.to(torch::kFloat64), rot), apply_rotary(k.to(torch::kFloat64), rot)};
}

}  // namespace

torch::Tensor reference_logits(const torch::Tensor& q, const torch::Tensor& k, const Method& m,
                               const torch::Tensor& head_scale, const torch::Tensor& bias_table) {
  check_inputs(q, k, m);
  const auto [qd, kd] = rotated_f64(q, k, m);  // (B, H, T, D)
  const auto c = closed_forms(m, 0, q.size(2), q.size(2), q.size(2), qd.options());
  return logits_from_dots(torch::matmul(qd, kd.transpose(-2, -1)), c, head_scale, bias_table, 0, false);
}

torch::Tensor reference_logits_rows(const torch::Tensor& q_rotated, const torch::Tensor& k_rotated,
                                    const Method& m, int64_t start, int64_t context,
                                    const torch::Tensor& head_scale, const torch::Tensor& bias_table) {
  const int64_t n = q_rotated.size(2), Tk = k_rotated.size(2);
  if (q_rotated.dim() != 4 || k_rotated.dim() != 4 || q_rotated.size(1) != m.heads ||
      k_rotated.size(1) != m.heads || q_rotated.size(3) != m.head_dim || k_rotated.size(3) != m.head_dim)
    throw std::invalid_argument("attention reference: q and k must be (B, H, n, D) and (B, H, Tk, D) with H = " +
                                std::to_string(m.heads) + ", D = " + std::to_string(m.head_dim));
  if (start < 0 || start + n > Tk || Tk > context)
    throw std::invalid_argument("attention reference: rows [" + std::to_string(start) + ", " +
                                std::to_string(start + n) + ") over " + std::to_string(Tk) +
                                " keys do not fit a sequence of " + std::to_string(context));
  check_context(m, context);
  const auto qd = q_rotated.to(torch::kFloat64), kd = k_rotated.to(torch::kFloat64);
  const auto c = closed_forms(m, start, n, Tk, context, qd.options());
  return logits_from_dots(torch::matmul(qd, kd.transpose(-2, -1)), c, head_scale, bias_table, 0, false);
}

std::tuple<torch::Tensor, torch::Tensor> reference_attention_with_lse(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const Method& m,
    const torch::Tensor& head_scale, const torch::Tensor& bias_table) {
  if (v.sizes() != q.sizes())
    throw std::invalid_argument("attention reference: v must be (B, H, T, D) like q");
  check_inputs(q, k, m);
  const bool needs_graph = torch::GradMode::is_enabled() &&
                           (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                            (head_scale.defined() && head_scale.requires_grad()) ||
                            (bias_table.defined() && bias_table.requires_grad()));
  const auto [qd, kd] = rotated_f64(q, k, m);  // (B, H, T, D)
  const auto vd = v.to(torch::kFloat64);
  if (needs_graph) {
    const auto c = closed_forms(m, 0, q.size(2), q.size(2), q.size(2), qd.options());
    const auto logits =
        logits_from_dots(torch::matmul(qd, kd.transpose(-2, -1)), c, head_scale, bias_table, 0, false);
    const auto lse = logits.logsumexp(-1);              // (B, H, T)
    const auto p = (logits - lse.unsqueeze(-1)).exp();  // (B, H, T, T)
    const auto out = torch::matmul(p, vd);              // (B, H, T, D)
    return {out.to(q.scalar_type()), lse.to(q.scalar_type())};
  }
  // Inference: one (b, h) at a time, in place, so the oracle still runs at long contexts
  // (peak ≈ a few T×T float64 matrices instead of a few B·H·T×T).
  torch::NoGradGuard no_grad;
  const int64_t B = q.size(0), H = q.size(1);
  const auto c = closed_forms(m, 0, q.size(2), q.size(2), q.size(2), qd.options());
  auto out = torch::empty(qd.sizes(), qd.options());         // (B, H, T, D)
  auto lse = torch::empty({B, H, q.size(2)}, qd.options());  // (B, H, T)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const auto qh = qd.narrow(0, b, 1).narrow(1, h, 1), kh = kd.narrow(0, b, 1).narrow(1, h, 1);
      const auto hs = head_scale.defined() ? head_scale.narrow(0, h, 1) : torch::Tensor();
      const auto bt = bias_table.defined() ? bias_table.narrow(0, h, 1) : torch::Tensor();
      auto p = logits_from_dots(torch::matmul(qh, kh.transpose(-2, -1)), c, hs, bt, h, true)[0][0];
      const auto l = p.logsumexp(-1);  // (T)
      p.sub_(l.unsqueeze(-1)).exp_();  // P, in place
      out[b][h].copy_(torch::matmul(p, vd[b][h]));
      lse[b][h].copy_(l);
    }
  return {out.to(q.scalar_type()), lse.to(q.scalar_type())};
}

torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const Method& m,
                                  const torch::Tensor& head_scale, const torch::Tensor& bias_table) {
  return std::get<0>(reference_attention_with_lse(q, k, v, m, head_scale, bias_table));
}

}  // namespace attention
