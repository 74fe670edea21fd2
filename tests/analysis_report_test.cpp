// `harness report`: the page of five small trained runs (rope and alibi, two seeds each, and a
// third rope seed that failed, in a directory with a hostile name) plus a copy that is still
// running, checked against the data: the table's cells against the run files' own losses and
// `export table`'s cells, each run's state and reason, the config keys that differ (and no
// other), every figure of `export curves` inline with its CSV, every string escaped, nothing
// loaded from outside the page, and Debian's HTML validator (tidy) passing it and failing a
// broken copy. Bad input: exit 2 naming the file, nothing written.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "analysis/export/export_table.h"
#include "analysis/export/plot.h"
#include "analysis/export_curves.h"
#include "analysis/html.h"
#include "analysis/run_set.h"
#include "harness/config/schema.h"
#include "results/run_file.h"
#include "test_support.h"
#include "train_support.h"

namespace fs = std::filesystem;

namespace {

const std::string kHostileDir = "<img src=x onerror=alert(1)>&\"'";
const std::string kHostileReason = "<script>alert('boom')</script> & \"quoted\" > 1";

harness::config::LoadedConfig tiny(const fs::path& cache, const std::string& method, int seed) {
  const std::string yaml = fmt::format(
      "data: {{corpus: '{}/sotu', data_dir: '{}'}}\n"
      "model: {{layers: 1, d_model: 32, heads: 2}}\n"
      "attention: {{method: {}}}\n"
      "train: {{context: 32, batch_size: 8, steps: 10, seed: {}}}\n"
      "eval: {{contexts: [L, 4L], windows: 4, every: 5, attention_queries: 8}}\n"
      "run: {{threads: 1, checkpoint_every: 10}}\n",
      HARNESS_TEST_DATA, cache.string(), method, seed);
  return harness::config::load_run_config_text(yaml, "tiny.yaml", "tiny");
}

// Runs the harness binary; its exit code, and stdout + stderr in *out.
int run_harness(const std::string& args, std::string* out) {
  test_support::TempDir tmp;
  const auto log = tmp.path / "log";
  const int status = std::system(fmt::format("{} {} > '{}' 2>&1", HARNESS_BINARY, args, log.string()).c_str());
  *out = test_support::read_text(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

// The HTML of <section id="id">.
std::string section(const std::string& html, const std::string& id) {
  const size_t begin = html.find(fmt::format("<section id=\"{}\"", id));
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</section>", begin) - begin);
}

// Each row of a section's first table body, as the text of its cells (tags dropped, unescaped).
std::vector<std::vector<std::string>> body_rows(const std::string& html) {
  const size_t begin = html.find("<tbody>"), end = html.find("</tbody>");
  std::vector<std::vector<std::string>> out;
  if (begin == std::string::npos || end == std::string::npos) return out;
  const std::string body = html.substr(begin, end - begin);
  static const std::regex row("<tr>([\\s\\S]*?)</tr>"), cell("<t[hd][^>]*>([\\s\\S]*?)</t[hd]>"), tag("<[^>]*>");
  for (std::sregex_iterator r(body.begin(), body.end(), row), e; r != e; ++r) {
    const std::string inner = (*r)[1];
    out.emplace_back();
    for (std::sregex_iterator c(inner.begin(), inner.end(), cell); c != e; ++c)
      out.back().push_back(unescape(std::regex_replace(std::string((*c)[1]), tag, "")));
  }
  return out;
}

std::vector<std::string> head_cells(const std::string& html) {
  const size_t begin = html.find("<thead>");
  const std::string head = html.substr(begin, html.find("</thead>", begin) - begin);
  static const std::regex cell("<th[^>]*>([\\s\\S]*?)</th>"), tag("<[^>]*>");
  std::vector<std::string> out;
  for (std::sregex_iterator c(head.begin(), head.end(), cell), e; c != e; ++c)
    out.push_back(unescape(std::regex_replace(std::string((*c)[1]), tag, "")));
  return out;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

class Report : public ::testing::Test {
 protected:
  static inline fs::path root, page;
  static inline std::string html, command_output;
  static inline int command_code = -1;

  static void SetUpTestSuite() {
    root = fs::temp_directory_path() / fmt::format("harness_report_test_{}", ::getpid());
    fs::remove_all(root);
    const auto cache = root.parent_path() / fmt::format("harness_report_cache_{}", ::getpid());
    for (const auto& [method, seed] : std::vector<std::pair<std::string, int>>{{"rope", 0}, {"rope", 1}, {"alibi", 0}, {"alibi", 1}})
      test_support::train_run(tiny(cache, method, seed), root / fmt::format("{}-{}", method, seed));
    // A third rope seed that failed, in a directory whose name is markup.
    test_support::train_run(tiny(cache, "rope", 2), root / kHostileDir);
    auto failed = results::read_run_file((root / kHostileDir / "run.h5").string());
    failed.state = results::RunState::kFailed;
    failed.reason = kHostileReason;
    results::publish(failed, (root / kHostileDir / "run.h5").string());
    // A copy of alibi-0 that is still running at step 5.
    auto running = results::read_run_file((root / "alibi-0" / "run.h5").string());
    running.state = results::RunState::kRunning;
    running.status_step = 5;
    fs::create_directories(root / "still-running");
    results::publish(running, (root / "still-running" / "run.h5").string());
    fs::remove_all(cache);
    command_code = run_harness(fmt::format("report '{}'", root.string()), &command_output);
    page = root / "report.html";
    html = test_support::read_text(page);
  }
  static void TearDownTestSuite() { fs::remove_all(root); }
};

TEST_F(Report, TheCommandWritesThePageNextToTheRuns) {
  EXPECT_EQ(command_code, 0) << command_output;
  EXPECT_NE(command_output.find("report: " + page.string()), std::string::npos) << command_output;
  ASSERT_FALSE(html.empty());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(fs::exists(root / "report-figures")) << "the figures' files beside the page";
}

TEST_F(Report, TableHoldsExportTablesCellsAndTheRunFilesMeans) {
  const auto set = analysis::load_run_set(root.string());
  const auto t = analysis::build_table(set, {});
  const std::string results = section(html, "results");
  const auto rows = body_rows(results);
  ASSERT_EQ(rows.size(), t.rows.size()) << results;
  std::vector<std::string> head = t.row_keys;
  head.insert(head.end(), t.col_names.begin(), t.col_names.end());
  EXPECT_EQ(head_cells(results), head);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<std::string> expected = t.rows[r];
    for (size_t c = 0; c < t.cols.size(); ++c) expected.push_back(analysis::cell_text(t.cells[r][c], "±", false));
    EXPECT_EQ(rows[r], expected) << r;
  }
  // Independently of export table: rope's two done seeds, from their run files.
  for (const int64_t T : {32, 128}) {
    std::vector<double> loss;
    for (const char* dir : {"rope-0", "rope-1"})
      loss.push_back(results::read_run_file((root / dir / "run.h5").string()).eval.at(T).loss.back());
    const double mean = (loss[0] + loss[1]) / 2, se = std::abs(loss[0] - loss[1]) / 2;  // sd/√2 of two
    const size_t col = T == 32 ? 1 : 2;
    bool found = false;
    for (const auto& row : rows)
      if (row[0] == "rope") {
        EXPECT_EQ(row.at(col), fmt::format("{:.4f} ± {:.4f} (2)", mean, se)) << T;
        found = true;
      }
    EXPECT_TRUE(found);
  }
  EXPECT_NE(results.find("2 runs not done"), std::string::npos) << results;
}

TEST_F(Report, EveryRunsStateStepAndReason) {
  std::map<std::string, std::vector<std::string>> by_id;
  for (const auto& row : body_rows(section(html, "runs"))) by_id[row.at(0)] = row;
  ASSERT_EQ(by_id.size(), 6u);
  for (const char* id : {"rope-0", "rope-1", "alibi-0", "alibi-1"}) {
    EXPECT_EQ(by_id[id].at(1), "done") << id;
    EXPECT_EQ(by_id[id].at(2), "10 / 10") << id;
  }
  EXPECT_EQ(by_id[kHostileDir].at(1), "failed");
  EXPECT_EQ(by_id[kHostileDir].at(3), kHostileReason);
  EXPECT_EQ(by_id["still-running"].at(1), "running");
  EXPECT_EQ(by_id["still-running"].at(2), "5 / 10");
  EXPECT_NE(section(html, "runs").find("6 runs: 4 done, 1 failed, 1 running."), std::string::npos);
}

TEST_F(Report, ConfigDifferencesAreTheVaryingKeysOnly) {
  const std::string config = section(html, "config");
  EXPECT_EQ(head_cells(config), (std::vector<std::string>{"run", "attention.method", "train.seed"}));
  const std::map<std::string, std::vector<std::string>> expected = {
      {"rope-0", {"rope-0", "rope", "0"}},     {"rope-1", {"rope-1", "rope", "1"}},
      {"alibi-0", {"alibi-0", "alibi", "0"}},  {"alibi-1", {"alibi-1", "alibi", "1"}},
      {kHostileDir, {kHostileDir, "rope", "2"}}, {"still-running", {"still-running", "alibi", "0"}}};
  const auto rows = body_rows(config);
  ASSERT_EQ(rows.size(), expected.size());
  for (const auto& row : rows) EXPECT_EQ(row, expected.at(row.at(0)));
  for (const char* same : {"model.d_model", "train.context", "train.steps", "data.corpus"})
    EXPECT_EQ(config.find(same), std::string::npos) << same << " is the same in every run";
}

TEST_F(Report, EveryStringIsEscapedAndNothingComesFromOutside) {
  EXPECT_EQ(html.find(kHostileDir), std::string::npos) << "the directory's name as markup";
  EXPECT_EQ(html.find(kHostileReason), std::string::npos);
  EXPECT_NE(html.find(analysis::html::escape(kHostileDir)), std::string::npos);
  EXPECT_NE(html.find(analysis::html::escape(kHostileReason)), std::string::npos);
  for (const char* outside : {"<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", "https:"})
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<[^>]*\ssrc\s*=)"))) << "an element that loads a file";
  // http: only in the SVG namespaces.
  const std::string rest = std::regex_replace(html, std::regex(R"(xmlns(:xlink)?="http://www\.w3\.org/[^"]*")"), "");
  EXPECT_EQ(rest.find("http:"), std::string::npos);
  EXPECT_EQ(std::regex_replace(html, std::regex(R"(url\(#)"), "").find("url("), std::string::npos);
}

TEST_F(Report, EveryFigureOfExportCurvesInlineWithItsCsv) {
  test_support::TempDir tmp;
  const auto curves = analysis::export_curves(root.string(), {(tmp.path / "curves").string(), ""});
  ASSERT_FALSE(curves.figures.empty());
  const std::string figures = section(html, "figures");
  EXPECT_EQ(occurrences(figures, "<figure "), curves.figures.size());
  for (const auto& f : curves.figures) {
    const size_t begin = figures.find(fmt::format("<figure id=\"figure-{}\">", f.name));
    ASSERT_NE(begin, std::string::npos) << f.name;
    const std::string one = figures.substr(begin, figures.find("</figure>", begin) - begin);
    if (analysis::gnuplot_available()) {
      EXPECT_NE(one.find("<svg role=\"img\""), std::string::npos) << f.name;
      EXPECT_NE(one.find("</svg>"), std::string::npos) << f.name;
      EXPECT_GT(occurrences(one, "<path "), 10u) << f.name << ": drawn lines";
    }
    for (const auto& csv : f.csv) {
      const std::string name = fs::path(csv).filename().string();
      const std::regex link("download=\"" + name + "\" href=\"data:text/csv;charset=utf-8,([^\"]*)\"");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(one, m, link)) << name;
      EXPECT_EQ(percent_decode(m[1]), test_support::read_text(csv)) << name;
    }
  }
}

TEST_F(Report, IdsAreUniqueAndEveryAnchorResolves) {
  std::multiset<std::string> ids;
  static const std::regex id_attr(R"(\sid=(['"])([^'"]*)\1)"), href(R"(href=(['"])#([^'"]*)\1)");
  for (std::sregex_iterator i(html.begin(), html.end(), id_attr), e; i != e; ++i) ids.insert((*i)[2]);
  for (const auto& id : ids) EXPECT_EQ(ids.count(id), 1u) << id;
  size_t anchors = 0;
  for (std::sregex_iterator i(html.begin(), html.end(), href), e; i != e; ++i, ++anchors)
    EXPECT_EQ(ids.count((*i)[2]), 1u) << "#" << (*i)[2] << " points nowhere";
  EXPECT_GT(anchors, 5u);
}

TEST_F(Report, TidyPassesThePageAndFailsABrokenCopy) {
  if (std::system("command -v tidy >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "tidy not installed (Debian package tidy; scripts/install-deps.sh installs it)";
  std::string out;
  const auto tidy = [&](const fs::path& file) {
    test_support::TempDir tmp;
    const int status = std::system(
        fmt::format("tidy -q -e '{}' > '{}' 2>&1", file.string(), (tmp.path / "log").string()).c_str());
    out = test_support::read_text(tmp.path / "log");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(tidy(page), 0) << out;
  test_support::TempDir tmp;
  std::string broken = html;
  broken.replace(broken.find("<tbody>"), 7, "<tbody><div>");  // a <div> where rows go
  std::ofstream(tmp.path / "broken.html") << broken;
  EXPECT_NE(tidy(tmp.path / "broken.html"), 0) << "tidy accepted a <div> in a <tbody>";
}

TEST(ReportCommand, BadInputExitsTwoNamingTheFileAndWritesNothing) {
  test_support::TempDir tmp;
  const auto out = tmp.path / "page.html";
  std::string log;
  const auto missing = tmp.path / "no-such-runs";
  EXPECT_EQ(run_harness(fmt::format("report '{}' --out '{}'", missing.string(), out.string()), &log), 2) << log;
  EXPECT_NE(log.find(missing.string() + ": no such sweep file or run directory"), std::string::npos) << log;
  fs::create_directories(tmp.path / "empty");
  EXPECT_EQ(run_harness(fmt::format("report '{}' --out '{}'", (tmp.path / "empty").string(), out.string()), &log), 2);
  EXPECT_NE(log.find("empty: no run directories (no run.h5) found"), std::string::npos) << log;
  const std::string sweeps = std::string(HARNESS_TEST_DATA) + "/sweeps/";
  EXPECT_EQ(run_harness(fmt::format("report {}wrong_type.yaml --out '{}'", sweeps, out.string()), &log), 2);
  EXPECT_NE(log.find("wrong_type.yaml:4:"), std::string::npos) << log;
  EXPECT_EQ(run_harness(fmt::format("report {}empty_axis.yaml --out '{}'", sweeps, out.string()), &log), 2);
  EXPECT_NE(log.find("empty_axis.yaml:"), std::string::npos) << log;
  EXPECT_EQ(run_harness("report", &log), 2) << log;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ReportCommand, ASweepWithNothingDoneShowsItsPendingRuns) {
  test_support::TempDir tmp;
  const auto sweep = tmp.path / "pending.yaml";
  std::ofstream(sweep) << "name: pending\nbase:\n  data: {corpus: '" << HARNESS_TEST_DATA << "/sotu'}\n"
                       << "  model: {layers: 1, d_model: 32, heads: 2}\n"
                       << "  train: {context: 32, batch_size: 8, steps: 10}\n"
                       << "  run: {out_dir: '" << (tmp.path / "runs").string() << "'}\n"
                       << "grid:\n  attention.method: [rope, alibi]\n";
  std::string log;
  ASSERT_EQ(run_harness("report " + sweep.string(), &log), 0) << log;
  const std::string html = test_support::read_text(tmp.path / "runs" / "pending" / "report.html");
  ASSERT_FALSE(html.empty()) << log;
  const auto rows = body_rows(section(html, "runs"));
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) EXPECT_EQ(row.at(1), "pending");
  EXPECT_NE(section(html, "results").find("No run is done yet"), std::string::npos);
  EXPECT_EQ(body_rows(section(html, "config")).size(), 2u);
}

}  // namespace
