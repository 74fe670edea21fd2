#include "sweeps/sweep_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/did_you_mean.h"
#include "common/errors.h"
#include "harness/config/key_table.h"
#include "results/run_file.h"
#include "results/run_paths.h"

namespace fs = std::filesystem;

namespace harness::sweeps {

using config::Location;

namespace {

[[noreturn]] void fail(const Location& at, const std::string& key, const std::string& what) {
  config::fail_at(at, key, what);  // the config schema's error form
}

using config::describe;

// A value as the user wrote it, on one line.
std::string node_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (!node.IsDefined() || node.IsNull()) return "null";
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}



AxisValue axis_value(const std::string& source, const YAML::Node& node) {
  return {node, Location::of(source, node), node_text(node)};
}

// The schema's own message for an unknown key (with did-you-mean and the section's valid keys).
[[noreturn]] void unknown_config_key(const std::string& key, const Location& at) {
  config::LoadedConfig scratch;
  config::apply_override(scratch, key, YAML::Node(), at);  // throws: the key is unknown
  throw InputError(fmt::format("{}: unknown key '{}'", at.str(), key));
}

// Flattens a mapping of dotted keys and/or nested config sections into (key, value) pairs.
void flatten(const YAML::Node& map, const std::string& prefix, const std::string& source,
             std::vector<std::pair<std::string, YAML::Node>>& out,
             std::vector<Location>& key_locations) {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const Location at = Location::of(source, kv.first);
    if (!kv.first.IsScalar()) throw InputError(fmt::format("{}: keys must be plain names", at.str()));
    const std::string path = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    if (!seen.insert(kv.first.Scalar()).second)
      throw InputError(fmt::format("{}: {}: duplicate key", at.str(), path));
    if (config::find_key(path)) {
      out.emplace_back(path, kv.second);
      key_locations.push_back(at);
    } else if (config::is_section(path)) {
      if (!kv.second.IsMap())
        fail(at, path, fmt::format("is a section of keys, not a key; write its keys as "
                                   "{}.<key> or as a nested mapping", path));
      flatten(kv.second, path, source, out, key_locations);
    } else {
      unknown_config_key(path, at);
    }
  }
}

// The keys a sweep may not vary: they decide where results go, not what they are.
void check_variable_key(const std::string& key, const Location& at) {
  if (key == "name")
    fail(at, key, "a sweep names its runs itself (<sweep name>/<run id>); set the sweep's "
                  "top-level `name:` instead");
  if (key == "run.out_dir")
    fail(at, key, "cannot vary per run: every run of a sweep lives under <run.out_dir>/<sweep "
                  "name>/<run id>; set it once in the base");
}

