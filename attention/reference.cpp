#include "attention/reference.h"

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

}  // namespace

torch::Tensor reference_logits(const torch::Tensor& q, const torch::Tensor& k, const Method& m,
                               const torch::Tensor& head_scale) {
  check_inputs(q, k, m);
  const int64_t T = q.size(2), H = q.size(1);
  const auto f64 = q.options().dtype(torch::kFloat64);

  // Rotation in float64 from the method's frequencies at this context.
  const RotaryTables rot = rotary_tables(m, T, f64);
  const auto qd = apply_rotary(q.to(torch::kFloat64), rot);  // (B, H, T, D)
  const auto kd = apply_rotary(k.to(torch::kFloat64), rot);  // (B, H, T, D)

  const double scale = m.score_scale * yarn_logit_multiplier(m, T);
  auto s = torch::matmul(qd, kd.transpose(-2, -1)) * scale;  // (B, H, T, T)

  // Multiplier and bias matrices from the closed forms.
  const auto i = torch::arange(T, f64).unsqueeze(1);  // (T, 1)
  const auto j = torch::arange(T, f64).unsqueeze(0);  // (1, T)
  const auto t = (i - j).clamp_min(0);                // (T, T) distance (0 above the diagonal)
  const auto n = i + 1;                               // (T, 1) visible keys
  torch::Tensor row, dist_mult, dist_bias;            // (T, 1), (T, T), (T, T)
  switch (m.transform) {
    case Transform::kLogN:
      row = n.log();
      break;
    case Transform::kInfoScale: {
      const double e = -2.0 / double(m.head_dim);
      const double denom = 1.0 - std::pow(double(m.train_context), e);
      row = ((1 - n.pow(e)) / denom).clamp_min(1.0).sqrt();  // max(1, sqrt(r))
      break;
    }
    case Transform::kScaleInvariant: {
      const auto lg = (t / m.tau).log1p();
      dist_mult = (1 + 2 * lg).sqrt();
      dist_bias = -2 * lg;
      break;
    }
    default:
      break;
  }
  torch::Tensor mult = row.defined() ? row : torch::ones({T, 1}, f64);  // (T, 1) or (T, T)
  if (dist_mult.defined()) mult = mult * dist_mult;
  mult = mult.expand({T, T}).unsqueeze(0);  // (1, T, T)
  if (head_scale.defined())
    mult = mult * head_scale.to(torch::kFloat64).view({H, 1, 1});  // (H, T, T)
  torch::Tensor bias = dist_bias.defined() ? dist_bias.unsqueeze(0) : torch::zeros({1, T, T}, f64);
  if (m.alibi()) {
    const auto slopes = torch::tensor(alibi_slopes(H), f64).view({H, 1, 1});
    bias = bias - slopes * t.unsqueeze(0);  // (H, T, T)
  }
  auto logits = s * mult + bias;  // (B, H, T, T)
  const auto above = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  return logits.masked_fill(above, -std::numeric_limits<double>::infinity());
}

std::tuple<torch::Tensor, torch::Tensor> reference_attention_with_lse(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const Method& m,
    const torch::Tensor& head_scale) {
  if (v.sizes() != q.sizes())
    throw std::invalid_argument("attention reference: v must be (B, H, T, D) like q");
  const auto logits = reference_logits(q, k, m, head_scale);  // (B, H, T, T)
  const auto lse = logits.logsumexp(-1);                      // (B, H, T)
  const auto p = (logits - lse.unsqueeze(-1)).exp();          // (B, H, T, T)
  const auto out = torch::matmul(p, v.to(torch::kFloat64));   // (B, H, T, D)
  return {out.to(q.scalar_type()), lse.to(q.scalar_type())};
}

torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const Method& m,
                                  const torch::Tensor& head_scale) {
  return std::get<0>(reference_attention_with_lse(q, k, v, m, head_scale));
}

}  // namespace attention
