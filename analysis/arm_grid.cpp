#include "analysis/arm_grid.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/errors.h"

namespace analysis {

double Arm::mean() const { return mean_loss(runs); }

double mean_loss(const std::vector<SeedWindows>& runs) {
  double sum = 0;
  for (const auto& run : runs) {
    double m = 0;
    for (const double x : run.loss) m += x / double(run.loss.size());
    sum += m / double(runs.size());
  }
  return sum;
}

namespace {

std::string arm_label(const RunEntry& run, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const auto& key : keys) {
    const auto it = run.values.find(key);
    const std::string value = it != run.values.end() ? it->second : "";
    parts.push_back(keys.size() == 1 ? value : key + "=" + value);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

int64_t seed_of(const RunEntry& run) {
  const auto it = run.values.find("train.seed");
  return it != run.values.end() ? std::stoll(it->second) : int64_t(run.config.train.seed);
}

}  // namespace

std::vector<ArmGrid> arm_grid(const RunSet& set, const std::vector<std::string>& keys) {
  std::map<int64_t, ArmGrid> grids;
  std::map<int64_t, std::string> fingerprints;
  for (const auto& run : set.runs) {
    if (!run.record || run.state != "done") continue;
    const std::string label = arm_label(run, keys);
    for (const auto& [T, rows] : run.record->eval) {
      if (rows.window_loss.empty())
        throw harness::InputError(fmt::format("{}: no per-window losses at context {} (a run file written before "
                                              "they were stored): run it again", run.dir, T));
      auto& grid = grids[T];
      if (!fingerprints.count(T)) {
        grid.context = T;
        fingerprints[T] = rows.window_fingerprint;
        grid.document = rows.window_document;
        grid.documents_known = rows.window_document.size() == rows.window_loss.size();
        if (!grid.documents_known) {  // each window its own document
          grid.document.resize(rows.window_loss.size());
          for (size_t i = 0; i < grid.document.size(); ++i) grid.document[i] = int64_t(i);
        }
      } else if (fingerprints[T] != rows.window_fingerprint) {
        throw harness::InputError(fmt::format("{}: validated on other windows at context {} than the other runs "
                                              "(fingerprint {} vs {})", run.dir, T, rows.window_fingerprint,
                                              fingerprints[T]));
      }
      auto arm = std::find_if(grid.arms.begin(), grid.arms.end(), [&](const Arm& a) { return a.label == label; });
      if (arm == grid.arms.end()) arm = grid.arms.insert(grid.arms.end(), Arm{label, {}, &run});
      const int64_t seed = seed_of(run);
      for (const auto& other : arm->runs)
        if (other.seed == seed)
          throw harness::InputError(fmt::format(
              "two runs of arm '{}' have seed {} at context {} ({} and another): the arm's keys ({}) do not "
              "tell them apart; compare by more keys", label, seed, T, run.dir, fmt::join(keys, ", ")));
      arm->runs.push_back({seed, rows.window_loss});
    }
  }
  std::vector<ArmGrid> out;
  for (auto& [T, grid] : grids) out.push_back(std::move(grid));
  return out;
}

std::pair<std::vector<SeedWindows>, std::vector<SeedWindows>> common_seeds(const Arm& a, const Arm& b) {
  std::set<int64_t> in_b;
  for (const auto& r : b.runs) in_b.insert(r.seed);
  std::set<int64_t> common;
  for (const auto& r : a.runs)
    if (in_b.count(r.seed)) common.insert(r.seed);
  std::pair<std::vector<SeedWindows>, std::vector<SeedWindows>> out;
  for (const auto& r : a.runs)
    if (common.count(r.seed)) out.first.push_back(r);
  for (const auto& r : b.runs)
    if (common.count(r.seed)) out.second.push_back(r);
  return out;
}

void keep_arms(std::vector<ArmGrid>& grids, const std::vector<std::string>& labels, const std::string& source) {
  if (labels.size() < 2) throw harness::InputError(fmt::format("{}: name at least two arms to compare", source));
  std::set<std::string> known;
  for (const auto& g : grids)
    for (const auto& a : g.arms) known.insert(a.label);
  for (const auto& l : labels)
    if (!known.count(l))
      throw harness::InputError(fmt::format("{}: no arm '{}' among the finished runs; the arms there are: {}", source, l,
                                            known.empty() ? "none" : fmt::format("{}", fmt::join(known, "; "))));
  const std::set<std::string> wanted(labels.begin(), labels.end());
  for (auto& g : grids)
    g.arms.erase(std::remove_if(g.arms.begin(), g.arms.end(), [&](const Arm& a) { return !wanted.count(a.label); }),
                 g.arms.end());
}

}  // namespace analysis
