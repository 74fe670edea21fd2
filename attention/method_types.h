// The vocabulary of a resolved attention method: which positional encoding, logit transform,
// kernel and numeric parameters there are, and the Method value that resolve_method (method.h)
// produces. The registry rows (transforms.cpp, parameters.cpp) read a Method through this header
// alone, so that nothing below method.h depends on it. Plain C++, no torch.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace attention {

enum class Positional { kNoPE, kRoPE, kPRoPE, kNTK, kYaRN, kALiBi };
enum class PRoPEVariant { kRespread, kTruncate };
// The fraction of rotary pairs p-RoPE rotates when attention.p_rope_fraction is auto.
constexpr double default_p_rope_fraction(PRoPEVariant v) { return v == PRoPEVariant::kRespread ? 0.5 : 0.75; }
// The logit transforms, one registry row each (transforms.cpp).
enum class Transform { kNone, kLogN, kScaleInvariant, kInfoScale, kKerpleLog, kT5, kFire };
// Which implementation runs the attention (attention.kernel): the float64 reference, the fused
// CPU kernel (the CUDA kernel for CUDA tensors), or the CUDA kernel.
enum class Kernel { kReference, kFused, kCuda };
// The methods' numeric parameters, one registry row each (parameters.cpp); kCount, last, is not
// one: their number.
enum class Parameter { kTau, kRopeBase, kPRopeBase, kCount };
constexpr int kParameterCount = int(Parameter::kCount);

// A validated method with every default resolved.
struct Method {
  std::string preset;
  Positional positional = Positional::kNoPE;
  Transform transform = Transform::kNone;
  PRoPEVariant p_rope_variant = PRoPEVariant::kRespread;
  // The declared parameters (parameters.h), resolved against L; read as value(Parameter::kTau).
  std::array<double, kParameterCount> values{};
  double p_rope_fraction = default_p_rope_fraction(PRoPEVariant::kRespread);  // of the D/2 pairs (p-rope)
  double score_scale = 0.125;    // s = score_scale · q·k (1/sqrt(D) when the option was 0)
  int64_t train_context = 0;     // L (0 = not given; only methods that need it require it)
  int64_t heads = 1;
  int64_t head_dim = 64;
  Kernel kernel = Kernel::kFused;

  double value(Parameter p) const { return values[size_t(p)]; }
  bool rotary() const;             // rope, p-rope, ntk, yarn
  bool alibi() const { return positional == Positional::kALiBi; }
  // From the transform's registry row (method.cpp): a learned per-head multiplier s_h, and a
  // learned bias (KERPLE-log, T5, FIRE) that kernels read as score_mod.h's bias_table.
  bool learned_head_scale() const;
  bool learned_bias() const;
};

}  // namespace attention
