#include "models/gpt.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "models/chunked_loss.h"

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

bool reduced(torch::ScalarType t) { return t == torch::kBFloat16 || t == torch::kHalf; }

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A block whose activations are recomputed in the backward (PyTorch's reentrant checkpoint):
// the forward runs without a graph and keeps only the block's input; the backward reruns the
// block with a graph and back-propagates through it, which accumulates the parameters'
// gradients (and fires their hooks) exactly as the plain backward does, and returns the input's.
// The block is deterministic (no dropout), so the recomputation is the forward pass itself.
// The block travels to the backward as a shared owner in a capsule (an IValue holds no other C++
// object): the graph keeps the block alive however long it lives.
struct BlockCapsule : torch::CustomClassHolder {
  explicit BlockCapsule(std::shared_ptr<BlockImpl> b) : block(std::move(b)) {}
  std::shared_ptr<BlockImpl> block;
};

class CheckpointedBlock : public torch::autograd::Function<CheckpointedBlock> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::shared_ptr<BlockImpl> block) {
    ctx->save_for_backward({x});
    torch::Tensor y = block->forward(x);
    ctx->saved_data["block"] = c10::IValue::make_capsule(c10::make_intrusive<BlockCapsule>(std::move(block)));
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto capsule = c10::static_intrusive_pointer_cast<BlockCapsule>(ctx->saved_data["block"].toCapsule());
    BlockImpl* block = capsule->block.get();
    const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    torch::Tensor y;
    {
      torch::AutoGradMode enable(true);
      y = block->forward(x);
    }
    torch::autograd::backward({y}, {grads[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor apply_linear(torch::nn::Linear& layer, const torch::Tensor& x,
                           torch::ScalarType compute) {
  if (!reduced(compute)) return layer->forward(x);
  return torch::linear(x.to(compute), layer->weight.to(compute));
}

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
    : heads(options.heads), head_dim(options.head_dim), compute(options.compute_dtype) {
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

torch::Tensor AttentionBlockImpl::forward_cached(const torch::Tensor& x_in, torch::Tensor& k_cache,
                                                 torch::Tensor& v_cache, int64_t context) {
  const auto x = reduced(compute) ? x_in.to(compute) : x_in;  // cast once for q, k, v
  const auto B = x.size(0), n = x.size(1);
  auto split = [&](const torch::Tensor& t) {  // (B, n, H·D) → (B, H, n, D)
    return t.view({B, n, heads, head_dim}).transpose(1, 2);
  };
  auto y = core->forward_cached(rms_norm(split(apply_linear(q, x, compute))),
                                rms_norm(split(apply_linear(k, x, compute))),
                                split(apply_linear(v, x, compute)), k_cache, v_cache, context);  // (B, H, n, D)
  y = y.transpose(1, 2).contiguous().view({B, n, heads * head_dim});  // (B, n, H·D)
  return apply_linear(o, y, compute);                                  // (B, n, C)
}

torch::Tensor AttentionBlockImpl::forward(const torch::Tensor& x_in, int64_t context,
                                          attention::AttentionProbe* probe) {
  // Mixed precision: x cast once for the three projections (apply_linear's cast is then a no-op).
  const auto x = reduced(compute) ? x_in.to(compute) : x_in;
  const auto B = x.size(0), T = x.size(1);
  // (B, T, C) → (B, T, H, D) → (B, H, T, D)
  auto split = [&](const torch::Tensor& t) {
    return t.view({B, T, heads, head_dim}).transpose(1, 2);
  };
  auto qh = rms_norm(split(apply_linear(q, x, compute)));  // QK-norm over head_dim, no gain
  auto kh = rms_norm(split(apply_linear(k, x, compute)));
  auto vh = split(apply_linear(v, x, compute));
  torch::Tensor y;
  {
    RECORD_USER_SCOPE("model.attention");  // the step breakdown's (bench/step_breakdown_bench.cpp)
    y = context > 0 ? core->forward_at(qh, kh, vh, context, probe) : core(qh, kh, vh, probe);  // (B, H, T, D)
  }
  y = y.transpose(1, 2).contiguous().view({B, T, heads * head_dim});  // (B, T, H·D)
  return apply_linear(o, y, compute);                                  // (B, T, C)
}

MLPImpl::MLPImpl(const GPTOptions& options) : compute(options.compute_dtype) {
  const int64_t C = options.d_model, M = mlp_hidden(options);
  fc = register_module("fc", linear(C, M));
  proj = register_module("proj", linear(M, C));
  init_hidden(fc);
  init_zero(proj);
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return apply_linear(proj, relu_squared(apply_linear(fc, x, compute)), compute);  // (B, T, M) → (B, T, C)
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

namespace {
void check_tokens(const torch::Tensor& tokens, const char* where) {
  TORCH_CHECK(tokens.dim() == 2, "GPT::", where, ": tokens must be (B, T), got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong, "GPT::", where, ": tokens must be int64");
}
}  // namespace

torch::Tensor GPTImpl::logits(const torch::Tensor& features) {
  auto y = apply_linear(head, features, options_.compute_dtype);  // (B, T, V)
  return reduced(options_.compute_dtype) ? y.to(torch::kFloat) : y;  // bf16 logits read as float32
}

torch::ScalarType GPTImpl::head_gemm_dtype() const {
  return reduced(options_.compute_dtype) ? options_.compute_dtype : head->weight.scalar_type();
}

int64_t GPTImpl::loss_chunk_rows() const {
  return options_.loss_chunk_rows > 0 ? options_.loss_chunk_rows
                                      : default_loss_chunk_rows(options_.vocab_size);
}

torch::Tensor GPTImpl::features(const torch::Tensor& tokens, std::vector<attention::AttentionProbe>* probes) {
  check_tokens(tokens, "forward");
  TORCH_CHECK(!probes || probes->size() == block_list.size(), "GPT::forward: ", probes ? probes->size() : 0,
              " probes for ", block_list.size(), " layers");
  const bool checkpoint = options_.activation_checkpointing && is_training() &&
                          torch::GradMode::is_enabled() && !probes;
  auto x = rms_norm(embed(tokens));  // (B, T, C)
  for (size_t l = 0; l < block_list.size(); ++l) {
    if (checkpoint)
      x = CheckpointedBlock::apply(x, block_list[l].ptr());
    else
      x = block_list[l]->forward(x, 0, probes ? &(*probes)[l] : nullptr);
  }
  return rms_norm(x);  // (B, T, C)
}

torch::Tensor GPTImpl::forward(const torch::Tensor& tokens) { return logits(features(tokens)); }

torch::Tensor GPTImpl::forward(const torch::Tensor& tokens, int64_t context) {
  check_tokens(tokens, "forward");
  TORCH_CHECK(context >= tokens.size(1), "GPT::forward: context ", context,
              " is shorter than the tokens (", tokens.size(1), ")");
  auto x = rms_norm(embed(tokens));  // (B, T, C)
  for (auto& block : block_list) x = block->forward(x, context);
  return logits(rms_norm(x));  // (B, T, V)
}

torch::Tensor GPTImpl::forward(const torch::Tensor& tokens, std::vector<attention::AttentionProbe>& probes) {
  return logits(features(tokens, &probes));
}

torch::Tensor GPTImpl::forward_cached(const torch::Tensor& tokens, KVCache& cache) {
  check_tokens(tokens, "forward_cached");
  cache.k.resize(block_list.size());
  cache.v.resize(block_list.size());
  auto x = rms_norm(embed(tokens));  // (B, n, C)
  for (size_t l = 0; l < block_list.size(); ++l)
    x = block_list[l]->forward_cached(x, cache.k[l], cache.v[l], cache.context);
  return logits(rms_norm(x));  // (B, n, V)
}

torch::Tensor GPTImpl::loss(const torch::Tensor& tokens_in, const torch::Tensor& targets) {
  TORCH_CHECK(targets.sizes() == tokens_in.sizes(), "GPT::loss: targets ", targets.sizes(),
              " must match tokens ", tokens_in.sizes());
  const auto h = features(tokens_in);  // (B, T, C)
  RECORD_USER_SCOPE("model.loss");
  return chunked_cross_entropy(h.reshape({-1, h.size(-1)}), head->weight, targets.reshape({-1}),
                               head_gemm_dtype(), loss_chunk_rows());
}

torch::Tensor GPTImpl::position_losses(const torch::Tensor& tokens_in, const torch::Tensor& targets,
                                       std::vector<attention::AttentionProbe>* probes) {
  TORCH_CHECK(targets.sizes() == tokens_in.sizes(), "GPT::position_losses: targets ", targets.sizes(),
              " must match tokens ", tokens_in.sizes());
  torch::NoGradGuard no_grad;
  const auto h = features(tokens_in, probes);  // (B, T, C)
  return chunked_nll(h.reshape({-1, h.size(-1)}), head->weight, targets.reshape({-1}),
                     head_gemm_dtype(), loss_chunk_rows())
      .view(targets.sizes());  // (B, T)
}

int64_t GPTImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace models
