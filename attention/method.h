// A method = positional encoding × logit transform, resolved once from MethodOptions into plain
// data. For an evaluation context T it yields
//   (a) the rotary frequencies (method_tensors.h: cos/sin tables) applied to q and k before any kernel, and
//   (b) the attention::ScoreMod every kernel consumes (score_mod.h).
// Nothing downstream branches on the method's name. Torch-free (the tensors a method gives a
// module are in method_tensors.h), so that torch-free code resolves methods from these rows too.
//
// Rotary convention: half-split pairs, as in GPT-NeoX / Llama / modded-nanogpt: pair k of a head
// vector x (D even) is (x[k], x[k + D/2]), rotated by angle i·freq_k at position i:
//   y[k] = x[k]·cos − x[k+D/2]·sin,   y[k+D/2] = x[k]·sin + x[k+D/2]·cos.
// A pair with frequency 0 is left unrotated (p-RoPE's dropped pairs).
#pragma once

#include "attention/method_options.h"
#include "attention/method_types.h"
#include "attention/score_mod.h"
#include "attention/transforms.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace attention {

// Largest evaluation context any kernel accepts (distances are int in score_mod.h).
constexpr int64_t kMaxContext = int64_t(1) << 20;

std::vector<std::string> preset_names();      // every row of kPresets (method.cpp)
std::vector<std::string> positional_names();  // nope, rope, p-rope, ntk, yarn, alibi
std::vector<std::string> transform_names();   // every row of transforms() (transforms.cpp)
std::vector<std::string> kernel_names();      // reference, fused, cuda
std::string to_string(Positional p);
std::string to_string(Transform t);

// YaRN's NTK-by-parts ramp (arXiv 2309.00071, §3.2): α = 1, β = 32.
constexpr double kYaRNAlpha = 1.0;
constexpr double kYaRNBeta = 32.0;

// Throws std::invalid_argument (listing valid names / the violated constraint) on bad options.
Method resolve_method(const MethodOptions& options);
// Every field of the options (for_each_field) as text, the same exactly when the options are: a
// cache of resolve_method keys on it.
std::string options_key(const MethodOptions& options);

// Throws std::invalid_argument when T is outside [1, kMaxContext].
void check_context(const Method& method, int64_t T);

// ---- per-context quantities --------------------------------------------------------------------

// NTK-aware base at context T: base·(T/L)^(D/(D−2)) when T > L, else base.
double ntk_base(const Method& method, int64_t T);
// YaRN scale factor s = T/L when T > L, else 1.
double yarn_factor(const Method& method, int64_t T);
// YaRN logit multiplier (0.1·ln s + 1)² (1 when T ≤ L or the method is not YaRN).
double yarn_logit_multiplier(const Method& method, int64_t T);
// Angular frequency of each of the D/2 rotary pairs at context T (0 = unrotated); empty when
// the method has no rotary encoding.
std::vector<double> rotary_frequencies(const Method& method, int64_t T);
// ALiBi slopes m_h, h = 1..H (ALiBi reference code, including its non-power-of-2 rule).
std::vector<double> alibi_slopes(int64_t heads);

// The score-mod every kernel consumes at context T (head_scale / alibi_slope pointers left null:
// per-head parameters travel as tensors, see fused_cpu.h).
ScoreMod score_mod(const Method& method, int64_t T);

// ---- the transform in closed form, float64 (`inspect` and tests; transforms.h rows) ------------

// Per-query factor with n visible keys, without the learned scale s_h: ln n (logn),
// max(1, sqrt((1 − n^(−2/D)) / (1 − L^(−2/D)))) (infoscale), else 1.
double row_multiplier(const Method& method, int64_t n_visible);
// Per-distance multiplier and bias (ALiBi's −m_h·t and a learned bias at its initial values
// included in the bias for head h, 0-based).
double distance_multiplier(const Method& method, int64_t t);
double distance_bias(const Method& method, int64_t t, int64_t head);

// ---- a learned bias (transforms.h: TransformSpec::learned) -------------------------------------

// P: the learned values per head, over all of the transform's learned parameters (0 without).
int64_t learned_values_per_head(const Method& method);
// Their initial values, (H, P) row-major, each head's in the row's `learned` order.
std::vector<double> initial_learned_values(const Method& method);
// The table the kernels read at context T, (H, E) row-major (E = learned_table_length: T entries
// b_h(t), or FIRE's grid, c_h and L_h), from learned values (H, P); empty without a learned bias.
std::vector<double> learned_bias_table_values(const Method& method, const std::vector<double>& values,
                                              int64_t T);
// Initial value of the learned per-head scale s_h (LogN: 1 / ln L); 1 without one.
double initial_head_scale(const Method& method);

}  // namespace attention
