#include "common/did_you_mean.h"

#include <algorithm>
#include <utility>

namespace harness {

namespace {
std::string last_component(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}
}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string leaf = last_component(name);
  const size_t limit = std::max<size_t>(2, leaf.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& c : candidates) {
    const size_t full = edit_distance(name, c);
    const size_t by_leaf = edit_distance(leaf, last_component(c)) + (leaf == name ? 0 : 1);
    if (const size_t d = std::min(full, by_leaf); d <= limit) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& s : scored) out.push_back(std::move(s.second));
  return out;
}

}  // namespace harness
