#include "models/gpt.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace models {

namespace {

std::string bad(const std::string& option, const std::string& why) {
  return "GPTOptions." + option + " " + why;
}

int64_t mlp_hidden(const GPTOptions& o) {
  return static_cast<int64_t>(std::llround(o.mlp_ratio * static_cast<double>(o.d_model)));
}

// modded-nanogpt's CastedLinear init: U(-b, b), b = √3 · 0.5/√fan_in (std 0.5/√fan_in).
void init_hidden(torch::nn::Linear& layer) {
  torch::NoGradGuard ng;
  const double fan_in = static_cast<double>(layer->weight.size(1));
  const double bound = std::sqrt(3.0) * 0.5 / std::sqrt(fan_in);
  layer->weight.uniform_(-bound, bound);
}

void init_zero(torch::nn::Linear& layer) {
  torch::NoGradGuard ng;
  layer->weight.zero_();
}

torch::nn::Linear linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

}  // namespace

void validate(const GPTOptions& o) {
  if (o.vocab_size <= 0) throw std::invalid_argument(bad("vocab_size", "must be > 0"));
  if (o.layers <= 0) throw std::invalid_argument(bad("layers", "must be > 0"));
  if (o.d_model <= 0) throw std::invalid_argument(bad("d_model", "must be > 0"));
  if (o.heads <= 0) throw std::invalid_argument(bad("heads", "must be > 0"));
  if (o.head_dim <= 0) throw std::invalid_argument(bad("head_dim", "must be > 0"));
  if (!(o.mlp_ratio > 0) || !std::isfinite(o.mlp_ratio) || mlp_hidden(o) < 1)
    throw std::invalid_argument(
        bad("mlp_ratio", "must be finite and > 0 with round(mlp_ratio·d_model) >= 1 (got " +
                             std::to_string(o.mlp_ratio) + ")"));
}

// ---------------------------------------------------------------------------------------------

AttentionBlockImpl::AttentionBlockImpl(const GPTOptions& options, int64_t /*layer*/)
    : heads(options.heads), head_dim(options.head_dim) {
  const int64_t C = options.d_model, HD = options.heads * options.head_dim;
  q = register_module("q", linear(C, HD));
  k = register_module("k", linear(C, HD));
  v = register_module("v", linear(C, HD));
  o = register_module("o", linear(HD, C));
  init_hidden(q);
  init_hidden(k);
  init_hidden(v);
  init_zero(o);
  attention::MethodOptions m = options.attention;
  m.heads = options.heads;
  m.head_dim = options.head_dim;
  core = register_module("core", attention::CausalAttention(m));
}

torch::Tensor AttentionBlockImpl::forward_cached(const torch::Tensor& x, torch::Tensor& k_cache,
                                                 torch::Tensor& v_cache, int64_t context) {
  const auto B = x.size(0), n = x.size(1);
  auto split = [&](const torch::Tensor& t) {  // (B, n, H·D) → (B, H, n, D)
    return t.view({B, n, heads, head_dim}).transpose(1, 2);
  };
  auto y = core->forward_cached(rms_norm(split(q(x))), rms_norm(split(k(x))), split(v(x)),
                                k_cache, v_cache, context);  // (B, H, n, D)
  y = y.transpose(1, 2).contiguous().view({B, n, heads * head_dim});  // (B, n, H·D)
  return o(y);                                                         // (B, n, C)
}

torch::Tensor AttentionBlockImpl::forward(const torch::Tensor& x, int64_t context,
                                          attention::AttentionProbe* probe) {
  const auto B = x.size(0), T = x.size(1);
  // (B, T, C) → (B, T, H, D) → (B, H, T, D)
  auto split = [&](const torch::Tensor& t) {
    return t.view({B, T, heads, head_dim}).transpose(1, 2);
  };
  auto qh = rms_norm(split(q(x)));  // QK-norm over head_dim, no gain
  auto kh = rms_norm(split(k(x)));
  auto vh = split(v(x));
  auto y = context > 0 ? core->forward_at(qh, kh, vh, context, probe) : core(qh, kh, vh, probe);  // (B, H, T, D)
  y = y.transpose(1, 2).contiguous().view({B, T, heads * head_dim});  // (B, T, H·D)
  return o(y);                                                         // (B, T, C)
}

