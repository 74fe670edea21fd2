// Declarative sweeps (sweeps/README.md): a YAML file names a base run config and the axes to
// vary — `grid` (Cartesian product), `zip` (lists varied together), `seeds`, and explicit `runs`.
// Loading parses, validates every value of every axis through the config schema, expands the
// runs in a stable order and gives each its run id (config::config_hash of the resolved config).
// Any error is a harness::InputError naming file:line:column and the key, before anything runs.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/config/schema.h"

namespace harness::sweeps {

// One value an axis takes, with where it was written.
struct AxisValue {
  YAML::Node node;
  config::Location at;
  std::string text;  // as written: "L/400", "[L, 4L]"
};

struct Axis {
  std::string key;  // dotted config key, "attention.tau"
  config::Location at;
  std::vector<AxisValue> values;
};

// An explicit entry of `runs:`: overrides applied together to the base.
struct ExplicitRun {
  config::Location at;
  std::vector<std::pair<std::string, AxisValue>> overrides;
};

// One setting a run makes on top of the base.
struct Setting {
  std::string key;
  AxisValue value;
};

struct PlannedRun {
  size_t index = 0;                 // position in plan order (stable: what run-one and Slurm use)
  std::string id;                   // config_hash of the resolved config
  std::vector<Setting> settings;    // every override, in axis order
  config::LoadedConfig loaded;      // resolved and validated
  std::string run_dir;              // <sweep dir>/<id>, or where an earlier id scheme put it
  // Other points of the sweep that resolve to this same run (they differ only in keys the run
  // does not read, or spell a value differently): planned and trained once, listed by `plan`.
  std::vector<std::vector<Setting>> merged;
  // The ids of this run and of its merged points under the first id scheme
  // (config::legacy_config_hash): directories under those names hold this run's results.
  std::vector<std::string> legacy_ids;

  // The value of `key` as written for this run ("" when the run does not set it).
  std::string setting_text(const std::string& key) const;
};

// A comparison written before its runs (`planned:`): the arms `export pairs` tests, and the
// family and criterion they are tested under — every pair × validation context of those arms, with
// `correction` at family-wise error rate `alpha` — so the verdict is the one that was registered.
struct PlannedComparison {
  config::Location at;
  std::vector<std::string> arms;          // labels as `export table` prints them
  std::string correction = "bonferroni";  // "bonferroni" | "holm"
  double alpha = 0.05;
  std::vector<int64_t> multiples;          // `contexts:` as multiples of L; empty: every context
};

struct Sweep {
  std::string path;        // the sweep file as given
  std::string text;        // its YAML text
  std::string name;
  std::string base_path;   // "" when the base is inline
  std::string base_text;   // the base file's text (when base_path is set)
  YAML::Node base_node;    // the base mapping (inline or loaded from base_path)
  std::vector<Axis> grid, zip;
  Axis seeds;              // key train.seed; no values when the sweep has no `seeds:`
  std::vector<ExplicitRun> explicit_runs;
  std::optional<PlannedComparison> planned;

  std::string sweep_dir;   // <run.out_dir of the base>/<name>
  std::vector<PlannedRun> runs;
  // Keys whose values differ between runs, in the order they appear in the sweep file.
  std::vector<std::string> varying_keys;

  // The value of `key` for run `i` as written in the sweep (or the base file), for tables; "–"
  // when the run does not read the key (config::KeySpec::read).
  std::string value_text(size_t i, const std::string& key) const;
};

// Reads, validates and expands a sweep file. Points of the sweep that resolve to the same run are
// merged into one planned run, never an error. Throws harness::InputError.
Sweep load_sweep(const std::string& path);
// The same from text (tests); `source` names the file in messages and resolves a relative
// `base:` path.
Sweep load_sweep_text(const std::string& text, const std::string& source);

// What tables show for a key the run does not read.
extern const char* const kNotRead;

// Top-level keys a sweep file accepts.
const std::vector<std::string>& sweep_keys();

}  // namespace harness::sweeps
