// Export: tables of synthetic runs with known means and standard errors (Markdown, CSV and LaTeX
// parsed back), missing and unreadable runs reported, and figures as CSV + gnuplot pictures.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "analysis/export_curves.h"
#include "analysis/export/export_table.h"
#include "analysis/export/loss_table.h"
#include "analysis/run_set.h"
#include "analysis/theory/theory_entropy.h"
#include "harness/config/schema.h"
#include "common/errors.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

// A done run of `method` and `seed` with final validation losses `loss` at T = 64, 256, and
// entropy statistics at T = 64.
void write_run(const fs::path& dir, const std::string& method, int seed, std::vector<double> loss,
               const std::string& state = "done", std::vector<double> loss_se = {},
               std::vector<double> window_loss = {}) {
  const auto c = harness::config::load_run_config_text(
      "attention: {method: " + method + "}\ntrain: {context: 64, seed: " + std::to_string(seed) + "}\n", "x.yaml");
  results::RunRecord r;
  r.config["canonical"] = harness::config::canonical_text(c.config, false);
  r.config["hash"] = harness::config::config_hash(c.config);
  r.state = results::run_state_from_string(state);
  for (size_t k = 0; k < loss.size(); ++k) {
    auto& rows = r.eval[64 << (2 * k)];
    rows.step = {100, 200};
    rows.loss = {loss[k] + 1, loss[k]};
    if (!loss_se.empty()) rows.loss_se = {1.0, loss_se[k]};  // the first validation's is not read
    rows.window_loss = window_loss;
    rows.window_fingerprint = window_loss.empty() ? "" : "fnv1a64:test";
    if (k == 1)  // loss by position at 256: 4 buckets, 0.1 apart (the first validation's is not read)
      rows.position_loss = {{0, 0, 0, 0}, {loss[k], loss[k] + 0.1, loss[k] + 0.2, loss[k] + 0.3}};
  }
  results::DatasetGroup g;
  g.arrays["entropy"] = {{1, 1, 2}, {loss[0], loss[0] + 2}, "nats"};  // (E, layers, heads)
  g.integers["band_edges"] = {0, 1, 10, 64};
  g.arrays["band_mass"] = {{1, 1, 2, 3}, {0.5, 0.3, 0.2, 0.1, 0.1, 0.8}, ""};
  r.eval[64].attention = g;
  results::publish(r, (dir / "run.h5").string());
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::stringstream in(line);
  while (std::getline(in, field, sep)) {
    while (!field.empty() && field.front() == ' ') field.erase(field.begin());
    while (!field.empty() && field.back() == ' ') field.pop_back();
    out.push_back(field);
  }
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

struct Runs {
  test_support::TempDir tmp;
  Runs() {
    // rope: 1.0, 1.2, 1.4 at 64 (mean 1.2, se 0.2/√3); 2.0, 2.0, 2.3 at 256.
    write_run(tmp.path / "r0", "rope", 0, {1.0, 2.0});
    write_run(tmp.path / "r1", "rope", 1, {1.2, 2.0});
    write_run(tmp.path / "r2", "rope", 2, {1.4, 2.3});
    // alibi: 1.1, 1.3 at 64; 1.5, 1.7 at 256; a third seed still running.
    write_run(tmp.path / "a0", "alibi", 0, {1.1, 1.5});
    write_run(tmp.path / "a1", "alibi", 1, {1.3, 1.7});
    write_run(tmp.path / "a2", "alibi", 2, {9, 9}, "running");
    // A truncated file.
    fs::create_directories(tmp.path / "broken");
    std::ofstream(tmp.path / "broken" / "run.h5") << "\x89HDF\r\n\x1a\n truncated";
  }
};

}  // namespace

