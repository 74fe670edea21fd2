// `harness tau check`: the sweep it plans around a config's τ (sweeps/tau_check.h), and the
// command end to end on the fixture corpus: stopped mid-run it resumes, and its verdict follows
// from the losses and standard errors in the run files.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/errors.h"
#include "harness/config/schema.h"
#include "results/run_file.h"
#include "sweeps/sweep_file.h"
#include "sweeps/tau_check.h"
#include "test_support.h"

namespace fs = std::filesystem;

TEST(TauCheckSweep, GridAroundTheConfigsTauWithItsOverridesAndSeeds) {
  auto loaded = harness::config::load_run_config_text(
      "attention: {method: si+p-rope, tau: L/400}\ntrain: {context: 64, seed: 5}\n", "/tmp/my config.yaml", "c");
  harness::sweeps::TauCheckSpec spec;
  spec.overrides = {"train.steps=40", "eval.contexts=[L, 4L]"};
  spec.factors = {3, 1, 0.1};
  const auto s = harness::sweeps::tau_check_sweep(loaded, spec);
  EXPECT_DOUBLE_EQ(s.tau, 0.16);
  EXPECT_EQ(s.tau_texts, (std::vector<std::string>{"0.016", "0.16", "0.48"}));
  EXPECT_EQ(s.own_tau_text, "0.16");
  EXPECT_EQ(s.path, "runs/tau-check-" + harness::config::config_hash(loaded.config) + "/tau-check.yaml");
  for (const std::string line : {"base: '/tmp/my config.yaml'", "  attention.tau: [0.016, 0.16, 0.48]",
                                 "  train.steps: [40]", "  eval.contexts: [[L, 4L]]", "seeds: [5, 6, 7]"})
    EXPECT_NE(s.text.find(line), std::string::npos) << line << "\n" << s.text;

  spec.factors = {0.5, 2};
  EXPECT_THROW(harness::sweeps::tau_check_sweep(loaded, spec), harness::InputError);  // no factor 1
  spec.factors = {1, 2};
  spec.overrides = {"attention.tau=1"};
  EXPECT_THROW(harness::sweeps::tau_check_sweep(loaded, spec), harness::InputError);
  const auto rope = harness::config::load_run_config_text("attention: {method: rope}\n", "r.yaml", "r");
  spec.overrides.clear();
  try {
    harness::sweeps::tau_check_sweep(rope, spec);
    FAIL() << "rope has no τ";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("attention.tau is not read"), std::string::npos) << e.what();
  }
}

namespace {

using Records = std::map<std::pair<std::string, std::string>, results::RunRecord>;  // by (τ, seed)

// Seed `seed`'s gap at context T between τ = 0.04 and 0.12: the mean over windows of the
// window-loss differences (the fixture's 256 tokens in windows of T).
double seed_gap(const Records& records, const std::string& seed, int64_t T) {
  const auto& own = records.at({"0.04", seed}).eval.at(T);
  const auto& other = records.at({"0.12", seed}).eval.at(T);
  EXPECT_EQ(own.windows.back(), (256 + T - 1) / T);
  EXPECT_EQ(own.window_document.size(), own.window_loss.size());
  double gap = 0;
  for (size_t w = 0; w < own.window_loss.size(); ++w)
    gap += (own.window_loss[w] - other.window_loss[w]) / double(own.window_loss.size());
  return gap;
}

// `export pairs --format csv`'s row at context T: context, a, b (a the lower mean: the sign of the
// gap is a − b), gap, se, df, lo, hi, p, resolved; the gap and interval of τ 0.04 − τ 0.12 given.
void expect_pairs_row(const std::string& pairs_csv, int64_t T, double mean, double half) {
  const auto at = pairs_csv.find(fmt::format("\n{},", T));
  ASSERT_NE(at, std::string::npos) << pairs_csv;
  std::istringstream row(pairs_csv.substr(at + 1, pairs_csv.find('\n', at + 1) - at - 1));
  std::vector<std::string> f;
  for (std::string x; std::getline(row, x, ',');) f.push_back(x);
  ASSERT_EQ(f.size(), 26u) << pairs_csv;  // 13 columns, then the sign test and seed spreads (docs/export.md)
  EXPECT_EQ(std::stoi(f[13]) + std::stoi(f[14]) + std::stoi(f[15]), 2) << pairs_csv;  // a_higher + b_higher + tied: the seeds
  EXPECT_EQ(f[11], "0.05") << pairs_csv;  // one pair at the context: Holm's threshold is α itself
  EXPECT_EQ(f[12], "Holm's procedure over the 1 pair at 0.05") << pairs_csv;
  const double sign = f[1] == "0.04" ? 1.0 : -1.0;
  EXPECT_NEAR(std::stod(f[3]), sign * mean, 1e-5) << pairs_csv;
  EXPECT_NEAR(std::stod(f[7]) - std::stod(f[6]), 2 * half, 1e-4) << pairs_csv;
  EXPECT_EQ(f[9], (std::abs(mean) > half) ? "1" : "0") << pairs_csv;
}

}  // namespace