std::vector<Axis> parse_axes(const YAML::Node& node, const std::string& section,
                             const std::string& source) {
  if (!node.IsMap())
    fail(Location::of(source, node), section,
         fmt::format("expected a mapping of config keys to lists of values, got {}", describe(node)));
  std::vector<std::pair<std::string, YAML::Node>> entries;
  std::vector<Location> key_locations;
  flatten(node, "", source, entries, key_locations);
  std::vector<Axis> axes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, values] = entries[i];
    const Location value_at = Location::of(source, values);
    check_variable_key(key, key_locations[i]);
    if (!values.IsSequence())
      fail(value_at, key, fmt::format("{} axis: expected a list of values, got {} (a single value "
                                      "belongs in the base)", section, describe(values)));
    if (values.size() == 0)
      fail(value_at, key, fmt::format("empty {} axis: give at least one value", section));
    Axis axis{key, key_locations[i], {}};
    for (const auto& v : values) axis.values.push_back(axis_value(source, v));
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::string read_text_file(const std::string& path, const Location& at, const std::string& key,
                           const std::string& what) {
  // A directory opens and reads as "" (an empty config: every default); /dev/zero never ends.
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    fail(at, key, fmt::format("{} '{}' is {}, not a file", what, path,
                              fs::is_directory(path, ec) ? "a directory" : "a device, pipe or socket"));
  std::ifstream in(path);
  if (!in)
    fail(at, key, fmt::format("{} '{}' {}", what, path,
                              fs::exists(path, ec) ? "cannot be read" : "not found"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The one reader of a config file's YAML (harness/config/key_table.h): syntax errors located alike.
using config::parse_yaml;

// Where `key` is written in a config mapping (nested sections or dotted keys).
YAML::Node find_in_config(const YAML::Node& map, const std::string& key) {
  if (!map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) continue;
    const std::string& k = kv.first.Scalar();
    if (k == key) return kv.second;
    if (key.size() > k.size() && key.compare(0, k.size(), k) == 0 && key[k.size()] == '.') {
      YAML::Node found = find_in_config(kv.second, key.substr(k.size() + 1));
      if (found.IsDefined()) return found;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::string settings_text(const std::vector<Setting>& settings) {
  std::vector<std::string> parts;
  for (const auto& s : settings) parts.push_back(fmt::format("{}={}", s.key, s.value.text));
  return parts.empty() ? std::string("the base config") : fmt::format("{}", fmt::join(parts, " "));
}

// <sweep dir>/<id>, unless only a directory named by a first-scheme id holds the run (results
// written before unread keys left the identity): then that one, a done run first.
std::string find_run_dir(const std::string& sweep_dir, const PlannedRun& run) {
  // error_code overloads: a path the system refuses (a component over NAME_MAX: "File name too
  // long") is a directory that does not exist yet, not an exception out of loading.
  std::error_code ec;
  const fs::path current = fs::path(sweep_dir) / run.id;
  if (fs::exists(current, ec)) return current.string();
  std::string found;
  for (const auto& legacy_id : run.legacy_ids) {
    const fs::path dir = fs::path(sweep_dir) / legacy_id;
    const results::RunPaths paths(dir.string());
    if (legacy_id == run.id || !fs::exists(paths.results, ec)) continue;
    try {
      if (results::read_run_file(paths.results).state == results::RunState::kDone) return dir.string();
    } catch (const std::exception&) {
      continue;  // unreadable: not a place to resume from
    }
    if (found.empty()) found = dir.string();
  }
  return found.empty() ? current.string() : found;
}

}  // namespace

const char* const kNotRead = "–";

const std::vector<std::string>& sweep_keys() {
  static const std::vector<std::string> keys = {"name", "description", "base", "grid",
                                                "zip",  "seeds",       "runs", "planned"};
  return keys;
}

std::string PlannedRun::setting_text(const std::string& key) const {
  for (const auto& s : settings)
    if (s.key == key) return s.value.text;
  return "";
}

std::string Sweep::value_text(size_t i, const std::string& key) const {
  const config::KeySpec* spec = config::find_key(key);
  if (spec && !spec->is_read(runs.at(i).loaded.config)) return kNotRead;
  const std::string set = runs.at(i).setting_text(key);
  if (!set.empty()) return set;
  const YAML::Node in_base = find_in_config(base_node, key);
  if (in_base.IsDefined()) return node_text(in_base);
  return spec ? spec->get(runs.at(i).loaded.config) : "";
}

// ---- load_sweep_text's stages: parse, check, expand, resolve -------------------------------

namespace {

// The top-level keys of a sweep, each checked against sweep_keys().
std::map<std::string, YAML::Node> parse_sections(const YAML::Node& root, const std::string& source) {
  std::map<std::string, YAML::Node> sections;
  for (const auto& kv : root) {
    const Location at = Location::of(source, kv.first);
    if (!kv.first.IsScalar()) throw InputError(fmt::format("{}: keys must be plain names", at.str()));
    const std::string key = kv.first.Scalar();
    const auto& known = sweep_keys();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string msg = fmt::format("{}: unknown key '{}'", at.str(), key);
      if (const auto close = harness::did_you_mean(key, known); !close.empty())
        msg += fmt::format(" — did you mean '{}'?", close.front());
      if (config::find_key(key) || config::is_section(key))
        msg += " Config keys go under 'base:' (fixed for every run) or 'grid:' / 'zip:' (varied)";
      msg += fmt::format("; valid keys of a sweep: {}", fmt::join(known, ", "));
      throw InputError(msg);
    }
    if (sections.count(key)) throw InputError(fmt::format("{}: {}: duplicate key", at.str(), key));
    sections[key] = kv.second;
  }

  return sections;
}

// name, base, the axes and the explicit runs into `sweep`; returns the base config.
// runs: a list of override mappings, each one run (train.seed not when `seeds:` varies it).
void parse_explicit_runs(const YAML::Node& r, const std::string& source, Sweep& sweep) {
  if (!r.IsSequence() || r.size() == 0)
    fail(Location::of(source, r), "runs",
         fmt::format("expected a non-empty list of override mappings (e.g. - {{attention.method: "
                     "rope}}), got {}", describe(r)));
  for (const auto& item : r) {
    const Location at = Location::of(source, item);
    if (!item.IsMap() || item.size() == 0)
      fail(at, "runs", fmt::format("each entry is a mapping of config keys to one value each, "
                                   "got {}", describe(item)));
    std::vector<std::pair<std::string, YAML::Node>> entries;
    std::vector<Location> key_locations;
    flatten(item, "", source, entries, key_locations);
    ExplicitRun run{at, {}};
    for (size_t i = 0; i < entries.size(); ++i) {
      check_variable_key(entries[i].first, key_locations[i]);
      if (entries[i].first == "train.seed" && !sweep.seeds.values.empty())
        fail(key_locations[i], "train.seed",
             fmt::format("already varied by `seeds:` ({})", sweep.seeds.at.str()));
      run.overrides.emplace_back(entries[i].first, axis_value(source, entries[i].second));
    }
    sweep.explicit_runs.push_back(std::move(run));
  }
}

// planned: {arms: [A, B, ...], correction: bonferroni | holm, alpha: 0.05, contexts: [4L, 16L]}
PlannedComparison parse_planned(const YAML::Node& p, const std::string& source) {
  PlannedComparison planned;
  planned.at = Location::of(source, p);
  if (!p.IsMap())
    fail(planned.at, "planned", fmt::format("expected a mapping {{arms: [A, B], correction: bonferroni, alpha: "
                                            "0.05}}, got {}", describe(p)));
  static const std::vector<std::string> keys = {"arms", "correction", "alpha", "contexts"};
  for (const auto& kv : p) {
    const Location at = Location::of(source, kv.first);
    const std::string key = kv.first.Scalar();
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail(at, "planned." + key, fmt::format("unknown key; valid keys in 'planned': {}", fmt::join(keys, ", ")));
    const Location value_at = Location::of(source, kv.second);
    if (key == "arms") {
      if (!kv.second.IsSequence() || kv.second.size() < 2)
        fail(value_at, "planned.arms", fmt::format("expected a list of two or more arm labels, got {}",
                                                   describe(kv.second)));
      for (const auto& a : kv.second) {
        if (!a.IsScalar() || a.Scalar().empty())
          fail(Location::of(source, a), "planned.arms", fmt::format("expected an arm label, got {}", describe(a)));
        planned.arms.push_back(a.Scalar());
      }
    } else if (key == "contexts") {  // multiples of L: "4L" (or "4")
      if (!kv.second.IsSequence() || kv.second.size() < 1)
        fail(value_at, "planned.contexts", fmt::format("expected a list of validation contexts as multiples of L "
                                                       "([4L, 16L]), got {}", describe(kv.second)));
      for (const auto& c : kv.second) {
        std::string text = c.IsScalar() ? c.Scalar() : "";
        if (!text.empty() && text.back() == 'L') text.pop_back();
        char* end = nullptr;
        const long m = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || m < 1)
          fail(Location::of(source, c), "planned.contexts",
               fmt::format("expected a context as a multiple of L (1L, 4L, 16L), got {}", describe(c)));
        planned.multiples.push_back(m);
      }
    } else if (key == "correction") {
      planned.correction = kv.second.IsScalar() ? kv.second.Scalar() : "";
      if (planned.correction != "bonferroni" && planned.correction != "holm")
        fail(value_at, "planned.correction",
             fmt::format("expected bonferroni or holm, got {}", describe(kv.second)));
    } else {
      const std::string text = kv.second.IsScalar() ? kv.second.Scalar() : "";
      char* end = nullptr;
      planned.alpha = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(planned.alpha > 0 && planned.alpha < 1))
        fail(value_at, "planned.alpha", fmt::format("expected a number in (0, 1), got {}", describe(kv.second)));
    }
  }
  if (planned.arms.empty()) fail(planned.at, "planned.arms", "missing: name the arms the comparison tests");
  return planned;
}

config::LoadedConfig parse_axes_and_base(std::map<std::string, YAML::Node>& sections,
                                         const std::string& source, Sweep& sweep) {
  // name: a single path component (results go to <out_dir>/<name>/).
  if (sections.count("name")) {
    const YAML::Node& n = sections["name"];
    if (!n.IsScalar() || !config::is_valid_name(n.Scalar()))
      fail(Location::of(source, n), "name", fmt::format("expected {}, got {}", config::kNameRule, describe(n)));
    sweep.name = n.Scalar();
  } else {
    sweep.name = fs::path(source).stem().string();
    if (!config::is_valid_name(sweep.name))
      throw InputError(fmt::format("{}: name: the sweep would be named '{}' after its file, which is not {}; "
                                   "set name: in the sweep", source, sweep.name, config::kNameRule));
  }

  // base: an inline mapping or a config file relative to the sweep file.
  config::LoadedConfig base;
  base.source = source;
  if (sections.count("base")) {
    const YAML::Node& b = sections["base"];
    const Location at = Location::of(source, b);
    if (b.IsScalar()) {
      const fs::path rel(b.Scalar());
      sweep.base_path = (rel.is_absolute() ? rel : fs::path(source).parent_path() / rel).string();
      sweep.base_text = read_text_file(sweep.base_path, at, "base", "config file");
      sweep.base_node = parse_yaml(sweep.base_text, sweep.base_path);
      base.source = sweep.base_path;
      base.text = sweep.base_text;
      if (!sweep.base_node.IsNull() && !sweep.base_node.IsMap())
        fail(Location::of(sweep.base_path, sweep.base_node), "base",
             fmt::format("expected a mapping of config keys, got {}", describe(sweep.base_node)));
    } else if (b.IsMap() || b.IsNull()) {
      sweep.base_node = b;
      base.text = b.IsNull() ? "" : YAML::Dump(b) + "\n";
    } else {
      fail(at, "base", fmt::format("expected a run config: a mapping of config keys, or the path "
                                   "of a config file, got {}", describe(b)));
    }
    config::apply_yaml(base, sweep.base_node, base.source);
  }

  if (sections.count("grid")) sweep.grid = parse_axes(sections["grid"], "grid", source);
  if (sections.count("zip")) {
    sweep.zip = parse_axes(sections["zip"], "zip", source);
    for (const auto& axis : sweep.zip)
      if (axis.values.size() != sweep.zip.front().values.size())
        fail(axis.at, axis.key,
             fmt::format("zip lists vary together and must be equal in length: {} has {} values, "
                         "{} (at {}) has {}", axis.key, axis.values.size(), sweep.zip.front().key,
                         sweep.zip.front().at.str(), sweep.zip.front().values.size()));
  }
  sweep.seeds.key = "train.seed";
  if (sections.count("seeds")) {
    const YAML::Node& s = sections["seeds"];
    sweep.seeds.at = Location::of(source, s);
    if (!s.IsSequence()) fail(sweep.seeds.at, "seeds", fmt::format("expected a list of seeds, got {}", describe(s)));
    if (s.size() == 0) fail(sweep.seeds.at, "seeds", "empty axis: give at least one seed");
    for (const auto& v : s) sweep.seeds.values.push_back(axis_value(source, v));
  }
  if (sections.count("runs")) parse_explicit_runs(sections["runs"], source, sweep);
  if (sections.count("planned")) sweep.planned = parse_planned(sections["planned"], source);

  return base;
}

// Every axis value on its own through the schema (so each message points at it), and each key
// varied by one axis only.
void check_axes(const Sweep& sweep, const config::LoadedConfig& base) {
  // A key may be varied by one axis only.
  {
    std::map<std::string, Location> varied;
    auto claim = [&](const std::string& key, const Location& at) {
      const auto [it, fresh] = varied.emplace(key, at);
      if (!fresh)
        fail(at, key, fmt::format("already varied at {}; a key belongs to one axis (grid, zip or "
                                  "seeds)", it->second.str()));
    };
    for (const auto& a : sweep.grid) claim(a.key, a.at);
    for (const auto& a : sweep.zip) claim(a.key, a.at);
    if (!sweep.seeds.values.empty()) claim("train.seed", sweep.seeds.at);
  }

  // Every value of every axis through the schema on its own, so each message points at it.
  {
    auto check = [&](const std::string& key, const AxisValue& v) {
      config::LoadedConfig scratch = base;
      config::apply_override(scratch, key, v.node, v.at);
    };
    for (const auto& a : sweep.grid)
      for (const auto& v : a.values) check(a.key, v);
    for (const auto& a : sweep.zip)
      for (const auto& v : a.values) check(a.key, v);
    for (const auto& v : sweep.seeds.values) check("train.seed", v);
    for (const auto& r : sweep.explicit_runs)
      for (const auto& [key, v] : r.overrides) check(key, v);
  }

}

// The points of the sweep, each a list of settings over the base.
// The most runs a sweep may expand to: each is a training run (minutes to days); far more is a
// mistake (a list in the wrong place, an axis pasted twice), and expanding it would take minutes
// and gigabytes before saying anything (2.6 KB and ~40 µs a run: 30⁴ runs took 30 s and 2 GB).
constexpr size_t kMaxRuns = 10000;

void check_run_count(const Sweep& sweep, const std::string& source) {
  // As expand() counts them, saturating: (grid product × zip length + explicit runs) × seeds.
  const auto times = [](size_t a, size_t b) { return b != 0 && a > kMaxRuns / b ? kMaxRuns + 1 : a * b; };
  const bool product = !sweep.grid.empty() || !sweep.zip.empty() || sweep.explicit_runs.empty();
  size_t points = product ? 1 : 0;
  std::vector<std::string> factors;
  for (const auto& a : sweep.grid) {
    points = times(points, a.values.size());
    factors.push_back(fmt::format("{} {}", a.key, a.values.size()));
  }
  if (!sweep.zip.empty()) {
    points = times(points, sweep.zip.front().values.size());
    factors.push_back(fmt::format("zip {}", sweep.zip.front().values.size()));
  }
  std::string text = fmt::format("{}", fmt::join(factors, " × "));
  if (!sweep.explicit_runs.empty()) {
    points = std::min(points + sweep.explicit_runs.size(), kMaxRuns + 1);
    text = fmt::format("{}{}runs {}", text, text.empty() ? "" : " + ", sweep.explicit_runs.size());
  }
  if (!sweep.seeds.values.empty()) {
    points = times(points, sweep.seeds.values.size());
    const bool sum_or_product = factors.size() > 1 || !sweep.explicit_runs.empty();
    text = fmt::format("{}seeds {}", text.empty() ? "" : (sum_or_product ? "(" + text + ") × " : text + " × "),
                       sweep.seeds.values.size());
  }
  if (points > kMaxRuns)
    throw InputError(fmt::format("{}: the sweep expands to more than {} runs ({}); split it into "
                                 "smaller sweeps", source, kMaxRuns, text));
}

std::vector<std::vector<Setting>> expand(const Sweep& sweep) {
  // Expansion, in plan order: grid (first key outermost) × zip × seeds, then each explicit run
  // × seeds. The grid product is the base alone when there is no grid or zip; a sweep of only
  // `runs:` has just those.
  std::vector<std::vector<Setting>> combinations;
  const bool product = !sweep.grid.empty() || !sweep.zip.empty() || sweep.explicit_runs.empty();
  const auto add_with_seeds = [&](const std::vector<Setting>& settings) {
    if (sweep.seeds.values.empty()) {
      combinations.push_back(settings);
      return;
    }
    for (const auto& seed : sweep.seeds.values) {
      combinations.push_back(settings);
      combinations.back().push_back({"train.seed", seed});
    }
  };
  if (product) {
    std::vector<size_t> digit(sweep.grid.size(), 0);
    const size_t zip_length = sweep.zip.empty() ? 1 : sweep.zip.front().values.size();
    while (true) {
      for (size_t z = 0; z < zip_length; ++z) {
        std::vector<Setting> settings;
        for (size_t g = 0; g < sweep.grid.size(); ++g)
          settings.push_back({sweep.grid[g].key, sweep.grid[g].values[digit[g]]});
        for (const auto& a : sweep.zip) settings.push_back({a.key, a.values[z]});
        add_with_seeds(settings);
      }
      // Odometer over the grid, last axis fastest.
      size_t g = sweep.grid.size();
      while (g > 0 && ++digit[g - 1] == sweep.grid[g - 1].values.size()) digit[--g] = 0;
      if (g == 0) break;
    }
  }
  for (const auto& r : sweep.explicit_runs) {
    std::vector<Setting> settings;
    for (const auto& [key, v] : r.overrides) settings.push_back({key, v});
    add_with_seeds(settings);
  }

  return combinations;
}

// Resolves each point into sweep.runs (one run per id) and finds the run directories.
void resolve_runs(const std::vector<std::vector<Setting>>& combinations,
                  const config::LoadedConfig& base, const std::string& source, Sweep& sweep) {
  // Each point's id is the hash of its identity (config::canonical_text). Points with
  // the same id are one run: the first in plan order keeps them as `merged`.
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < combinations.size(); ++i) {
    config::LoadedConfig loaded = base;
    for (const auto& s : combinations[i]) config::apply_override(loaded, s.key, s.value.node, s.value.at);
    try {
      config::resolve_and_validate(loaded);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} (in run {}: {})", e.what(), i, settings_text(combinations[i])));
    }
    const std::string id = config::config_hash(loaded.config);
    const std::string legacy_id = config::legacy_config_hash(loaded.config);
    const auto [it, fresh] = by_id.emplace(id, sweep.runs.size());
    if (!fresh) {
      PlannedRun& first = sweep.runs[it->second];
      first.merged.push_back(combinations[i]);
      if (std::find(first.legacy_ids.begin(), first.legacy_ids.end(), legacy_id) == first.legacy_ids.end())
        first.legacy_ids.push_back(legacy_id);
      continue;
    }
    PlannedRun run;
    run.index = sweep.runs.size();
    run.settings = combinations[i];
    run.loaded = std::move(loaded);
    run.id = id;
    run.legacy_ids = {legacy_id};
    run.loaded.config.name = fmt::format("{}/{}", sweep.name, run.id);
    run.loaded.text += fmt::format("\n# sweep {} ({}), run {}: overrides of the base\n", sweep.name,
                                   source, run.index);
    for (const auto& s : run.settings) run.loaded.text += fmt::format("#   {}: {}\n", s.key, s.value.text);
    sweep.runs.push_back(std::move(run));
  }

  sweep.sweep_dir = (fs::path(base.config.run.out_dir) / sweep.name).string();
  for (auto& run : sweep.runs) run.run_dir = find_run_dir(sweep.sweep_dir, run);
}

