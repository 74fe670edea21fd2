#include "analysis/export/plot_style.h"

#include <fmt/format.h>

#include <algorithm>

namespace analysis {

namespace {

// Okabe & Ito (2008) without yellow (unreadable on white), then Paul Tol's muted scheme and a few
// of his others: each colour named once, here.
constexpr const char *kBlue = "#0072B2", *kVermillion = "#D55E00", *kBluishGreen = "#009E73",
                     *kReddishPurple = "#CC79A7", *kOrange = "#E69F00", *kSkyBlue = "#56B4E9";
constexpr const char *kWine = "#882255", *kOlive = "#999933", *kGreen = "#117733", *kIndigo = "#332288",
                     *kTeal = "#44AA99", *kPurple = "#AA4499", *kLightBlue = "#6699CC", *kCyan = "#88CCEE",
                     *kSand = "#DDCC77", *kBlack = "#000000", *kMagenta = "#AA3377";

// In the order a group with no fixed colour gets them.
const std::vector<std::string> kColors = {
    kBlue,  kVermillion, kBluishGreen, kReddishPurple, kOrange,    kSkyBlue, kWine,  kOlive, kGreen,
    kIndigo, kTeal,      kPurple,      kLightBlue,     kCyan,      kSand,    kBlack, kMagenta};

// Every preset keeps one colour in every figure (PlotStyle.EveryPresetHasItsOwnColour holds this
// list to attention::preset_names()); a τ sweep of one preset gets the free colours instead, one
// per τ.
const std::map<std::string, std::string> kMethodColors = {
    {"rope", kBlue},         {"alibi", kVermillion},   {"si+p-rope", kBluishGreen},
    {"p-rope", kReddishPurple}, {"nope", kOrange},     {"yarn", kSkyBlue},
    {"rope+ntk", kIndigo},   {"logn+rope", kWine},     {"logn+p-rope", kOlive},
    {"logn+ntk", kTeal},     {"si+rope", kGreen},      {"si+nope", kPurple},
    {"kerple", kSand},       {"kerple+p-rope", kBlack}, {"t5", kLightBlue},
    {"fire", kCyan},         {"fire+p-rope", kMagenta}};

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
