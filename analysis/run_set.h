// The runs an export reads, from a sweep file (its planned runs, in plan order) or a directory
// (a run directory, or any directory holding run directories: every run.h5 below it, three levels
// deep at most), each with its state, its record when readable, and the value of every key that
// varies between them ("–" for a key the run does not read). A truncated or unreadable run.h5 is
// skipped with a warning naming it, never an error.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/run_config.h"
#include "sweeps/sweep_file.h"
#include "results/run_file.h"

namespace analysis {

struct RunEntry {
  std::string id;     // run id (sweep) or the directory's path relative to the scanned root
  std::string dir;
  std::string state;  // pending | running | done | failed | interrupted
  std::optional<results::RunRecord> record;
  std::map<std::string, std::string> values;  // key → value text, for every key in RunSet::keys
  int64_t train_context = 0;                  // L
  harness::config::RunConfig config;          // resolved
};

struct RunSet {
  std::string name;               // the sweep's name, or the directory
  std::string dir;                // where the runs are: the sweep's directory, or the directory given
  std::vector<std::string> keys;  // keys whose values differ between runs, in sweep/schema order
  std::vector<RunEntry> runs;
  std::vector<std::string> warnings;  // unreadable files, each naming its path
  std::optional<harness::sweeps::PlannedComparison> planned;  // the sweep file's `planned:`
};

// Throws harness::InputError when `path` is neither a sweep file nor a directory with runs.
RunSet load_run_set(const std::string& path);

// The runs of `set` by their value of `key` (one of set.keys; "–" for runs that do not read it), in
// the set's order (numbers by value), each part keeping the set's name, directory and keys. Throws
// harness::InputError naming the keys that vary when `key` is not one of them.
std::vector<std::pair<std::string, RunSet>> split_run_set(const RunSet& set, const std::string& key);

}  // namespace analysis