TEST(ExportTable, MeansStandardErrorsAndSeedsInEveryFormat) {
  Runs runs;
  const auto set = analysis::load_run_set(runs.tmp.path.string());
  ASSERT_EQ(set.warnings.size(), 1u);
  EXPECT_NE(set.warnings[0].find("broken/run.h5"), std::string::npos) << set.warnings[0];
  EXPECT_EQ(set.keys, (std::vector<std::string>{"attention.method", "train.seed"}));
  const auto t = analysis::build_table(set, {});
  ASSERT_EQ(t.rows.size(), 2u);
  ASSERT_EQ(t.col_names, (std::vector<std::string>{"64 (1L)", "256 (4L)"}));
  ASSERT_EQ(t.missing.size(), 1u);
  EXPECT_NE(t.missing[0].find("running"), std::string::npos);

  // CSV, parsed back.
  const auto csv = lines(analysis::format_table(t, "csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(split(csv[0], ','), (std::vector<std::string>{"attention.method", "64 (1L) mean", "64 (1L) se",
                                                         "64 (1L) n", "256 (4L) mean", "256 (4L) se", "256 (4L) n"}));
  for (const auto& line : csv) EXPECT_EQ(split(line, ',').size(), 7u);
  const auto row_of = [&](const std::string& method) {
    for (const auto& line : csv)
      if (split(line, ',')[0] == method) return split(line, ',');
    return std::vector<std::string>{};
  };
  const auto rope = row_of("rope"), alibi = row_of("alibi");
  EXPECT_NEAR(std::stod(rope[1]), 1.2, 1e-9);
  EXPECT_NEAR(std::stod(rope[2]), 0.2 / std::sqrt(3.0), 1e-9);
  EXPECT_EQ(rope[3], "3");
  EXPECT_NEAR(std::stod(rope[4]), 2.1, 1e-9);
  EXPECT_NEAR(std::stod(rope[5]), std::sqrt(0.03) / std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(std::stod(alibi[1]), 1.2, 1e-9);
  EXPECT_NEAR(std::stod(alibi[2]), std::sqrt(0.02) / std::sqrt(2.0), 1e-9);
  EXPECT_EQ(alibi[3], "2");

  // Markdown: a header, a rule, a row per method; the best of each column in bold.
  const auto md = lines(analysis::format_table(t, "md"));
  EXPECT_EQ(split(md[0], '|'), (std::vector<std::string>{"", "attention.method", "64 (1L)", "256 (4L)"}));
  std::vector<std::string> md_alibi;
  for (const auto& l : md)
    if (split(l, '|').size() > 1 && split(l, '|')[1] == "alibi") md_alibi = split(l, '|');
  ASSERT_EQ(md_alibi.size(), 4u);
  EXPECT_EQ(md_alibi[3], "**1.6000 ± 0.1000 (2)**");  // 256: alibi 1.6 < rope 2.1
  const std::string md_text = analysis::format_table(t, "md");
  EXPECT_NE(md_text.find("missing: 1 run not done"), std::string::npos);

  // LaTeX: rows end in \\, cells split by &.
  const auto tex = lines(analysis::format_table(t, "tex"));
  size_t data_rows = 0;
  for (const auto& l : tex)
    if (l.rfind("%", 0) != 0 && l.find("\\pm") != std::string::npos) {
      ++data_rows;
      EXPECT_EQ(split(l.substr(0, l.find("\\\\")), '&').size(), 3u) << l;
    }
  EXPECT_EQ(data_rows, 2u);
}

// --window-se: a loss cell also shows the runs' mean standard error over validation windows (the
// last validation's), in Markdown and as a CSV column; a run file without it shows "?".
TEST(ExportTable, WindowStandardErrorsBesideTheSeeds) {
  test_support::TempDir tmp;
  write_run(tmp.path / "r0", "rope", 0, {1.0, 2.0}, "done", {0.01, 0.05}, {0.5, 1.5});
  write_run(tmp.path / "r1", "rope", 1, {1.2, 2.0}, "done", {0.03, 0.07}, {0.7, 2.5});
  write_run(tmp.path / "a0", "alibi", 0, {1.1, 1.5});
  analysis::TableOptions o;
  o.window_se = true;
  const auto t = analysis::build_table(analysis::load_run_set(tmp.path.string()), o);
  const auto md = analysis::format_table(t, "md");
  EXPECT_NE(md.find("1.1000 ± 0.1000 (2; windows ± 0.0200)"), std::string::npos) << md;
  EXPECT_NE(md.find("2.0000 ± 0.0000 (2; windows ± 0.0600)"), std::string::npos) << md;
  EXPECT_NE(md.find("1.1000 (1; windows ?)"), std::string::npos) << md;
  // Each window's loss for a one-run cell; none for two seeds or a run file without them.
  for (size_t r = 0; r < t.rows.size(); ++r)
    EXPECT_TRUE(t.cells[r][0]->windows.loss.empty()) << t.rows[r][0];
  write_run(tmp.path / "k0", "kerple", 0, {1.3, 1.6}, "done", {0.02, 0.04}, {1.25, 1.35});
  const auto one = analysis::build_table(analysis::load_run_set(tmp.path.string()), o);
  for (size_t r = 0; r < one.rows.size(); ++r) {
    if (one.rows[r][0] == "kerple") {
      EXPECT_EQ(one.cells[r][0]->windows.loss, (std::vector<double>{1.25, 1.35}));
      EXPECT_EQ(one.cells[r][0]->windows.fingerprint, "fnv1a64:test");
    }
  }
  const auto csv = lines(analysis::format_table(t, "csv"));
  EXPECT_EQ(split(csv[0], ',')[4], "64 (1L) window_se");
  for (const auto& line : csv) EXPECT_EQ(std::count(line.begin(), line.end(), ','), 8) << line;  // 9 fields
  o.metric = "attention/entropy";
  EXPECT_THROW(analysis::build_table(analysis::load_run_set(tmp.path.string()), o), harness::InputError);
}