MLPImpl::MLPImpl(const GPTOptions& options) {
  const int64_t C = options.d_model, M = mlp_hidden(options);
  fc = register_module("fc", linear(C, M));
  proj = register_module("proj", linear(M, C));
  init_hidden(fc);
  init_zero(proj);
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return proj(relu_squared(fc(x)));  // (B, T, M) → (B, T, C)
}

BlockImpl::BlockImpl(const GPTOptions& options, int64_t layer) {
  attn = register_module("attn", AttentionBlock(options, layer));
  mlp = register_module("mlp", MLP(options));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, int64_t context, attention::AttentionProbe* probe) {
  auto h = x + attn(rms_norm(x), context, probe);  // (B, T, C)
  return h + mlp(rms_norm(h));              // (B, T, C)
}

torch::Tensor BlockImpl::forward_cached(const torch::Tensor& x, torch::Tensor& k_cache,
                                        torch::Tensor& v_cache, int64_t context) {
  auto h = x + attn->forward_cached(rms_norm(x), k_cache, v_cache, context);  // (B, n, C)
  return h + mlp(rms_norm(h));                                                // (B, n, C)
}

// ---------------------------------------------------------------------------------------------

GPTImpl::GPTImpl(GPTOptions options) : options_(std::move(options)) {
  validate(options_);
  options_.attention.heads = options_.heads;
  options_.attention.head_dim = options_.head_dim;
  const int64_t V = options_.vocab_size, C = options_.d_model;
  embed = register_module("embed", torch::nn::Embedding(V, C));  // N(0, 1) init
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options_.layers; ++i) {
    block_list.push_back(Block(options_, i));
    blocks->push_back(block_list.back());
  }
  head = register_module("head", linear(C, V));
  init_zero(head);
}

torch::Tensor GPTImpl::forward(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2, "GPT::forward: tokens must be (B, T), got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong, "GPT::forward: tokens must be int64");
  auto x = rms_norm(embed(tokens));  // (B, T, C)
  for (auto& block : block_list) x = block(x);
  return head(rms_norm(x));  // (B, T, V)
}

torch::Tensor GPTImpl::forward(const torch::Tensor& tokens, int64_t context) {
  TORCH_CHECK(tokens.dim() == 2, "GPT::forward: tokens must be (B, T), got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong, "GPT::forward: tokens must be int64");
  TORCH_CHECK(context >= tokens.size(1), "GPT::forward: context ", context,
              " is shorter than the tokens (", tokens.size(1), ")");
  auto x = rms_norm(embed(tokens));  // (B, T, C)
  for (auto& block : block_list) x = block->forward(x, context);
  return head(rms_norm(x));  // (B, T, V)
}

torch::Tensor GPTImpl::forward(const torch::Tensor& tokens, std::vector<attention::AttentionProbe>& probes) {
  TORCH_CHECK(tokens.dim() == 2, "GPT::forward: tokens must be (B, T), got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong, "GPT::forward: tokens must be int64");
  TORCH_CHECK(probes.size() == block_list.size(), "GPT::forward: ", probes.size(), " probes for ",
              block_list.size(), " layers");
  auto x = rms_norm(embed(tokens));  // (B, T, C)
  for (size_t l = 0; l < block_list.size(); ++l) x = block_list[l]->forward(x, 0, &probes[l]);
  return head(rms_norm(x));  // (B, T, V)
}

torch::Tensor GPTImpl::forward_cached(const torch::Tensor& tokens, KVCache& cache) {
  TORCH_CHECK(tokens.dim() == 2, "GPT::forward_cached: tokens must be (B, n), got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong, "GPT::forward_cached: tokens must be int64");
  cache.k.resize(block_list.size());
  cache.v.resize(block_list.size());
  auto x = rms_norm(embed(tokens));  // (B, n, C)
  for (size_t l = 0; l < block_list.size(); ++l)
    x = block_list[l]->forward_cached(x, cache.k[l], cache.v[l], cache.context);
  return head(rms_norm(x));  // (B, n, V)
}

torch::Tensor GPTImpl::loss(const torch::Tensor& tokens_in, const torch::Tensor& targets) {
  TORCH_CHECK(targets.sizes() == tokens_in.sizes(), "GPT::loss: targets ", targets.sizes(),
              " must match tokens ", tokens_in.sizes());
  auto logits = forward(tokens_in);  // (B, T, V)
  const auto V = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, V}).to(torch::kFloat),
                                              targets.reshape({-1}));
}

int64_t GPTImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace models
