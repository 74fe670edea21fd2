// Figures: CSV beside every figure, gnuplot renders SVG/PNG, and without gnuplot the CSV and the
// script are still written with a notice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "analysis/export/plot.h"
#include "analysis/export/plot_style.h"
#include "attention/attention.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

analysis::Csv sample_csv() {
  analysis::Csv csv;
  csv.text_header = {"method"};
  csv.header = {"x", "y"};
  for (int i = 1; i <= 5; ++i) {
    csv.text_rows.push_back({i % 2 ? "a,b" : "plain"});
    csv.rows.push_back({double(i), i == 3 ? std::numeric_limits<double>::quiet_NaN() : i * 0.5});
  }
  return csv;
}

}  // namespace

TEST(Plot, CsvHasHeaderQuotedTextAndEmptyFieldsForNaN) {
  test_support::TempDir dir;
  analysis::write_csv((dir.path / "f.csv").string(), sample_csv());
  const std::string text = test_support::read_text(dir.path / "f.csv");
  EXPECT_EQ(text,
            "method,x,y\n\"a,b\",1,0.5\nplain,2,1\n\"a,b\",3,\nplain,4,2\n\"a,b\",5,2.5\n");
}

TEST(Plot, GnuplotRendersNonEmptySvgAndPng) {
  if (!analysis::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
  test_support::TempDir dir;
  analysis::write_csv((dir.path / "f.csv").string(), sample_csv());
  const auto r = analysis::render_gnuplot(
      dir.path.string(), "f",
      "set xlabel 'x (tokens)'\nset ylabel 'y (nats)'\nplot 'f.csv' using 2:3 with linespoints title 'y'");
  ASSERT_EQ(r.notice, "");
  ASSERT_EQ(r.images.size(), 2u);
  for (const auto& image : r.images) EXPECT_GT(fs::file_size(image), 1000u) << image;
  EXPECT_NE(test_support::read_text(r.images[0]).find("<svg"), std::string::npos);
}

TEST(Plot, WithoutGnuplotTheScriptIsWrittenWithANotice) {
  test_support::TempDir dir;
  ::setenv("HARNESS_GNUPLOT", "/nonexistent/gnuplot", 1);
  const auto r = analysis::render_gnuplot(dir.path.string(), "f", "plot 'f.csv' using 1:2");
  ::unsetenv("HARNESS_GNUPLOT");
  EXPECT_TRUE(r.images.empty());
  EXPECT_NE(r.notice.find("gnuplot not found"), std::string::npos) << r.notice;
  EXPECT_TRUE(fs::exists(r.script));
  EXPECT_FALSE(fs::exists(dir.path / "f.svg"));
}

// Every preset has a fixed colour of its own, the same whatever order a figure asks in: a preset
// added to the registry without one fails here.
TEST(PlotStyle, EveryPresetHasItsOwnColour) {
  const auto presets = attention::preset_names();
  analysis::Palette forward, backward;
  std::map<std::string, std::string> first;
  for (const auto& p : presets) first[p] = forward.group_color("method=" + p);
  for (auto it = presets.rbegin(); it != presets.rend(); ++it)
    EXPECT_EQ(backward.group_color("method=" + *it), first[*it]) << *it << " has no fixed colour";
  std::set<std::string> distinct;
  for (const auto& [p, c] : first) distinct.insert(c);
  EXPECT_EQ(distinct.size(), presets.size());
}

// The presets' colours are the palette's (plot_style.cpp names each once): a fresh palette hands
// as many groups without a preset the same colours. Rope is blue in every figure (docs/export.md).
TEST(PlotStyle, PresetColoursAreThePalettes) {
  analysis::Palette presets, others;
  std::set<std::string> fixed, handed;
  for (const auto& p : attention::preset_names()) fixed.insert(presets.group_color("method=" + p));
  for (size_t k = 0; k < fixed.size(); ++k) handed.insert(others.group_color("group " + std::to_string(k)));
  EXPECT_EQ(fixed, handed);
  EXPECT_EQ(presets.group_color("method=rope"), "#0072B2");
}