TEST(ExportTable, TiesAreAllBestAndAColumnOfEqualValuesHasNone) {
  test_support::TempDir tmp;
  write_run(tmp.path / "r", "rope", 0, {1.0, 2.0});
  write_run(tmp.path / "a", "alibi", 0, {1.0, 3.0});
  write_run(tmp.path / "n", "nope", 0, {1.0, 2.0});
  const auto t = analysis::build_table(analysis::load_run_set(tmp.path.string()), {});
  ASSERT_EQ(t.rows.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_FALSE(t.best[r][0]) << "64: every method 1.0";
    EXPECT_EQ(t.best[r][1], t.cells[r][1]->mean == 2.0) << "256: rope and nope 2.0, alibi 3.0";
  }
}

TEST(ExportTable, MetricsRowsAndColumnsAreChecked) {
  Runs runs;
  const auto set = analysis::load_run_set(runs.tmp.path.string());
  analysis::TableOptions o;
  o.metric = "attention/entropy";  // mean over layers and heads: loss[0] + 1
  const auto t = analysis::build_table(set, o);
  ASSERT_EQ(t.col_names, (std::vector<std::string>{"64 (1L)"}));
  for (size_t r = 0; r < t.rows.size(); ++r)
    EXPECT_NEAR(t.cells[r][0]->mean, 1.2 + 1, 1e-9);
  o.metric = "attention/band_mass@10";  // third band: (0.2 + 0.8) / 2
  EXPECT_NEAR(analysis::build_table(set, o).cells[0][0]->mean, 0.5, 1e-12);
  o.metric = "attention/band_mass";
  EXPECT_THROW(analysis::build_table(set, o), harness::InputError);
  o.metric = "entropy";
  EXPECT_THROW(analysis::build_table(set, o), harness::InputError);
  analysis::TableOptions swapped;  // methods as columns, contexts as rows
  swapped.rows = {"context"};
  swapped.cols = {"attention.method"};
  const auto s = analysis::build_table(set, swapped);
  EXPECT_EQ(s.rows, (std::vector<std::vector<std::string>>{{"64"}, {"256"}}));
  analysis::TableOptions unknown;
  unknown.rows = {"attention.tau"};
  EXPECT_THROW(analysis::build_table(set, unknown), harness::InputError);
}

TEST(ExportCurves, EveryFigureHasACsvWithAHeaderAndItsPictures) {
  Runs runs;
  test_support::TempDir out;
  const auto result = analysis::export_curves(runs.tmp.path.string(), {out.path.string(), ""});
  ASSERT_FALSE(result.figures.empty());
  bool entropy = false;
  for (const auto& f : result.figures) {
    ASSERT_FALSE(f.csv.empty()) << f.name;
    for (const auto& csv : f.csv) {
      const auto rows = lines(test_support::read_text(csv));
      ASSERT_GE(rows.size(), 2u) << csv;
      const size_t columns = split(rows[0], ',').size();
      for (const auto& r : rows) EXPECT_EQ(split(r + " ", ',').size(), columns) << csv << ": " << r;
    }
    if (f.name == "entropy_vs_context") entropy = true;
    if (analysis::gnuplot_available()) {
      ASSERT_EQ(f.render.notice, "") << f.name;
      for (const auto& image : f.render.images) EXPECT_GT(fs::file_size(image), 1000u) << image;
    }
  }
  EXPECT_TRUE(entropy);
}

