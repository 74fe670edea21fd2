// A run's identity: the canonical text of its resolved config and its hash (the run id), and the
// frozen hash of the first id scheme.
#include "harness/config/schema.h"

#include <fmt/format.h>

namespace harness::config {

std::string canonical_text(const RunConfig& config, bool results_only) {
  std::string out;
  for (const auto& k : schema()) {
    const bool read = k.is_read(config);
    if (results_only && (!k.affects_results || !read)) continue;
    out += fmt::format("{}: {}{}\n", k.path, k.get(config), read ? "" : "  # not read by this run");
  }
  return out;
}

namespace {
std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (const unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}
}  // namespace

std::string config_hash(const RunConfig& config) { return fnv1a_hex(canonical_text(config, true)); }

std::string legacy_config_hash(const RunConfig& config) {
  // Frozen: the identity of the first id scheme, every results key in schema order, read or not.
  // Never add to this list; new keys follow KeySpec::read's rule instead.
  static const char* const kKeys[] = {
      "data.corpus", "data.val_fraction", "data.tokenizer", "data.vocab_size", "model.layers",
      "model.d_model", "model.heads", "model.head_dim", "model.mlp_ratio", "attention.method",
      "attention.positional", "attention.transform", "attention.tau", "attention.rope_base",
      "attention.p_rope_base", "attention.p_rope_fraction", "attention.p_rope_variant",
      "attention.score_scale", "train.context", "train.batch_size", "train.grad_accum",
      "train.steps", "train.seed", "train.grad_clip", "optim.name", "optim.lr_hidden",
      "optim.lr_embed", "optim.lr_head", "optim.lr_scalar", "optim.beta1", "optim.beta2",
      "optim.weight_decay", "optim.momentum", "schedule.kind", "schedule.warmup_steps",
      "schedule.cooldown_fraction", "eval.every", "eval.contexts", "eval.windows",
      "eval.position_buckets", "eval.seed"};
  std::string text;
  for (const char* path : kKeys) text += fmt::format("{}: {}\n", path, find_key(path)->get(config));
  return fnv1a_hex(text);
}

}  // namespace harness::config