// Keys whose resolved values differ between runs, in order of first appearance; a run that does not
// read a key has one more value, kNotRead. (Counting only the runs that read it folded two arms into
// one: over attention.method × attention.positional, `nope` is not read by a NoPE preset, so
// positional took a single read value, p-rope, and the arms fire and fire with p-rope shared a label.)
std::vector<std::string> varying_keys(const Sweep& sweep) {
  std::vector<std::string> varying;
  std::vector<std::string> candidates;
  for (const auto& run : sweep.runs)
    for (const auto& s : run.settings)
      if (std::find(candidates.begin(), candidates.end(), s.key) == candidates.end())
        candidates.push_back(s.key);
  for (const auto& key : candidates) {
    const config::KeySpec* spec = config::find_key(key);
    std::set<std::string> values;
    for (const auto& run : sweep.runs)
      values.insert(spec->is_read(run.loaded.config) ? spec->get(run.loaded.config) : kNotRead);
    if (values.size() > 1) varying.push_back(key);
  }
  return varying;
}

}  // namespace

Sweep load_sweep_text(const std::string& text, const std::string& source) {
  Sweep sweep;
  sweep.path = source;
  sweep.text = text;
  const YAML::Node root = parse_yaml(text, source);
  if (!root.IsMap())
    throw InputError(fmt::format("{}: expected a sweep (a mapping with name, base, grid, zip, "
                                 "seeds, runs), got {}", Location::of(source, root).str(),
                                 describe(root)));
  auto sections = parse_sections(root, source);
  const config::LoadedConfig base = parse_axes_and_base(sections, source, sweep);
  check_axes(sweep, base);
  check_run_count(sweep, source);
  resolve_runs(expand(sweep), base, source, sweep);
  sweep.varying_keys = varying_keys(sweep);
  return sweep;
}

Sweep load_sweep(const std::string& path) {
  std::ifstream in(path);
  std::error_code ec;
  if (!in)
    throw InputError(fmt::format("{}: sweep file {}", path, fs::exists(path, ec) ? "cannot be read" : "not found"));
  std::stringstream text;
  text << in.rdbuf();
  return load_sweep_text(text.str(), path);
}

}  // namespace harness::sweeps
