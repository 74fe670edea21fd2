#include "harness/config/engine_options.h"

#include "attention/method.h"
#include "models/optim_options.h"
#include "models/schedule.h"

namespace harness::config {

std::vector<std::string> method_names() { return attention::preset_names(); }
std::vector<std::string> positional_names() { return attention::positional_names(); }
std::vector<std::string> transform_names() { return attention::transform_names(); }
std::vector<std::string> kernel_names() { return attention::kernel_names(); }
std::vector<std::string> tokenizer_names() { return {"byte", "sentencepiece", "pretokenized"}; }
std::vector<std::string> optimizer_names() { return models::optimizer_names(); }
std::vector<std::string> schedule_names() { return models::schedule_names(); }

double default_hidden_lr(const std::string& optimizer) {
  return models::default_optim_options(optimizer).lr_hidden;
}

attention::MethodOptions method_options(const RunConfig& c) {
  attention::MethodOptions m;
  static_cast<attention::MethodConfig&>(m) = c.attention;
  m.train_context = c.train.context;
  m.heads = c.model.heads;
  m.head_dim = c.model.head_dim;
  return m;
}

models::GPTOptions gpt_options(const RunConfig& c, int64_t vocab_size) {
  models::GPTOptions g;
  g.vocab_size = vocab_size;
  g.layers = c.model.layers;
  g.d_model = c.model.d_model;
  g.heads = c.model.heads;
  g.head_dim = c.model.head_dim;
  g.mlp_ratio = c.model.mlp_ratio;
  g.attention = method_options(c);
  g.compute_dtype = c.train.precision == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  g.activation_checkpointing = c.train.activation_checkpointing;
  return g;
}

void check_engine_options(const RunConfig& config) {
  const auto method = attention::resolve_method(method_options(config));  // throws if impossible
  for (const int64_t T : config.eval_contexts()) attention::check_context(method, T);
}

}  // namespace harness::config
