// The options that define an attention method, as the config layer fills them in. Resolved and
// validated by resolve_method (method.h).
#pragma once

#include "attention/parameters.h"

#include <cstdint>
#include <string>

namespace attention {

// What a config says about the method: the attention.* keys, embedded as is in the run config
// (harness/config/run_config.h). Parameters may be relative to L: resolve_method resolves them.
struct MethodConfig {
  std::string method = "si+p-rope";   // a preset name (see preset_names())
  std::string positional;             // override of the preset's positional encoding ("" = keep)
  std::string transform;              // override of the preset's logit transform ("" = keep)
  ParameterValues parameters;         // τ, rope_base, p_rope_base (parameters.h)
  double p_rope_fraction = -1.0;      // fraction of rotated frequency pairs; < 0 = variant default
  std::string p_rope_variant = "respread";  // respread | truncate
  double score_scale = 0.0;           // s = score_scale · q·k; 0 = 1/sqrt(head_dim)
  std::string kernel = "fused";       // reference | fused | cuda
};

// A method config with the model's side of it: everything resolve_method needs.
struct MethodOptions : MethodConfig {
  int64_t train_context = 0;  // L
  int64_t heads = 1;
  int64_t head_dim = 64;
};

// Every field of a method's options, base class first, in declaration order: their one list.
// options_key (method.h) serialises what it visits; a test (AttentionMethod.OptionsKey*) changes
// each visited field in turn and counts the fields of both structs, so a field added above and
// not here fails it. Options: MethodOptions or const MethodOptions.
template <class Options, class Visit>
void for_each_field(Options& o, Visit&& visit) {
  visit(o.method);
  visit(o.positional);
  visit(o.transform);
  visit(o.parameters);
  visit(o.p_rope_fraction);
  visit(o.p_rope_variant);
  visit(o.score_scale);
  visit(o.kernel);
  visit(o.train_context);
  visit(o.heads);
  visit(o.head_dim);
}

}  // namespace attention