// Loss by position at the longest context: bucket b of 4 at 256 = 4L is centred at (b + 0.5) L.
TEST(ExportCurves, LossByPositionAtTheLongestContextInUnitsOfL) {
  Runs runs;
  test_support::TempDir out;
  analysis::export_curves(runs.tmp.path.string(), {out.path.string(), ""});
  const auto rows = lines(test_support::read_text(out.path / "position_loss_T256.csv"));
  ASSERT_EQ(rows.size(), 5u);
  const auto header = split(rows[0], ',');
  const size_t rope = size_t(std::find(header.begin(), header.end(), "rope") - header.begin());
  ASSERT_LT(rope, header.size()) << rows[0];
  for (size_t b = 0; b < 4; ++b) {
    const auto row = split(rows[b + 1], ',');
    EXPECT_NEAR(std::stod(row[0]), double(b) + 0.5, 1e-12);
    EXPECT_NEAR(std::stod(row[rope]), 2.1 + 0.1 * double(b), 1e-9);  // rope's 2.0, 2.0, 2.3 + 0.1 b
  }
}

TEST(ExportCurves, WithoutGnuplotTheCsvsAreStillWritten) {
  Runs runs;
  test_support::TempDir out;
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);
  const auto result = analysis::export_curves(runs.tmp.path.string(), {out.path.string(), ""});
  ::unsetenv("HARNESS_GNUPLOT");
  ASSERT_FALSE(result.figures.empty());
  for (const auto& f : result.figures) {
    EXPECT_TRUE(f.render.images.empty());
    EXPECT_NE(f.render.notice.find("gnuplot not found"), std::string::npos);
    for (const auto& csv : f.csv) EXPECT_TRUE(fs::exists(csv));
  }
}

namespace {

// A done run of si+p-rope at `tau` (or of rope, which does not read τ) with a final loss `loss`.
void write_tau_run(const fs::path& dir, const std::string& method, const std::string& tau, double loss,
                   const std::string& state = "done") {
  const auto c = harness::config::load_run_config_text(
      "attention: {method: " + method + ", tau: " + tau + "}\ntrain: {context: 64}\n", "x.yaml");
  results::RunRecord r;
  r.config["canonical"] = harness::config::canonical_text(c.config, false);
  r.config["hash"] = harness::config::config_hash(c.config);
  r.state = results::run_state_from_string(state);
  r.eval[64].step = {100};
  r.eval[64].loss = {loss};
  results::publish(r, (dir / "run.h5").string());
}

}  // namespace

TEST(ExportTable, ADirectorysRowsFollowTheVaryingKeysNotTheRunIds) {
  test_support::TempDir tmp;
  // Directory names in the opposite order of τ, and τ = 10 after τ = 2 only when read as numbers.
  write_tau_run(tmp.path / "a", "si+p-rope", "10", 1.3);
  write_tau_run(tmp.path / "b", "si+p-rope", "2", 1.2);
  write_tau_run(tmp.path / "c", "si+p-rope", "0.5", 1.1);
  const auto t = analysis::build_table(analysis::load_run_set(tmp.path.string()), {});
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.row_keys, (std::vector<std::string>{"attention.tau"}));
  EXPECT_EQ(std::stod(t.rows[0][0]), 0.5);
  EXPECT_EQ(std::stod(t.rows[1][0]), 2.0);
  EXPECT_EQ(std::stod(t.rows[2][0]), 10.0);
}

TEST(ExportTable, NotApplicableIsEmptyInCsvAndTheFooterClaimsBoldOnlyWhenThereIsSome) {
  test_support::TempDir tmp;
  write_tau_run(tmp.path / "si1", "si+p-rope", "1", 1.1);
  write_tau_run(tmp.path / "si2", "si+p-rope", "2", 1.2);
  write_tau_run(tmp.path / "rope", "rope", "10", 1.5);  // τ not read: "–" in the table
  const auto set = analysis::load_run_set(tmp.path.string());
  const auto t = analysis::build_table(set, {});
  const auto csv = lines(analysis::format_table(t, "csv"));
  ASSERT_EQ(csv.size(), 4u);
  bool saw_rope = false;
  for (const auto& line : csv) {
    EXPECT_EQ(line.find("–"), std::string::npos) << line;
    const auto fields = split(line, ',');
    if (!fields.empty() && fields[0] == "rope") {  // attention.method, then attention.tau
      saw_rope = true;
      ASSERT_GT(fields.size(), 1u);
      EXPECT_EQ(fields[1], "") << line;  // τ of a rope run: not applicable
    }
  }
  EXPECT_TRUE(saw_rope);
  const std::string md = analysis::format_table(t, "md");
  EXPECT_NE(md.find("**1.1000 (1)**"), std::string::npos) << md;
  EXPECT_NE(md.find("** best per column"), std::string::npos) << md;
  analysis::TableOptions none;
  none.best = "none";
  const auto plain = analysis::build_table(set, none);
  EXPECT_EQ(analysis::format_table(plain, "md").find("best per column"), std::string::npos);
  EXPECT_EQ(analysis::format_table(plain, "tex").find("best per column"), std::string::npos);
}

