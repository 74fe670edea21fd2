// The critical-scaling grid file (analysis/theory/critical_scaling_config.h): the shipped default file is
// the built-in default grid, and bad input is a located InputError naming the key, what was
// expected and what was found.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "analysis/theory/critical_scaling_config.h"
#include "common/errors.h"
#include "harness/config/schema.h"
#include "test_support.h"

namespace {

const std::string kDefaultFile = std::string(HARNESS_SOURCE_DIR) + "/sweeps/critical-scaling.yaml";

// The InputError message of loading `text`, or "" when it loads.
std::string error_of(const std::string& text) {
  try {
    analysis::load_critical_scaling_config_text(text, "grid.yaml");
  } catch (const harness::InputError& e) {
    return e.what();
  }
  return "";
}

// The same for a run config (harness/config/schema.h).
std::string run_error_of(const std::string& text) {
  try {
    harness::config::load_run_config_text(text, "run.yaml", "run");
  } catch (const harness::InputError& e) {
    return e.what();
  }
  return "";
}

// The parts of "file:line:column: unknown key 'path' — did you mean 'key'?; valid keys in
// 'section': a, b", the one form of a mistyped key; empty when `message` is not of that form.
std::vector<std::string> unknown_key_parts(const std::string& message) {
  static const std::regex form(
      R"(^(\S+):(\d+):(\d+): unknown key '([a-z_.]+)' — did you mean '([a-z_.]+)'\?; valid keys in '([a-z_]+)': ([a-z_]+(, [a-z_]+)*)$)");
  std::smatch m;
  if (!std::regex_match(message, m, form)) return {};
  return {m[1], m[2], m[3], m[4], m[5], m[6], m[7]};
}

}  // namespace

TEST(CriticalScalingConfig, TheShippedFileIsTheDefaultGrid) {
  const auto file = analysis::load_critical_scaling_config(kDefaultFile);
  const auto builtin = analysis::default_critical_scaling_config();
  EXPECT_EQ(file.n, builtin.n);
  EXPECT_EQ(file.d, builtin.d);
  EXPECT_EQ(file.rho, builtin.rho);
  ASSERT_EQ(builtin.rho.size(), 19u);
  EXPECT_EQ(builtin.rho.front(), 0.05);
  EXPECT_EQ(builtin.rho[9], 0.5);
  EXPECT_EQ(builtin.rho.back(), 0.95);
  EXPECT_EQ(file.gamma_values, builtin.gamma_values);
  EXPECT_EQ(file.gamma_count, builtin.gamma_count);
  EXPECT_EQ(file.gamma_max_over_critical, builtin.gamma_max_over_critical);
  EXPECT_EQ(file.trials, builtin.trials);
  EXPECT_EQ(file.seed, builtin.seed);
  EXPECT_EQ(file.rows, builtin.rows);
  EXPECT_EQ(file.hutchinson_rows, builtin.hutchinson_rows);
  EXPECT_EQ(file.hutchinson_probes, builtin.hutchinson_probes);
  EXPECT_EQ(file.causal_rows, builtin.causal_rows);
  EXPECT_EQ(file.collapse_below, builtin.collapse_below);
  EXPECT_EQ(file.identity_above, builtin.identity_above);
  EXPECT_EQ(file.float64, builtin.float64);
  EXPECT_EQ(file.hutchinson_float64, builtin.hutchinson_float64);
  EXPECT_EQ(file.threads, builtin.threads);
  // The γ grid: 30 values from 0 to 3/(1 − ρ).
  const auto g = builtin.gammas(9);
  ASSERT_EQ(g.size(), 30u);
  EXPECT_EQ(g.front(), 0.0);
  EXPECT_NEAR(g.back(), 6.0, 1e-12);
}

TEST(CriticalScalingConfig, ListsAndMappingsAreRead) {
  const auto c = analysis::load_critical_scaling_config_text(
      "experiment: critical-scaling\nn: [128]\nd: [8, 16]\nrho: [0.2, 0.4]\ngamma: [0, 1, 2.5]\n"
      "trials: 2\nseed: 9\nrows: 32\nhutchinson: {rows: 4, probes: 3, precision: float64}\n"
      "causal: {rows: 10, thresholds: [0.1, 0.9]}\nprecision: float32\nthreads: 1\n",
      "grid.yaml");
  EXPECT_EQ(c.n, std::vector<int64_t>({128}));
  EXPECT_EQ(c.d, std::vector<int64_t>({8, 16}));
  EXPECT_EQ(c.rho, std::vector<double>({0.2, 0.4}));
  EXPECT_EQ(c.gammas(1), std::vector<double>({0, 1, 2.5}));
  EXPECT_EQ(c.trials, 2);
  EXPECT_EQ(c.seed, 9u);
  EXPECT_EQ(c.hutchinson_probes, 3);
  EXPECT_EQ(c.causal_rows, 10);
  EXPECT_EQ(c.collapse_below, 0.1);
  EXPECT_FALSE(c.float64);
  EXPECT_TRUE(c.hutchinson_float64);
  const auto r = analysis::load_critical_scaling_config_text(
      "experiment: critical-scaling\nrho: {from: 0.1, to: 0.3, count: 3}\n"
      "gamma: {count: 4, max_over_gamma_c: 2}\n",
      "grid.yaml");
  EXPECT_EQ(r.rho, std::vector<double>({0.1, 0.2, 0.3}));
  EXPECT_NEAR(r.gammas(2).back(), 2 / (1 - 0.3), 1e-12);
  EXPECT_EQ(r.gammas(2).size(), 4u);
}

