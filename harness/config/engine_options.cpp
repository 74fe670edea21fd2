#include "harness/config/engine_options.h"

namespace harness::config {

std::vector<std::string> method_names() { return attention::preset_names(); }
std::vector<std::string> positional_names() {
  return {"nope", "rope", "p-rope", "ntk", "yarn", "alibi"};
}
std::vector<std::string> transform_names() { return {"none", "logn", "scale-invariant", "infoscale"}; }
std::vector<std::string> tokenizer_names() { return {"byte", "sentencepiece"}; }
std::vector<std::string> optimizer_names() { return {"muon", "adamw"}; }
std::vector<std::string> schedule_names() { return {"constant-cooldown", "cosine", "constant"}; }

attention::MethodOptions method_options(const RunConfig& c) {
  attention::MethodOptions m;
  const int64_t L = c.train.context;
  m.method = c.attention.method;
  m.positional = c.attention.positional;
  m.transform = c.attention.transform;
  m.tau = c.attention.tau.resolve(L);
  m.rope_base = c.attention.rope_base.resolve(L);
  m.p_rope_base = c.attention.p_rope_base.resolve(L);
  m.p_rope_fraction = c.attention.p_rope_fraction;
  m.p_rope_variant = c.attention.p_rope_variant;
  m.score_scale = c.attention.score_scale;
  m.train_context = L;
  m.heads = c.model.heads;
  m.head_dim = c.model.head_dim;
  m.kernel = c.attention.kernel;
  return m;
}

void check_engine_options(const RunConfig& config) {
  attention::CausalAttention probe(method_options(config));  // throws on impossible methods
}

}  // namespace harness::config