TEST(ExportTable, NoFinishedRunIsAnErrorNotAnEmptyTable) {
  test_support::TempDir tmp;
  write_tau_run(tmp.path / "r", "si+p-rope", "1", 1.1, "interrupted");
  try {
    analysis::build_table(analysis::load_run_set(tmp.path.string()), {});
    FAIL() << "a table with no row was built";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no finished run matches"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos) << e.what();
  }
  // A done run that lacks the metric is the same error, saying so.
  write_tau_run(tmp.path / "d", "si+p-rope", "2", 1.2);
  analysis::TableOptions o;
  o.metric = "needle/accuracy";
  try {
    analysis::build_table(analysis::load_run_set(tmp.path.string()), o);
    FAIL() << "a table with no row was built";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hold no needle/accuracy"), std::string::npos) << e.what();
  }
}

TEST(ExportTable, AMisshapenBandMetricSuggestsTheRightForm) {
  try {
    analysis::parse_metric("attention/band_mass@10x2");
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("e.g. attention/band_mass@10 "), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("@10x2@"), std::string::npos) << e.what();
  }
}

namespace {

// Every titled plot clause of a gnuplot script, as "colour dash point style": two equal ones
// would be two series a reader cannot tell apart.
std::vector<std::string> looks(const std::string& script) {
  std::vector<std::string> out;
  static const std::regex clause(R"(with (\w+)[^,\n]*?lc rgb '(#[0-9A-Fa-f]{6})'(?: dt (\d+))?(?: pt (\d+))?[^,\n]*?title)");
  for (auto it = std::sregex_iterator(script.begin(), script.end(), clause); it != std::sregex_iterator(); ++it)
    out.push_back(fmt::format("{} {} {} {}", (*it)[2].str(), (*it)[3].str(), (*it)[4].str(), (*it)[1].str()));
  return out;
}

// The title of a script's figure: its multiplot's (small panels) or its `set title`.
std::string title_of(const std::string& script) {
  const auto multi = script.find("set multiplot layout");
  if (multi != std::string::npos) return script.substr(multi, script.find('\n', multi) - multi);
  const auto at = script.find("set title ");
  return at == std::string::npos ? "" : script.substr(at + 10, script.find('\n', at) - at - 10);
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

void expect_distinct_looks(const std::string& dir, const std::string& name) {
  const std::string script = test_support::read_text(fs::path(dir) / (name + ".gp"));
  const auto l = looks(script);
  EXPECT_FALSE(l.empty()) << name;
  std::set<std::string> seen;
  for (const auto& look : l) EXPECT_TRUE(seen.insert(look).second) << name << ": two series look alike: " << look;
}

}  // namespace

TEST(ExportCurves, EverySeriesLooksDifferentAndTitlesSayTheSeeds) {
  Runs runs;
  test_support::TempDir out;
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);  // the scripts are what is checked
  const auto result = analysis::export_curves(runs.tmp.path.string(), {out.path.string(), ""});
  ::unsetenv("HARNESS_GNUPLOT");
  ASSERT_GE(result.figures.size(), 3u);
  for (const auto& f : result.figures) {
    expect_distinct_looks(out.path.string(), f.name);
    const std::string title = title_of(test_support::read_text(out.path / (f.name + ".gp")));
    EXPECT_NE(title.find("seed"), std::string::npos) << f.name << ": " << title;
  }
  // rope has 3 seeds, alibi 2 done: "± s.e." is said, with the count.
  EXPECT_NE(title_of(test_support::read_text(out.path / "entropy_vs_context.gp")).find("mean ± s.e. over 3 seeds"), std::string::npos);
  // rope keeps its colour from figure to figure.
  const std::string a = test_support::read_text(out.path / "entropy_vs_context.gp"), b = test_support::read_text(out.path / "loss_vs_step_T64.gp");
  EXPECT_NE(a.find("lc rgb '#0072B2'"), std::string::npos);
  EXPECT_NE(b.find("lc rgb '#0072B2'"), std::string::npos);
}

