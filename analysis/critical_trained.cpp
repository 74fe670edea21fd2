#include "analysis/critical_trained.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>

#include "attention/method.h"
#include "harness/train/finished_run.h"
#include "common/errors.h"
#include "models/pointwise.h"

namespace analysis {

namespace {

constexpr int64_t kWindowsPerBatch = 8;

}  // namespace

std::vector<LayerKeys> trace_keys(models::GPT& model, const torch::Tensor& tokens,
                                  torch::Tensor* logits) {
  torch::NoGradGuard no_grad;
  const int64_t B = tokens.size(0), T = tokens.size(1);
  std::vector<LayerKeys> out;
  // The same steps as GPTImpl::forward and AttentionBlockImpl::forward (models/gpt.cpp), keeping
  // the keys: x = RMSNorm(embed); per block k = QKNorm(split(k(RMSNorm(x)))), x = block(x).
  auto x = models::rms_norm(model->embed(tokens));  // (B, T, C)
  for (auto& block : model->block_list) {
    auto& attn = block->attn;
    const auto h = models::rms_norm(x);                                            // (B, T, C)
    const auto split = [&](const torch::Tensor& t) {
      return t.view({B, T, attn->heads, attn->head_dim}).transpose(1, 2);  // (B, H, T, D)
    };
    const auto q = models::rms_norm(split(attn->q(h)));
    const auto k = models::rms_norm(split(attn->k(h)));
    out.push_back({k, attn->core->rotate(q, k).second});
    x = block(x);  // (B, T, C)
  }
  if (logits) *logits = model->head(models::rms_norm(x));  // (B, T, V)
  return out;
}

torch::Tensor mean_pairwise_cosine_over_positions(const torch::Tensor& x) {
  const auto unit = x.to(torch::kFloat64) / x.to(torch::kFloat64).norm(2, -1, true);  // (B, H, T, D)
  const double T = double(x.size(2));
  const auto total = unit.sum(2).pow(2).sum(-1);  // (B, H) |Σ_t x̂_t|²
  const auto self = unit.pow(2).sum({2, 3});      // (B, H) Σ_t |x̂_t|²
  return (total - self) / (T * (T - 1));
}

TrainedLognReport trained_logn_report(const std::string& run_dir, int64_t context,
                                      int64_t windows, int64_t seed) {
  torch::NoGradGuard no_grad;
  auto run = harness::train::open_finished_run(run_dir);
  auto& model = run.model;
  const auto& core = model->block_list.front()->attn->core;
  const auto& method = core->method();
  TrainedLognReport r;
  r.run_dir = run_dir;
  r.name = run.loaded.config.name;
  r.method = fmt::format("{} ({} + {})", method.preset, attention::to_string(method.positional),
                         attention::to_string(method.transform));
  if (!method.learned_head_scale())
    throw harness::InputError(fmt::format(
        "{}: the run's attention method {} learns no LogN scale; the critical-scaling report needs "
        "a LogN run (method logn+rope, logn+p-rope or logn+ntk, or attention.transform: logn)",
        run_dir, r.method));
  r.train_context = run.loaded.config.train_context();
  r.context = context > 0 ? context : r.train_context;
  if (r.context < 2 || r.context > attention::kMaxContext)
    throw harness::InputError(fmt::format("--run-context: expected 2 to {} tokens, got {}",
                                          attention::kMaxContext, r.context));
  r.layers = int64_t(model->block_list.size());
  r.heads = method.heads;
  r.head_dim = method.head_dim;
  const auto mod = core->score_mod(r.context);
  r.score_scale = double(mod.scale);

  const auto placed = run.dataset->eval_windows(
      r.context, windows, seed >= 0 ? uint64_t(seed) : run.loaded.config.eval.seed);
  r.windows = placed.tokens.size(0);
  if (r.windows == 0)
    throw harness::InputError(fmt::format("{}: the validation split has no window of {} + 1 tokens; "
                                          "choose a smaller --run-context",
                                          run_dir, r.context));
  const auto inputs = placed.tokens.narrow(1, 0, r.context);  // (N, T)

  // Σ over windows of the per-window mean pairwise cosine, per (layer, head).
  auto sum_keys = torch::zeros({r.layers, r.heads}, torch::kFloat64);
  auto sum_rotated = torch::zeros({r.layers, r.heads}, torch::kFloat64);
  for (int64_t start = 0; start < r.windows; start += kWindowsPerBatch) {
    const auto batch = inputs.narrow(0, start, std::min(kWindowsPerBatch, r.windows - start));
    const auto traced = trace_keys(model, batch);
    for (int64_t l = 0; l < r.layers; ++l) {
      sum_keys[l] += mean_pairwise_cosine_over_positions(traced[size_t(l)].keys).sum(0);
      sum_rotated[l] += mean_pairwise_cosine_over_positions(traced[size_t(l)].rotated_keys).sum(0);
    }
  }
  const double D = double(r.head_dim);
  for (int64_t l = 0; l < r.layers; ++l) {
    const auto scales = model->block_list[size_t(l)]->attn->core->logn_scale.to(torch::kFloat64);
    for (int64_t h = 0; h < r.heads; ++h) {
      TrainedHead head;
      head.layer = l;
      head.head = h;
      head.scale = scales[h].item<double>();
      head.gamma_eff = head.scale * r.score_scale * D;
      head.key_cosine = sum_keys[l][h].item<double>() / double(r.windows);
      head.key_cosine_rotated = sum_rotated[l][h].item<double>() / double(r.windows);
      head.gamma_c = 1.0 / (1.0 - head.key_cosine);
      head.gamma_c_rotated = 1.0 / (1.0 - head.key_cosine_rotated);
      r.table.push_back(head);
    }
  }
  return r;
}

std::string format_trained_report(const TrainedLognReport& r) {
  std::string out = fmt::format(
      "trained LogN run {} ({}; method {}, L = {}; keys on {} validation windows of T = {})\n"
      "gamma_eff = s_h * scale * D = s_h * {:.4g} * {}; gamma_c = 1/(1 - c_k), c_k = mean pairwise "
      "key cosine\n",
      r.name, r.run_dir, r.method, r.train_context, r.windows, r.context, r.score_scale, r.head_dim);
  out += fmt::format("{:>5} {:>4} {:>8} {:>9} | {:>7} {:>7} {:>7} | {:>8} {:>7} {:>7} | {}\n",
                     "layer", "head", "s_h", "gamma_eff", "c_k", "gamma_c", "ratio", "c_k(rot)",
                     "gamma_c", "ratio", "side (rot)");
  for (const auto& h : r.table) {
    const double ratio = h.gamma_eff / h.gamma_c, ratio_rotated = h.gamma_eff / h.gamma_c_rotated;
    out += fmt::format(
        "{:>5} {:>4} {:>8.4f} {:>9.3f} | {:>7.4f} {:>7.3f} {:>7.3f} | {:>8.4f} {:>7.3f} {:>7.3f} | {}\n",
        h.layer, h.head, h.scale, h.gamma_eff, h.key_cosine, h.gamma_c, ratio, h.key_cosine_rotated,
        h.gamma_c_rotated, ratio_rotated,
        ratio_rotated < 0.9 ? "collapse" : ratio_rotated > 1.1 ? "identity" : "near critical");
  }
  out += "c_k: content keys (QK-normed, before any rotary encoding); c_k(rot): the keys the kernel "
         "sees; ratio = gamma_eff/gamma_c;\nside from the kernel's keys: ratio < 0.9 collapse, "
         "> 1.1 identity (sharp), else near critical\n"
         "heuristic: gamma_c = 1/(1 - c) is the paper's for tokens attending to themselves (queries "
         "= keys); in a trained model queries differ from keys, so the side is indicative only\n";
  return out;
}

}  // namespace analysis
