// Human-readable view of a method at an evaluation context: what multiplies and offsets the score
// at each distance, and which rotary frequencies / ALiBi slopes / YaRN temperature / NTK base are
// in use. Backs `harness attention inspect`.
#pragma once

#include "attention/attention.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attention {

// Multiplier and bias per distance t are those of a query with n_i = eval_context visible keys
// (i = eval_context − 1); LogN's learned s_h is shown at its initial value 1/ln L. Distances
// ≥ eval_context are listed but marked as not visible. Throws std::invalid_argument on bad options
// (as resolve_method) or an eval_context outside [1, kMaxContext].
std::string inspect_method(const MethodOptions& options, const std::vector<int64_t>& distances,
                           int64_t eval_context);

}  // namespace attention
