#include "analysis/export/revisions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace analysis {

std::string trained_revisions(const std::vector<RunSet>& sets) {
  std::map<std::string, int> count;
  for (const auto& set : sets)
    for (const auto& run : set.runs) {
      if (!run.record) continue;
      const auto it = run.record->config.find("git_revision");
      const std::string rev = it == run.record->config.end() || it->second.empty() ? "unknown" : it->second;
      const bool dirty = rev.size() >= 6 && rev.compare(rev.size() - 6, 6, "-dirty") == 0;
      ++count[rev == "unknown" ? rev : rev.substr(0, 7) + (dirty ? "-dirty" : "")];
    }
  std::vector<std::string> parts;
  for (const auto& [rev, n] : count) parts.push_back(fmt::format("{} ({} run{})", rev, n, n == 1 ? "" : "s"));
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

double training_seconds(const std::vector<RunSet>& sets) {
  double total = 0;
  for (const auto& set : sets)
    for (const auto& run : set.runs)
      if (run.record && !run.record->train.seconds.empty()) total += run.record->train.seconds.back();
  return total;
}

}  // namespace analysis
