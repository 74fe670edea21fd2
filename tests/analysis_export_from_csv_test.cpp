// Exports rendered again from their committed CSV (analysis/export/from_csv.h), the results pages'
// material: a pairs CSV whose numbers are worked by hand here (Student's t at 2 degrees of freedom
// has P(T > t) = (1 − t / √(t² + 2)) / 2 and its 97.5% quantile 4.302653), its verdicts decided
// again by Holm's rule and refused when the file says otherwise; a table CSV read back to the
// Markdown `export table` prints; the CSV reader's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "analysis/export/csv_read.h"
#include "analysis/export/export_table.h"
#include "analysis/export/from_csv.h"
#include "common/errors.h"

namespace {

using analysis::parse_csv;

// Three arms at one context. Gaps −0.01, −0.05, −0.04 with se 0.001, 0.002, 0.02 (t = 10, 25, 2 at
// df 2): p = 0.0098525, 0.0015962, 0.1835034; intervals gap ± 4.302653 se (95%). Holm at 5% over 3:
// 0.0016 ≤ 0.05/3, 0.0099 ≤ 0.05/2, 0.18 > 0.05: A−C and A−B resolved, B−C not. D − E: two arms
// that scored every window alike (se 0).
const char* kPairs =
    "context,a,b,gap,se,df,lo,hi,p,resolved,seeds\n"
    "256,A,B,-0.01,0.001,2,-0.0143027,-0.00569735,0.00985246,1,3\n"
    "256,A,C,-0.05,0.002,2,-0.0586053,-0.0413947,0.00159617,1,3\n"
    "256,B,C,-0.04,0.02,2,-0.126053,0.0460531,0.183503,0,3\n"
    "1024,D,E,0,0,3,0,0,1,0,4\n";

double p_t2(double t) { return 1 - t / std::sqrt(t * t + 2); }  // two-sided, df = 2

TEST(ExportFromCsv, HandWorkedNumbersAreWhatTheFixtureHolds) {
  EXPECT_NEAR(p_t2(10), 0.00985246, 1e-8);
  EXPECT_NEAR(p_t2(25), 0.00159617, 1e-8);
  EXPECT_NEAR(p_t2(2), 0.183503, 1e-6);
}

TEST(ExportFromCsv, PairsAreRenderedWithVerdictsByHolmsRule) {
  const auto pairs = analysis::read_pairs_csv(parse_csv(kPairs, "pairs.csv"));
  EXPECT_NEAR(pairs.level, 0.95, 1e-12);
  ASSERT_EQ(pairs.tables.size(), 2u);
  EXPECT_EQ(pairs.tables[0].family, "Holm's procedure over the 3 pairs");
  EXPECT_EQ(pairs.tables[1].family, "Holm's procedure over the 0 pairs");
  const std::string md = analysis::format_pairs_page(pairs, 256);
  EXPECT_NE(md.find("### At 256 (1L): 2 of 3 pairs resolved\n"), std::string::npos) << md;
  EXPECT_NE(md.find("Holm's procedure over the 3 pairs, family-wise error at most 5%"), std::string::npos) << md;
  EXPECT_NE(md.find("| row − column | B | C | \n"), std::string::npos) << md;
  EXPECT_NE(md.find("| A | -0.0100 | -0.0500 | \n"), std::string::npos) << md;
  EXPECT_NE(md.find("| B |  | (-0.0400) | \n"), std::string::npos) << md;
  EXPECT_NE(md.find("Not resolved (each interval at 95%):\n\n- B − C: -0.0400 [-0.1261, +0.0461], p = 0.18\n"),
            std::string::npos) << md;
  EXPECT_NE(md.find("### At 1024 (4L): 0 of 1 pair resolved"), std::string::npos) << md;
  EXPECT_NE(md.find("| D | – | "), std::string::npos) << md;
  EXPECT_NE(md.find("D − E: +0.0000 in every seed and window alike: no spread to test"), std::string::npos) << md;
  EXPECT_EQ(analysis::format_pairs_page(pairs, 0).find("(1L)"), std::string::npos);
}

TEST(ExportFromCsv, AResolvedColumnThatHolmDoesNotGiveIsRefusedWithItsLine) {
  std::string text = kPairs;
  text.replace(text.find("0.183503,0,3"), 12, "0.183503,1,3");  // B − C marked resolved
  try {
    analysis::read_pairs_csv(parse_csv(text, "pairs.csv"));
    FAIL() << "no error";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pairs.csv:4: column 'resolved': B − C is resolved in the CSV, not resolved"),
              std::string::npos) << e.what();
  }
}