TEST(ExportCurves, TheoryFiguresDrawTheirStandardErrorsAndTheirTrials) {
  test_support::TempDir tmp;
  analysis::EntropyTheoryOptions o;
  o.contexts = {100, 1000};
  o.trials = 16;
  o.taus = {0.16, 10};
  o.range_keys = 1000;
  const auto theory = analysis::entropy_theory(o);
  const std::string file = (tmp.path / "theory.h5").string();
  analysis::write_entropy_theory(file, o, theory);
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);
  const auto result = analysis::export_curves(file, {(tmp.path / "fig").string(), ""});
  ::unsetenv("HARNESS_GNUPLOT");
  ASSERT_FALSE(result.figures.empty());
  for (const auto& f : result.figures) {
    expect_distinct_looks((tmp.path / "fig").string(), f.name);
    const std::string script = test_support::read_text(tmp.path / "fig" / (f.name + ".gp"));
    EXPECT_NE(title_of(script).find("16 trials"), std::string::npos) << f.name;
    EXPECT_NE(script.find("yerror"), std::string::npos) << f.name << ": no error bars";
  }
  // The se columns are filled from the file's *_se datasets.
  const auto csv = lines(test_support::read_text(tmp.path / "fig" / "theory_entropy_vs_context.csv"));
  ASSERT_EQ(csv.size(), 3u);
  const auto head = split(csv[0], ',');
  const auto row = split(csv[1], ',');
  ASSERT_EQ(head.size(), row.size());
  for (size_t k = 0; k < head.size(); ++k)
    if (head[k].size() > 3 && head[k].substr(head[k].size() - 3) == " se") {
      ASSERT_FALSE(row[k].empty()) << head[k];
      EXPECT_GT(std::stod(row[k]), 0.0) << head[k];
    }

  // Overlaid on runs of another τ: the theory's τ is checked and the mismatch said.
  Runs runs;
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);
  const auto over = analysis::export_curves(runs.tmp.path.string(), {(tmp.path / "over").string(), file});
  ::unsetenv("HARNESS_GNUPLOT");
  bool said = false;
  for (const auto& note : over.notes) said = said || note.find("has no run with that τ") != std::string::npos;
  EXPECT_TRUE(said);
  const std::string overlay = test_support::read_text(tmp.path / "over" / "entropy_vs_context.gp");
  EXPECT_EQ(overlay.find("si τ=10"), std::string::npos) << "theory of a τ no run has is not drawn";
  EXPECT_NE(test_support::read_text(tmp.path / "over" / "entropy_vs_context_theory.csv").find("theory standard"), std::string::npos);
}

namespace {

// A done run with everything a figure reads: losses at 64 and 256, attention statistics (entropy,
// recent mass, bands, ranges at Δ = 2 and 10) at both, and an analysis with QQ quantiles.
void write_rich_run(const fs::path& dir, const std::string& method, const std::string& tau, int seed, double loss) {
  const auto c = harness::config::load_run_config_text(
      "attention: {method: " + method + ", tau: " + tau + "}\nmodel: {layers: 2}\ntrain: {context: 64, seed: " +
          std::to_string(seed) + "}\n", "x.yaml");
  results::RunRecord r;
  r.config["canonical"] = harness::config::canonical_text(c.config, false);
  r.config["hash"] = harness::config::config_hash(c.config);
  r.state = results::RunState::kDone;
  for (const int64_t T : {64, 256}) {
    auto& rows = r.eval[T];
    rows.step = {100, 200};
    rows.loss = {loss + 1, loss + double(T) / 1000};
    results::DatasetGroup g;
    g.arrays["entropy"] = {{1, 2, 1}, {loss, loss + 0.5}, "nats"};
    g.arrays["recent_mass"] = {{1, 2, 1}, {0.5, 0.6}, ""};
    g.integers["band_edges"] = {0, 1, 10, T};
    g.arrays["band_mass"] = {{1, 2, 1, 3}, {0.2, 0.3, 0.5, 0.1, 0.2, 0.7}, ""};
    g.integers["range_start"] = {1, 2, 3, 1, 2};
    g.integers["range_ratio"] = {2, 2, 2, 10, 10};
    g.arrays["range_entropy"] = {{1, 2, 1, 5}, {0.1, 0.5, 0.7, 1.5, 2.0, 0.2, 0.6, 0.8, 1.6, 2.1}, "nats"};
    r.eval[T].attention = g;
  }
  results::DatasetGroup a;
  std::vector<double> normal, score;
  for (int k = 0; k < 99; ++k) normal.push_back((k - 49) / 20.0);
  for (int layer = 0; layer < 2; ++layer)
    for (int k = 0; k < 99; ++k) score.push_back(normal[size_t(k)] * (1 + 0.1 * layer));
  a.arrays["qq_normal"] = {{99}, normal, ""};
  a.arrays["qq_score"] = {{2, 99}, score, ""};
  a.arrays["entropy"] = {{2, 1}, {loss, loss}, "nats"};
  r.analysis[256] = a;
  results::publish(r, (dir / "run.h5").string());
}

}  // namespace

