#include "analysis/run_set.h"

#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "harness/config/schema.h"
#include "common/errors.h"
#include "results/run_paths.h"
#include "sweeps/run_status.h"
#include "sweeps/sweep_file.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

// The record of a run directory, or a warning naming the file.
std::optional<results::RunRecord> read_record(const std::string& dir, std::vector<std::string>& warnings) {
  const results::RunPaths paths(dir);
  if (!fs::exists(paths.results)) return std::nullopt;
  try {
    return results::read_run_file(paths.results);
  } catch (const std::exception& e) {
    warnings.push_back(fmt::format("skipped {}: unreadable ({})", paths.results, e.what()));
    return std::nullopt;
  }
}

RunSet from_sweep(const std::string& path) {
  const auto sweep = harness::sweeps::load_sweep(path);
  RunSet set;
  set.name = sweep.name;
  set.dir = sweep.sweep_dir;
  set.keys = sweep.varying_keys;
  set.planned = sweep.planned;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const auto& run = sweep.runs[i];
    RunEntry e;
    e.id = run.id;
    e.dir = run.run_dir;
    e.state = harness::sweeps::to_string(harness::sweeps::inspect_run(run).state);
    e.record = read_record(run.run_dir, set.warnings);
    if (!e.record && fs::exists(results::RunPaths(run.run_dir).results)) e.state = "unreadable";
    for (const auto& key : set.keys) e.values[key] = sweep.value_text(i, key);
    e.train_context = run.loaded.config.train.context;
    e.config = run.loaded.config;
    set.runs.push_back(std::move(e));
  }
  return set;
}

RunSet from_directory(const std::string& root) {
  RunSet set;
  set.name = root;
  set.dir = root;
  std::vector<std::string> dirs;
  if (fs::exists(results::RunPaths(root).results)) {
    dirs.push_back(root);
  } else {
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      if (it.depth() > 2) it.disable_recursion_pending();
      if (it->is_regular_file() && it->path().filename() == "run.h5")
        dirs.push_back(it->path().parent_path().string());
    }
    std::sort(dirs.begin(), dirs.end());
  }
  if (dirs.empty()) throw harness::InputError(fmt::format("{}: no run directories (no run.h5) found", root));
  std::vector<harness::config::RunConfig> configs;
  for (const auto& dir : dirs) {
    RunEntry e;
    e.dir = dir;
    e.id = dir == root ? fs::path(dir).filename().string() : fs::relative(dir, root).string();
    e.record = read_record(dir, set.warnings);
    if (!e.record) continue;
    e.state = results::to_string(e.record->state);
    try {
      const auto& canonical = e.record->config.at("canonical");
      configs.push_back(harness::config::load_run_config_text(canonical, dir + "/run.h5:/config/canonical").config);
    } catch (const std::exception& ex) {
      set.warnings.push_back(fmt::format("skipped {}/run.h5: its config does not load ({})", dir, ex.what()));
      continue;
    }
    e.train_context = configs.back().train.context;
    e.config = configs.back();
    set.runs.push_back(std::move(e));
  }
  // Keys whose values differ between the runs that read them, in schema order.
  for (const auto& spec : harness::config::schema()) {
    if (!spec.affects_results) continue;
    std::set<std::string> read_values;
    std::vector<std::string> values;
    for (const auto& c : configs) {
      values.push_back(spec.is_read(c) ? spec.get(c) : harness::sweeps::kNotRead);
      if (spec.is_read(c)) read_values.insert(values.back());
    }
    if (read_values.size() < 2) continue;
    set.keys.push_back(spec.path);
    for (size_t i = 0; i < set.runs.size(); ++i) set.runs[i].values[spec.path] = values[i];
  }
  // Runs ordered by the varying keys (numbers by value, "–" last), as a sweep file's grid is, not
  // by directory name (a run id says nothing about its settings).
  // A strict weak order: numbers (by value, then text: "0.5" before "0.50"), then text, then "–".
  const auto less = [](const std::string& a, const std::string& b) {
    const auto rank = [](const std::string& s, double& value) {
      if (s == harness::sweeps::kNotRead) return 2;
      char* end = nullptr;
      value = std::strtod(s.c_str(), &end);
      return !s.empty() && *end == '\0' ? 0 : 1;
    };
    double x = 0, y = 0;
    const int ra = rank(a, x), rb = rank(b, y);
    if (ra != rb) return ra < rb;
    if (ra == 0 && x != y) return x < y;
    return a < b;
  };
  std::stable_sort(set.runs.begin(), set.runs.end(), [&](const RunEntry& a, const RunEntry& b) {
    for (const auto& k : set.keys) {
      const auto& x = a.values.at(k);
      const auto& y = b.values.at(k);
      if (x != y) return less(x, y);
    }
    return false;
  });
  return set;
}

}  // namespace

RunSet load_run_set(const std::string& path) {
  if (fs::is_directory(path)) return from_directory(path);
  if (!fs::exists(path)) throw harness::InputError(fmt::format("{}: no such sweep file or run directory", path));
  return from_sweep(path);
}

std::vector<std::pair<std::string, RunSet>> split_run_set(const RunSet& set, const std::string& key) {
  if (std::find(set.keys.begin(), set.keys.end(), key) == set.keys.end())
    throw harness::InputError(fmt::format("{}: '{}' does not vary between these runs; keys that vary: {}", set.dir, key,
                                          set.keys.empty() ? "none" : fmt::format("{}", fmt::join(set.keys, ", "))));
  std::vector<std::pair<std::string, RunSet>> parts;
  for (const auto& run : set.runs) {
    const auto& value = run.values.at(key);
    auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == value; });
    if (it == parts.end()) {
      RunSet part;
      part.name = set.name;
      part.dir = set.dir;
      part.keys = set.keys;
      part.warnings = set.warnings;
      it = parts.insert(parts.end(), {value, std::move(part)});
    }
    it->second.runs.push_back(run);
  }
  return parts;
}

}  // namespace analysis
