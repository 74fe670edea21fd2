// The options that define an attention method (preset + overrides + parameters), as the config
// layer fills them in. Resolved and validated by resolve_method (method.h).
#pragma once

#include <cstdint>
#include <string>

namespace attention {

// Everything that defines a method, with τ and bases already resolved to absolute values
// (the config layer resolves "L/400"-style values against the training context).
struct MethodOptions {
  std::string method = "si+p-rope";   // a preset name (see preset_names())
  std::string positional;             // override of the preset's positional encoding ("" = keep)
  std::string transform;              // override of the preset's logit transform ("" = keep)
  double tau = 10.0;                  // scale-invariant τ (> 0)
  double rope_base = 10000.0;         // rope, ntk, yarn, p-rope (truncate)
  double p_rope_base = 1024.0;        // p-rope (respread): longest wavelength / 2π
  double p_rope_fraction = -1.0;      // fraction of rotated frequency pairs; < 0 = variant default
  std::string p_rope_variant = "respread";  // respread | truncate
  double score_scale = 0.0;           // s = score_scale · q·k; 0 = 1/sqrt(head_dim)
  int64_t train_context = 0;          // L
  int64_t heads = 1;
  int64_t head_dim = 64;
  std::string kernel = "fused";       // reference | fused | cuda
};

}  // namespace attention
