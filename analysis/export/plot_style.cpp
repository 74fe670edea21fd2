#include "analysis/export/plot_style.h"

#include <fmt/format.h>

#include <algorithm>

namespace analysis {

namespace {

// Okabe & Ito (2008) without yellow (unreadable on white), then Paul Tol's muted scheme.
const std::vector<std::string> kColors = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#882255", "#999933",
    "#117733", "#332288", "#44AA99", "#AA4499", "#6699CC", "#88CCEE", "#DDCC77", "#000000", "#AA3377"};

// Every preset keeps one colour in every figure (PlotStyle.EveryPresetHasItsOwnColour holds this
// list to attention::preset_names()); a τ sweep of one preset gets the free colours instead, one
// per τ.
const std::map<std::string, std::string> kMethodColors = {
    {"rope", "#0072B2"},       {"alibi", "#D55E00"},     {"si+p-rope", "#009E73"},
    {"p-rope", "#CC79A7"},     {"nope", "#E69F00"},      {"yarn", "#56B4E9"},
    {"rope+ntk", "#332288"},   {"logn+rope", "#882255"}, {"logn+p-rope", "#999933"},
    {"logn+ntk", "#44AA99"},   {"si+rope", "#117733"},   {"si+nope", "#AA4499"},
    {"kerple", "#DDCC77"},     {"kerple+p-rope", "#000000"}, {"t5", "#6699CC"},
    {"fire", "#88CCEE"},       {"fire+p-rope", "#AA3377"}};

constexpr const char* kStandardTheory = "#555555";
constexpr const char* kLognTheory = "#661100";

}  // namespace

std::string SeriesStyle::clause() const {
  return fmt::format("lc rgb '{}' dt {} pt {} lw 1.5", color, dash, point);
}

int dash_type(size_t k) { return int(k % 5) + 1; }

int point_type(size_t k) {
  static const int kPoints[] = {7, 5, 9, 11, 13};  // filled: circle, square, triangles, diamond
  return kPoints[k % 5];
}

int open_point_type(size_t k) {
  static const int kPoints[] = {6, 4, 8, 10, 12};  // the same shapes, open
  return kPoints[k % 5];
}

std::string Palette::group_color(const std::string& group) {
  if (const auto it = assigned_.find(group); it != assigned_.end()) return it->second;
  std::string color;
  const std::string prefix = "method=";
  if (group.rfind(prefix, 0) == 0 && group.find(' ') == std::string::npos) {
    const auto fixed = kMethodColors.find(group.substr(prefix.size()));
    if (fixed != kMethodColors.end() && std::find(used_.begin(), used_.end(), fixed->second) == used_.end())
      color = fixed->second;
  }
  if (color.empty()) {
    // The first colour nobody has and no baseline owns, then any unused one, then cycle.
    const auto owned_by_baseline = [](const std::string& c) {
      return std::any_of(kMethodColors.begin(), kMethodColors.end(), [&](const auto& m) {
        return m.second == c && (m.first == "rope" || m.first == "alibi");
      });
    };
    for (const bool spare_baselines : {true, false})
      for (const auto& c : kColors)
        if (color.empty() && std::find(used_.begin(), used_.end(), c) == used_.end() &&
            !(spare_baselines && owned_by_baseline(c)))
          color = c;
    if (color.empty()) color = kColors[assigned_.size() % kColors.size()];
  }
  assigned_[group] = color;
  used_.push_back(color);
  return color;
}

std::string Palette::theory_color(const std::string& kind, const std::string& name, const std::string& match) {
  if (kind == "standard") return kStandardTheory;
  if (kind == "logn") return kLognTheory;
  return group_color(match.empty() ? "theory " + name : match);
}

}  // namespace analysis
