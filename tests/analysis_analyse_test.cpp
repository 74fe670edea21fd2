// Attention statistics end to end: every validation writes them to run.h5; `harness analyse`
// recomputes them for the final model at any context, consistent with the validation's, skips
// what it has done, and rejects bad input with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "analysis/analyse_run.h"
#include "harness/config/schema.h"
#include "harness/train/trainer.h"
#include "common/errors.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

harness::config::LoadedConfig tiny(const fs::path& cache, const std::string& method, const std::string& eval_extra = "") {
  const std::string yaml = std::string("data: {corpus: '") + HARNESS_TEST_DATA +
                           "/sotu', data_dir: '" + cache.string() + "'}\n" +
                           "model: {layers: 2, d_model: 32, heads: 2}\n"
                           "attention: {method: " + method + ", tau: L/400, p_rope_base: L/4}\n"
                           "train: {context: 32, batch_size: 8, steps: 10, seed: 3}\n"
                           "eval: {contexts: [L, 4L], windows: 4, every: 5, attention_queries: 8" + eval_extra + "}\n"
                           "run: {threads: 2, checkpoint_every: 5}\n";
  return harness::config::load_run_config_text(yaml, "tiny.yaml", "tiny");
}

fs::path train(const harness::config::LoadedConfig& c, const fs::path& dir) {
  harness::train::TrainOptions o;
  o.run_dir = dir.string();
  o.progress_bar = 0;
  EXPECT_EQ(harness::train::train(c, o).state, results::RunState::kDone);
  return dir;
}

double last(const results::Array& a, size_t index_in_row) {
  return a.values[(a.rows() - 1) * a.row_size() + index_in_row];
}

}  // namespace

TEST(AttentionStatsInRuns, EveryValidationWritesThem) {
  test_support::TempDir tmp;
  const auto dir = train(tiny(tmp.path / "cache", "si+p-rope"), tmp.path / "run");
  const auto r = results::read_run_file((dir / "run.h5").string());
  for (const int64_t T : {32, 128}) {
    const auto& g = r.eval.at(T).attention;
    ASSERT_FALSE(g.empty()) << T;
    const auto& entropy = g.arrays.at("entropy");
    EXPECT_EQ(entropy.shape, (std::vector<int64_t>{2, 2, 2}));  // evaluations × layers × heads
    const auto& edges = g.integers.at("band_edges");
    EXPECT_EQ(edges.front(), 0);
    EXPECT_EQ(edges.back(), T);
    const auto& band_mass = g.arrays.at("band_mass");
    const size_t nb = edges.size() - 1;
    EXPECT_EQ(band_mass.shape, (std::vector<int64_t>{2, 2, 2, int64_t(nb)}));
    for (size_t lh = 0; lh < 4; ++lh) {  // layer × head of the last evaluation
      double total = 0;
      for (size_t b = 0; b < nb; ++b) total += last(band_mass, lh * nb + b);
      EXPECT_NEAR(total, 1.0, 1e-9);
      EXPECT_GT(last(entropy, lh), 0.0);
      EXPECT_LE(last(entropy, lh), std::log(double(T)) + 1e-9);
    }
    // Numbers stored as numbers (h5py users compare them), not as text.
    EXPECT_EQ(std::get<int64_t>(g.attributes.at("queries_per_window")), 8);
    EXPECT_EQ(std::get<int64_t>(g.attributes.at("query_rows")), 32);  // 4 windows × 8
    EXPECT_EQ(std::get<int64_t>(g.attributes.at("context")), T);
  }
}

