// "Did you mean …?" for every unknown name a user can type (config keys, sweep keys, the
// critical-scaling config's keys): one rule, so every message suggests alike.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace harness {

// Levenshtein distance.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidates close to `name`, closest first (ties in the candidates' order): a misspelt name —
// at most max(2, ⌊n/3⌋) edits away, n the length of its last dotted component — or its last
// component right in another section ("steps" → "train.steps", one edit for the section).
std::vector<std::string> did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace harness