TEST(ExportCurves, EveryFigureKindOfATauSweepHasDistinctSeriesAndSaysItsSeeds) {
  test_support::TempDir runs, out;
  for (const int seed : {0, 1}) {
    write_rich_run(runs.path / fmt::format("a{}", seed), "si+p-rope", "L/400", seed, 1.2 + 0.01 * seed);
    write_rich_run(runs.path / fmt::format("b{}", seed), "si+p-rope", "L/40", seed, 1.3 + 0.01 * seed);
    write_rich_run(runs.path / fmt::format("r{}", seed), "rope", "10", seed, 1.25 + 0.01 * seed);
  }
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);
  const auto result = analysis::export_curves(runs.path.string(), {out.path.string(), ""});
  ::unsetenv("HARNESS_GNUPLOT");
  std::set<std::string> kinds;
  for (const auto& f : result.figures) {
    kinds.insert(f.name.substr(0, f.name.find("_T")));
    expect_distinct_looks(out.path.string(), f.name);
    const std::string title = title_of(test_support::read_text(out.path / (f.name + ".gp")));
    EXPECT_NE(title.find("seeds"), std::string::npos) << f.name << ": " << title;
  }
  for (const char* kind : {"loss_vs_step", "loss_vs_tau", "entropy_vs_context", "recent_mass_vs_context", "band_mass",
                           "range_entropy", "qq"})
    EXPECT_TRUE(kinds.count(kind)) << kind;
  // Two seeds: error bars from the se columns, and the titles say so.
  EXPECT_NE(test_support::read_text(out.path / "loss_vs_tau.gp").find("yerrorlines"), std::string::npos);
  EXPECT_NE(title_of(test_support::read_text(out.path / "entropy_vs_context.gp")).find("mean ± s.e. over 2 seeds"), std::string::npos);
  // rope has no τ: a horizontal line per context in loss_vs_tau, in rope's colour.
  EXPECT_NE(test_support::read_text(out.path / "loss_vs_tau.gp").find("with lines lc rgb '#0072B2'"), std::string::npos);
  // Ranges: one panel per Δ.
  EXPECT_EQ(count_of(test_support::read_text(out.path / "range_entropy_T256.gp"), "set title 'Δ = "), 2u);
}

TEST(ExportCurves, LossAgainstStepAveragesSeedsWhenALinePerRunWouldBeUnreadable) {
  // 7 τ × 2 seeds = 14 runs: more lines than kMaxRunLines, so a line per τ, mean ± s.e.
  test_support::TempDir runs, out;
  const std::vector<std::string> taus = {"L/4", "L/40", "L/400", "L/4000", "1", "10", "100"};
  for (size_t i = 0; i < taus.size(); ++i)
    for (const int seed : {0, 1})
      write_rich_run(runs.path / fmt::format("r{}-{}", i, seed), "si+p-rope", taus[i], seed, 1.2 + 0.01 * double(i));
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);
  analysis::export_curves(runs.path.string(), {out.path.string(), ""});
  ::unsetenv("HARNESS_GNUPLOT");
  const std::string gp = test_support::read_text(out.path / "loss_vs_step_T64.gp");
  EXPECT_NE(title_of(gp).find("mean ± s.e. over 2 seeds"), std::string::npos) << title_of(gp);
  EXPECT_NE(gp.find("yerrorlines"), std::string::npos);
  EXPECT_EQ(gp.find("seed="), std::string::npos) << "no line per seed";
  expect_distinct_looks(out.path.string(), "loss_vs_step_T64");
}