TEST(AttentionStatsInRuns, AnalyseMatchesTheLastValidationAndSkipsWhatItHasDone) {
  test_support::TempDir tmp;
  const auto dir = train(tiny(tmp.path / "cache", "alibi"), tmp.path / "run");
  std::vector<std::string> lines;
  analysis::AnalyseOptions o;  // the run's contexts, windows and queries
  const auto first = analysis::analyse_run(dir.string(), o, [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(first.analysed, (std::vector<int64_t>{32, 128}));
  const auto r = results::read_run_file((dir / "run.h5").string());
  for (const int64_t T : {32, 128}) {
    const auto& a = r.analysis.at(T);
    // The same model, windows and rows as the final validation: the same numbers.
    EXPECT_NEAR(a.arrays.at("loss").values[0], r.eval.at(T).loss.back(), 1e-6);
    const auto& e = r.eval.at(T).attention.arrays.at("entropy");
    for (size_t lh = 0; lh < 4; ++lh) EXPECT_NEAR(a.arrays.at("entropy").values[lh], last(e, lh), 1e-9);
    // Appendix J: raw-score moments and QQ quantiles per layer.
    EXPECT_EQ(a.arrays.at("score_std").shape, (std::vector<int64_t>{2}));
    EXPECT_GT(a.arrays.at("score_std").values[0], 0.0);
    EXPECT_EQ(a.arrays.at("qq_score").shape, (std::vector<int64_t>{2, 99}));
    EXPECT_NEAR(a.arrays.at("qq_normal").values[49], 0.0, 1e-12);  // the median
    // The settings as numbers, not text.
    EXPECT_EQ(std::get<int64_t>(a.attributes.at("checkpoint_step")), 10);
    EXPECT_GE(std::get<double>(a.attributes.at("seconds")), 0.0);
  }
  // The validation history survives the analysis.
  EXPECT_EQ(r.eval.at(32).loss.size(), 2u);
  const auto again = analysis::analyse_run(dir.string(), o);
  EXPECT_TRUE(again.analysed.empty());
  EXPECT_EQ(again.skipped, (std::vector<int64_t>{32, 128}));
  // 16L: a new context, added beside the others.
  o.contexts = {harness::config::ContextValue::times_l(16)};
  EXPECT_EQ(analysis::analyse_run(dir.string(), o).analysed, (std::vector<int64_t>{512}));
  EXPECT_EQ(results::read_run_file((dir / "run.h5").string()).analysis.size(), 3u);
}

// eval.same_text: validation at L is cut from the 4L windows (4 windows → 16 chunks), and analyse
// cuts them the same way: the same windows (fingerprint) and losses as the final validation.
TEST(AttentionStatsInRuns, AnalyseOfASameTextRunScoresTheSameChunks) {
  test_support::TempDir tmp;
  const auto dir = train(tiny(tmp.path / "cache", "rope", ", same_text: true"), tmp.path / "run");
  analysis::analyse_run(dir.string(), {});
  const auto r = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(r.eval.at(32).window_loss.size(), 16u);
  EXPECT_EQ(r.eval.at(128).window_loss.size(), 4u);
  for (const int64_t T : {32, 128}) {
    const auto& a = r.analysis.at(T);
    EXPECT_EQ(std::get<std::string>(a.attributes.at("window_fingerprint")), r.eval.at(T).window_fingerprint) << T;
    EXPECT_NEAR(a.arrays.at("loss").values[0], r.eval.at(T).loss.back(), 1e-6) << T;
    EXPECT_EQ(a.arrays.at("window_loss").values.size(), r.eval.at(T).window_loss.size()) << T;
  }
  // L alone: still cut from the run's 4L windows, so the same chunks (and already analysed).
  analysis::AnalyseOptions o;
  o.contexts = {harness::config::ContextValue::times_l(1)};
  EXPECT_EQ(analysis::analyse_run(dir.string(), o).skipped, (std::vector<int64_t>{32}));
  // 8L: the chunks at L come from 8L windows now, other text: analysed again, and 3L cannot be cut.
  o.contexts = {harness::config::ContextValue::times_l(1), harness::config::ContextValue::times_l(8)};
  EXPECT_EQ(analysis::analyse_run(dir.string(), o).analysed, (std::vector<int64_t>{32, 256}));
  o.contexts = {harness::config::ContextValue::times_l(3)};
  EXPECT_THROW(analysis::analyse_run(dir.string(), o), harness::InputError);
}

TEST(AttentionStatsInRuns, BadInputIsAnErrorWithNothingWritten) {
  test_support::TempDir tmp;
  const auto dir = train(tiny(tmp.path / "cache", "rope"), tmp.path / "run");
  const auto before = fs::last_write_time(dir / "run.h5");
  analysis::AnalyseOptions o;
  o.contexts = {harness::config::ContextValue::absolute(double(int64_t(1) << 21))};  // > 2^20
  EXPECT_THROW(analysis::analyse_run(dir.string(), o), harness::InputError);
  o.contexts = {harness::config::ContextValue::absolute(1e6)};  // no validation document that long
  EXPECT_THROW(analysis::analyse_run(dir.string(), o), harness::InputError);
  EXPECT_EQ(fs::last_write_time(dir / "run.h5"), before);
  EXPECT_TRUE(results::read_run_file((dir / "run.h5").string()).analysis.empty());
  EXPECT_THROW(analysis::analyse_run((tmp.path / "missing").string(), {}), harness::InputError);
}