TEST(ExportFromCsv, IntervalsAtTwoLevelsAreRefused) {
  std::string text = kPairs;  // A − B's interval at 90% (t quantile 2.919986 at df 2)
  text.replace(text.find("-0.0143027,-0.00569735"), 22, "-0.01292,-0.00708");
  EXPECT_THROW(analysis::read_pairs_csv(parse_csv(text, "pairs.csv")), harness::InputError);
}

TEST(ExportFromCsv, AFamilyColumnIsTheFamilyAndAPlannedFamilyReplacesTheVerdicts) {
  const std::string text =
      "context,a,b,gap,se,df,lo,hi,p,resolved,seeds,threshold,family\n"
      "256,A,B,-0.01,0.001,2,-0.0143027,-0.00569735,0.00985246,1,3,0.025,Holm's procedure over the 2 pairs at 0.05\n"
      "1024,A,B,-0.05,0.002,2,-0.0586053,-0.0413947,0.00159617,1,3,0.05,Holm's procedure over the 2 pairs at 0.05\n";
  auto pairs = analysis::read_pairs_csv(parse_csv(text, "planned.csv"));
  EXPECT_EQ(pairs.tables[0].family, "Holm's procedure over the 2 pairs");
  EXPECT_DOUBLE_EQ(pairs.tables[0].family_alpha, 0.05);
  // Bonferroni over the 2 tests at 0.01: 0.0099 > 0.005 is not resolved, 0.0016 ≤ 0.005 is.
  analysis::apply_planned_family(pairs.tables, "bonferroni", 0.01);
  EXPECT_FALSE(pairs.tables[0].pairs[0].resolved);
  EXPECT_TRUE(pairs.tables[1].pairs[0].resolved);
  const std::string md = analysis::format_pairs_page(pairs, 0);
  EXPECT_NE(md.find("### At 256: 0 of 1 pair resolved"), std::string::npos) << md;
  EXPECT_NE(md.find("family-wise error at most 1%"), std::string::npos) << md;
  // A resolved pair above its own threshold is refused.
  std::string wrong = text;
  wrong.replace(wrong.find(",0.025,"), 7, ",0.001,");
  EXPECT_THROW(analysis::read_pairs_csv(parse_csv(wrong, "planned.csv")), harness::InputError);
}

