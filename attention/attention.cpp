#include "attention/attention.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace attention {

std::vector<std::string> preset_names() { return {"nope"}; }

CausalAttentionImpl::CausalAttentionImpl(MethodOptions options) : options_(std::move(options)) {}

// Placeholder until the attention engine lands: plain causal softmax attention, no positions.
torch::Tensor CausalAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v) {
  const auto T = q.size(2);
  const double scale = options_.score_scale > 0 ? options_.score_scale
                                                : 1.0 / std::sqrt(double(q.size(3)));
  auto s = torch::matmul(q, k.transpose(-2, -1)) * scale;  // (B, H, T, T)
  if (record_score_std) {
    torch::NoGradGuard ng;
    last_score_std = s.std().item<double>();
  }
  auto mask = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  s = s.masked_fill(mask, -std::numeric_limits<float>::infinity());
  return torch::matmul(torch::softmax(s, -1), v);
}

}  // namespace attention