TEST(TauCheckCommand, ResumesAfterAStopAndItsVerdictFollowsFromTheRunFiles) {
  test_support::TempDir tmp;
  const fs::path config = tmp.path / "tiny.yaml";
  std::ofstream(config) << "data: {corpus: '" << HARNESS_TEST_DATA << "/sotu'}\n"
                        << "model: {layers: 1, d_model: 32, heads: 2}\n"
                        << "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
                        << "train: {context: 16, batch_size: 4, steps: 120, seed: 0}\n"
                        << "eval: {contexts: [L, 4L], tokens: 256}\n"
                        << "run: {checkpoint_every: 5, log_every: 5, out_dir: '" << (tmp.path / "results").string() << "'}\n";
  const std::vector<std::string> args = {"tau", "check", "--config", config.string(), "--factors", "1,3",
                                         "--seeds", "0,1", "--jobs", "1", "--threads-per-job", "1"};
  const auto loaded = harness::config::load_run_config(config.string());
  harness::sweeps::TauCheckSpec spec;
  spec.factors = {1, 3};
  spec.seeds = {0, 1};
  const auto plan = harness::sweeps::tau_check_sweep(loaded, spec);
  EXPECT_EQ(plan.tau_texts, (std::vector<std::string>{"0.04", "0.12"}));

  // 1. Stopped (SIGTERM, as Slurm or Ctrl-C would) once the first run has checkpointed.
  const pid_t first = test_support::spawn_harness(tmp.path, args, tmp.path / "first.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(plan.path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto sweep = harness::sweeps::load_sweep(plan.path);
  ASSERT_EQ(sweep.runs.size(), 4u);
  // The config's own run is the τ × 1 point: the same run id as training the config itself.
  EXPECT_EQ(sweep.runs[0].id, harness::config::config_hash(loaded.config));
  const std::string run0 = (tmp.path / sweep.runs[0].run_dir).string();
  while (!test_support::checkpointed_mid_run(run0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(::kill(first, SIGTERM), 0);
  EXPECT_EQ(test_support::wait_exit(first), 130) << test_support::read_text(tmp.path / "first.log");

  // 2. The same command again: the run resumes, the other trains, then table and verdict.
  ASSERT_EQ(test_support::wait_exit(test_support::spawn_harness(tmp.path, args, tmp.path / "second.log")), 0) << test_support::read_text(tmp.path / "second.log");
  const std::string worker = test_support::read_text(run0 + "/worker.log");
  EXPECT_NE(worker.find("resuming run"), std::string::npos) << worker;
  const std::string out = test_support::read_text(tmp.path / "second.log");
  const fs::path dir = fs::path(plan.path).parent_path();
  EXPECT_EQ(test_support::read_text(dir / "verdict.txt").empty(), false);
  EXPECT_NE(out.find(test_support::read_text(dir / "verdict.txt")), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir / "table.md"));
  EXPECT_TRUE(fs::exists(dir / "figures" / "tau_check.csv"));
  EXPECT_TRUE(fs::exists(dir / "figures" / "tau_check_best.csv"));

  // 3. The verdict from the run files by hand: per seed, the gap of the mean window losses; their
  //    mean ± t(0.975, 1 degree of freedom) · sd / √2 (the fixture has one validation document, so
  //    no window part; one comparison, so no Bonferroni).
  Records records;
  for (const auto& r : sweep.runs)
    records[{r.setting_text("attention.tau"), r.setting_text("train.seed")}] =
        results::read_run_file((tmp.path / r.run_dir / "run.h5").string());
  // `export pairs` on the same runs: one pair per context, so Holm is the plain interval.
  ASSERT_EQ(test_support::wait_exit(test_support::spawn_harness(
                tmp.path, {"export", "pairs", plan.path, "--format", "csv"}, tmp.path / "pairs.csv")),
            0)
      << test_support::read_text(tmp.path / "pairs.csv");
  const std::string pairs_csv = test_support::read_text(tmp.path / "pairs.csv");
  for (const int64_t T : {16, 64}) {
    const std::vector<double> d = {seed_gap(records, "0", T), seed_gap(records, "1", T)};
    const double mean = (d[0] + d[1]) / 2, half = 12.7062047 * std::abs(d[0] - d[1]) / 2;
    const std::string interval = fmt::format("{:+.4f} [{:+.4f}, {:+.4f}]", mean, mean - half, mean + half);
    const std::string where = fmt::format("T = {} ({}L): ", T, T / 16);
    EXPECT_NE(out.find(where), std::string::npos) << out;
    EXPECT_NE(out.find(interval), std::string::npos) << interval << "\n" << out;
    EXPECT_NE(out.find("2 seeds paired, windows clustered by 1 document\n"), std::string::npos) << out;
    expect_pairs_row(pairs_csv, T, mean, half);
  }
  // 4. Everything done: a third call trains nothing and says the same.
  ASSERT_EQ(test_support::wait_exit(test_support::spawn_harness(tmp.path, args, tmp.path / "third.log")), 0);
  EXPECT_NE(test_support::read_text(tmp.path / "third.log").find("4 of 4 runs done (0 this time)"), std::string::npos)
      << test_support::read_text(tmp.path / "third.log");
  EXPECT_NE(test_support::read_text(tmp.path / "third.log").find(test_support::read_text(dir / "verdict.txt")), std::string::npos);
}

// `tau calibrate` on four seeds of one τ: one pair of arms of two seeds; its false alarm (or not)
// at each context follows from the run files by hand, as in the check above.
TEST(TauCalibrateCommand, CountsIntervalsThatExcludeZeroBetweenArmsOfOneTau) {
  test_support::TempDir tmp;
  const fs::path sweep = tmp.path / "calibration.yaml";
  std::ofstream(sweep) << "name: calibration\nbase:\n"
                       << "  data: {corpus: '" << HARNESS_TEST_DATA << "/sotu', data_dir: '" << (tmp.path / "cache").string() << "'}\n"
                       << "  model: {layers: 1, d_model: 32, heads: 2}\n"
                       << "  attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
                       << "  train: {context: 16, batch_size: 4, steps: 30}\n"
                       << "  eval: {every: 0, contexts: [L], tokens: 256}\n"
                       << "  run: {checkpoint_every: 0, threads: 1, out_dir: '" << (tmp.path / "runs").string() << "'}\n"
                       << "seeds: [3, 4, 5, 6]\n";
  ASSERT_EQ(test_support::wait_exit(test_support::spawn_harness(tmp.path, {"sweep", "run", sweep.string(), "--jobs", "2"},
                                                               tmp.path / "run.log")), 0)
      << test_support::read_text(tmp.path / "run.log");
  ASSERT_EQ(test_support::wait_exit(test_support::spawn_harness(
                tmp.path, {"tau", "calibrate", sweep.string(), "--arm-seeds", "2"}, tmp.path / "calibrate.log")), 0)
      << test_support::read_text(tmp.path / "calibrate.log");
  const std::string out = test_support::read_text(tmp.path / "calibrate.log");
  // Arms {3, 4} and {5, 6}, paired in rank order: d = (mean(3) − mean(5), mean(4) − mean(6)).
  const auto s = harness::sweeps::load_sweep(sweep.string());
  std::map<std::string, double> mean;
  for (const auto& r : s.runs) {
    const auto rec = results::read_run_file((tmp.path / r.run_dir / "run.h5").string());
    const auto& w = rec.eval.at(16).window_loss;
    double m = 0;
    for (const double x : w) m += x / double(w.size());
    mean[r.setting_text("train.seed")] = m;
  }
  const double d0 = mean["3"] - mean["5"], d1 = mean["4"] - mean["6"];
  const double gap = (d0 + d1) / 2, half = 12.7062047 * std::abs(d0 - d1) / 2;
  const int alarm = std::abs(gap) > half ? 1 : 0;
  EXPECT_NE(out.find(fmt::format("| 16 (1L) | 1 | {} | {:.3f} |", alarm, double(alarm))), std::string::npos) << out;
}