TEST(CriticalScalingConfig, BadInputIsALocatedError) {
  const std::string head = "experiment: critical-scaling\n";
  const std::vector<std::pair<std::string, std::string>> cases = {  // the file after `head`, its error
      {"rhos: [0.5]\n",
       "grid.yaml:2:1: unknown key 'rhos' — did you mean 'rho'?; valid keys: experiment, n, d, rho, gamma, "
       "trials, seed, rows, hutchinson, causal, precision, threads"},
      {"n: [1024, abc]\n", "grid.yaml:2:11: n: expected an integer in [2, 65536], got 'abc'"},
      {"rho: [0.5, 1.0]\n", "grid.yaml:2:12: rho: expected a number in [0, 1), got 1.0"},
      {"rho: [0.5, 0.4]\n", "grid.yaml:2:12: rho: expected values in increasing order (after 0.5), got '0.4'"},
      {"hutchinson: {rows: 4, probes: 1}\n",
       "grid.yaml:2:31: hutchinson.probes: expected an integer in [2, 100000], got 1"},
      {"hutchinson: {row: 4}\n",
       "grid.yaml:2:14: unknown key 'hutchinson.row' — did you mean 'hutchinson.rows'?; valid keys in "
       "'hutchinson': rows, probes, precision"},
      {"gamma: {count: 1}\n", "grid.yaml:2:16: gamma.count: expected an integer in [2, 1000], got 1"},
      {"precision: float16\n",
       "grid.yaml:2:12: precision: 'float16' is not valid; expected one of: float32, float64"},
      {"d: [8192]\nn: [65536]\n",
       "grid.yaml:2:5: d: n·d must be at most 67108864 (the token set's size), got 65536·8192 with n = 65536"},
      {"rho: {from: 0.1, to: 0.3}\n", "grid.yaml:2:6: rho: the mapping needs from, to and count"},
      {"rho: {from: 0.5, to: 0.3, count: 3}\n",
       "grid.yaml:2:22: rho.to: expected a value above rho.from (0.5), got 0.3"},
      {"rho: {from: 0.5, to: 1, count: 3}\n", "grid.yaml:2:22: rho.to: expected a number in [0, 1), got 1"},
      {"hutchinson: 4\n", "grid.yaml:2:13: hutchinson: expected a mapping (a section of keys), got '4'"},
      {"n: [64]\nn: [32]\n", "grid.yaml:3:1: duplicate key 'n'"},
      {"rows: 1\n", "grid.yaml:2:7: rows: expected an integer in [2, 65536], got 1"},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(error_of(head + text), want) << text;
  EXPECT_EQ(error_of("experiment: entropy\n"),
            "grid.yaml:1:13: experiment: 'entropy' is not valid; expected one of: critical-scaling");
  EXPECT_EQ(error_of(head + "gamma: 3\n").rfind("grid.yaml:2:8: gamma: expected a list of γ values", 0), 0u)
      << error_of(head + "gamma: 3\n");
  EXPECT_NE(error_of(head + "causal: {thresholds: [0.8, 0.2]}\n").find("causal.thresholds: expected two"),
            std::string::npos);
  EXPECT_NE(error_of("n: [64]\n").find("experiment: missing"), std::string::npos);
  EXPECT_EQ(error_of(head + "n: [64\n").rfind("grid.yaml:", 0), 0u);
  EXPECT_NE(error_of(head + "n: [64\n").find(": YAML syntax error: "), std::string::npos);
}

TEST(CriticalScalingConfig, TheFileKindIsRecognised) {
  EXPECT_TRUE(analysis::is_critical_scaling_file(kDefaultFile));
  EXPECT_FALSE(analysis::is_critical_scaling_file(std::string(HARNESS_SOURCE_DIR) + "/sweeps/tau-ablation.yaml"));
  EXPECT_FALSE(analysis::is_critical_scaling_file("/nonexistent/grid.yaml"));
  test_support::TempDir dir;
  std::ofstream(dir.path / "broken.yaml") << "experiment: [critical-scaling\n";
  EXPECT_FALSE(analysis::is_critical_scaling_file((dir.path / "broken.yaml").string()));
  EXPECT_THROW(analysis::load_critical_scaling_config((dir.path / "missing.yaml").string()),
               harness::InputError);
}

// One validator (harness/config/key_table.h): a mistyped key in a critical-scaling file fails in
// the run config's form — file:line:column, the key as written, the closest valid key, the valid
// keys of its section — and so does a value out of range.
TEST(CriticalScalingConfig, AMistypedKeyFailsInTheRunConfigsForm) {
  const std::string run = run_error_of("model:\n  layers: 2\ntrain:\n  stpes: 5\n");
  const std::string grid = error_of("experiment: critical-scaling\nhutchinson:\n  probs: 4\n");
  const std::vector<std::string> run_parts = unknown_key_parts(run);
  ASSERT_EQ(run_parts.size(), 7u) << run;
  EXPECT_EQ(std::vector<std::string>(run_parts.begin(), run_parts.begin() + 6),
            (std::vector<std::string>{"run.yaml", "4", "3", "train.stpes", "train.steps", "train"}));
  EXPECT_NE((", " + run_parts[6] + ",").find(", steps,"), std::string::npos) << run;
  EXPECT_EQ(unknown_key_parts(grid),
            (std::vector<std::string>{"grid.yaml", "3", "3", "hutchinson.probs", "hutchinson.probes",
                                      "hutchinson", "rows, probes, precision"}))
      << grid;
  // A misspelt top-level key: the valid top-level keys, no section.
  const std::string run_top = run_error_of("trian:\n  steps: 3\n");
  EXPECT_EQ(run_top.rfind("run.yaml:1:1: unknown key 'trian'", 0), 0u) << run_top;
  EXPECT_NE(run_top.find("; valid keys: name, data, model, "), std::string::npos) << run_top;
  EXPECT_EQ(error_of("experiment: critical-scaling\ntrails: 3\n"),
            "grid.yaml:2:1: unknown key 'trails' — did you mean 'trials'?; valid keys: experiment, n, d, "
            "rho, gamma, trials, seed, rows, hutchinson, causal, precision, threads");
  // A value out of range: "file:line:column: key: expected an integer in [lo, hi], got v" in both.
  const std::regex out_of_range(R"(^(\S+):(\d+):(\d+): ([a-z_.]+): expected an integer in \[(\d+), (\d+)\], got 0$)");
  std::smatch m;
  const std::string run_range = run_error_of("train:\n  steps: 0\n");
  ASSERT_TRUE(std::regex_match(run_range, m, out_of_range)) << run_range;
  EXPECT_EQ(m[4], "train.steps");
  const std::string grid_range = error_of("experiment: critical-scaling\ntrials: 0\n");
  ASSERT_TRUE(std::regex_match(grid_range, m, out_of_range)) << grid_range;
  EXPECT_EQ(grid_range, "grid.yaml:2:9: trials: expected an integer in [1, 1000], got 0");
}

// `harness config keys` lists the file's keys from the same table: every key the loader accepts,
// each with what it expects and its default (the default grid's value).
TEST(CriticalScalingConfig, TheKeyListingIsTheTable) {
  const std::string listing = analysis::critical_scaling_reference();
  std::vector<std::string> keys;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] != ' ') keys.push_back(line.substr(0, line.find(' ')));
  EXPECT_EQ(keys, (std::vector<std::string>{"experiment", "n", "d", "rho", "rho.from", "rho.to", "rho.count",
                                            "gamma", "gamma.count", "gamma.max_over_gamma_c", "trials", "seed",
                                            "rows", "hutchinson.rows", "hutchinson.probes",
                                            "hutchinson.precision", "causal.rows", "causal.thresholds",
                                            "precision", "threads"}));
  EXPECT_NE(listing.find("expected a list of integers in [2, 65536]; default [1024, 4096]\n"), std::string::npos)
      << listing;
  EXPECT_NE(listing.find("expected a number in [0, 1); default 0.05\n"), std::string::npos) << listing;
  EXPECT_NE(listing.find("expected one of: float32, float64; default float32\n"), std::string::npos) << listing;
  // Each listed key, written in a file, is read (a section's key inside its mapping).
  for (const std::string& key : keys) {
    if (key == "experiment") continue;
    const auto dot = key.find('.');
    const std::string value = key == "rho.from" || key == "rho.to" ? "0.5" : key == "causal.thresholds" ? "[0.2, 0.8]"
                              : key == "rho" ? "[0.5]" : key == "gamma" ? "[1, 2]" : key == "n" || key == "d" ? "[8]"
                              : key.find("precision") != std::string::npos ? "float32" : "4";
    const std::string text =
        "experiment: critical-scaling\n" +
        (dot == std::string::npos ? key + ": " + value
         : key.rfind("rho.", 0) == 0 ? "rho: {from: 0.5, to: 0.5, count: 1}"
                                      : key.substr(0, dot) + ": {" + key.substr(dot + 1) + ": " + value + "}") +
        "\n";
    EXPECT_EQ(error_of(text), "") << key << ":\n" << text;
  }
}
