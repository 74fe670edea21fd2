// Export: tables of synthetic runs with known means and standard errors (Markdown, CSV and LaTeX
// parsed back), missing and unreadable runs reported, and figures as CSV + gnuplot pictures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/export_curves.h"
#include "analysis/export_table.h"
#include "analysis/run_set.h"
#include "harness/config/schema.h"
#include "harness/util/errors.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

// A done run of `method` and `seed` with final validation losses `loss` at T = 64, 256, and
// entropy statistics at T = 64.
void write_run(const fs::path& dir, const std::string& method, int seed, std::vector<double> loss,
               const std::string& state = "done") {
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
      const auto rows = lines([&] {
        std::ifstream in(csv);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
      }());
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
