// The critical-scaling grid file (analysis/theory/critical_scaling_config.h): the shipped default file is
// the built-in default grid, and bad input is a located InputError naming the key, what was
// expected and what was found.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "analysis/theory/critical_scaling_config.h"
#include "common/errors.h"
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
  EXPECT_EQ(error_of(head + "rhos: [0.5]\n"),
            "grid.yaml:2:1: unknown key 'rhos' — did you mean 'rho'?; valid keys: experiment, n, d, "
            "rho, gamma, trials, seed, rows, hutchinson, causal, precision, threads");
  EXPECT_EQ(error_of(head + "n: [1024, abc]\n"),
            "grid.yaml:2:11: n: expected an integer in [2, 65536], got 'abc'");
  EXPECT_EQ(error_of(head + "rho: [0.5, 1.0]\n"),
            "grid.yaml:2:12: rho: expected a number in [0, 1), got '1.0'");
  EXPECT_EQ(error_of(head + "rho: [0.5, 0.4]\n"),
            "grid.yaml:2:12: rho: expected values in increasing order (after 0.5), got '0.4'");
  EXPECT_EQ(error_of(head + "hutchinson: {rows: 4, probes: 1}\n"),
            "grid.yaml:2:31: hutchinson.probes: expected an integer in [2, 100000], got '1'");
  EXPECT_EQ(error_of(head + "hutchinson: {row: 4}\n"),
            "grid.yaml:2:14: unknown key 'hutchinson.row' — did you mean 'rows'?; valid keys in "
            "'hutchinson': rows, probes, precision");
  EXPECT_EQ(error_of(head + "gamma: {count: 1}\n"),
            "grid.yaml:2:16: gamma.count: expected an integer in [2, 1000], got '1'");
  EXPECT_EQ(error_of(head + "gamma: 3\n").rfind("grid.yaml:2:8: gamma: expected a list of γ values", 0), 0u)
      << error_of(head + "gamma: 3\n");
  EXPECT_EQ(error_of(head + "precision: float16\n"),
            "grid.yaml:2:12: precision: expected one of: float32, float64, got 'float16'");
  EXPECT_NE(error_of(head + "causal: {thresholds: [0.8, 0.2]}\n").find("causal.thresholds: expected two"),
            std::string::npos);
  EXPECT_EQ(error_of(head + "d: [8192]\nn: [65536]\n"),
            "grid.yaml:2:5: d: n·d must be at most 67108864 (the token set's size), got 65536·8192 "
            "with n = 65536");
  EXPECT_EQ(error_of("experiment: entropy\n"),
            "grid.yaml:1:13: experiment: expected 'critical-scaling', got 'entropy'");
  EXPECT_NE(error_of("n: [64]\n").find("experiment: missing"), std::string::npos);
  EXPECT_NE(error_of(head + "n: [64\n").find("cannot parse the YAML"), std::string::npos);
  EXPECT_EQ(error_of(head + "n: [64]\nn: [32]\n"), "grid.yaml:3:1: duplicate key 'n'");
  EXPECT_EQ(error_of(head + "rows: 1\n"), "grid.yaml:2:7: rows: expected an integer in [2, 65536], got '1'");
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