TEST(ExportFromCsv, ATableCsvReadsBackToTheMarkdownExportTablePrints) {
  analysis::Table t;  // as build_table makes one: 2 rows, 2 columns, one empty cell
  t.title = "sweep: loss";
  t.row_keys = {"attention.method", "attention.positional"};
  t.col_names = {"256 (1L)", "1024 (4L)"};
  t.cols = {{"256"}, {"1024"}};
  t.rows = {{"fire", "–"}, {"kerple", "p-rope"}};
  analysis::Cell a{1.2, 0.1154700538, 3, 0.004, {}}, b{1.5, std::nan(""), 1, 0.006, {}}, c{1.1, 0.05, 2, 0.005, {}};
  t.cells = {{a, b}, {c, std::nullopt}};
  t.window_se = true;
  t.best = {{false, true}, {true, false}};
  const std::string csv = analysis::format_table(t, "csv");
  const auto back = analysis::read_table_csv(parse_csv(csv, "table.csv"), "min", "sweep: loss");
  EXPECT_EQ(analysis::format_table(back, "md"), analysis::format_table(t, "md"));
  const std::string md = analysis::format_table(back, "md");
  EXPECT_NE(md.find("| fire | – | 1.2000 ± 0.1155 (3; windows ± 0.0040) | **1.5000 (1; windows ± 0.0060)** |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| kerple | p-rope | **1.1000 ± 0.0500 (2; windows ± 0.0050)** | – |"), std::string::npos) << md;
  EXPECT_EQ(analysis::format_table(analysis::read_table_csv(parse_csv(csv, "table.csv"), "none", "x"), "md").find("**"),
            std::string::npos);
  EXPECT_THROW(analysis::read_table_csv(parse_csv("a,b\n1,2\n", "plain.csv"), "min", ""), harness::InputError);
  EXPECT_THROW(analysis::read_table_csv(parse_csv(csv, "table.csv"), "lowest", ""), harness::InputError);
}

TEST(ExportFromCsv, AnyCsvAsMarkdownAndTheReadersErrorsNameFileAndLine) {
  const auto csv = parse_csv("run,c_h\n\"seed=0, layer 0\",\"0.5|0.4\"\n", "learned.csv");
  EXPECT_EQ(analysis::csv_as_markdown(csv), "| run | c_h |\n| --- | --- |\n| seed=0, layer 0 | 0.5\\|0.4 |\n");
  try {
    parse_csv("a,b\n1,2\n3\n", "short.csv");
    FAIL() << "no error";
  } catch (const harness::InputError& e) {
    EXPECT_STREQ(e.what(), "short.csv:3: 1 fields, the header has 2");
  }
  EXPECT_THROW(parse_csv("a,b\n\"1,2\n", "open.csv"), harness::InputError);
  const auto numbers = parse_csv("x,y\nabc,\n", "n.csv");
  EXPECT_THROW(numbers.number(0, 0), harness::InputError);
  EXPECT_TRUE(std::isnan(numbers.number(0, 1, true)));
  EXPECT_THROW(numbers.column("z"), harness::InputError);
}

TEST(ExportFromCsv, FigureCsvsGiveATableOfTheirSeriesAtTheLastRowOrAChosenX) {
  analysis::CurvesColumn last{"1L", parse_csv("step,x,x se,y,y se\n400,2,0.1,3,0.2\n800,1.5,0.05,1.2,0.01\n", "a.csv")};
  const auto b = parse_csv("context,x,x se,y,y se\n64,1,0.5,,\n256,4,0.4,5,0.3\n", "b.csv");
  analysis::CurvesColumn at256{"4L", b, false, 256}, at64{"64", b, false, 64};
  EXPECT_EQ(analysis::curves_table_markdown({last, at256, at64}, "min"),
            "| series | 1L | 4L | 64 |\n| --- | --- | --- | --- |\n"
            "| x | 1.5000 ± 0.0500 | **4.0000 ± 0.4000** | 1.0000 ± 0.5000 |\n"
            "| y | **1.2000 ± 0.0100** | 5.0000 ± 0.3000 | – |\n"
            "\nmean ± standard error, as the figure CSVs hold them; ** best per column: a.csv (last row), "
            "b.csv (context = 256), b.csv (context = 64)\n");
  analysis::CurvesColumn missing{"x", b, false, 100};
  EXPECT_THROW(analysis::curves_table_markdown({missing}, "none"), harness::InputError);
  analysis::CurvesColumn no_se{"x", parse_csv("step,x\n1,2\n", "c.csv")};
  EXPECT_THROW(analysis::curves_table_markdown({no_se}, "none"), harness::InputError);
  EXPECT_THROW(analysis::parse_curves_column("no-label"), harness::InputError);
  EXPECT_THROW(analysis::parse_curves_column("L=missing.csv@abc"), harness::InputError);
}

}  // namespace
