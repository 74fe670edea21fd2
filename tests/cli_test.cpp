// The command line as a user meets it: help without internal names, a version, errors that say
// what is wrong and write nothing, notes for settings that are ignored.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "cli/options.h"
#include "sweeps/sweep_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs `harness ARGS` in `cwd` (default: the test's working directory).
Result run_cli(const std::string& args, const fs::path& cwd = {}) {
  test_support::TempDir log_dir;
  const auto log = log_dir.path / "log";
  const std::string cd = cwd.empty() ? "" : "cd '" + cwd.string() + "' && ";
  const std::string cmd = cd + std::string(HARNESS_BINARY) + " " + args + " > '" + log.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = test_support::read_text(log);
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

// Every list option (--rows, --contexts, --factors, --distances) splits the same way; --rows and
// --contexts may also be repeated.
TEST(Cli, ListOptionsAreCommaSeparatedRepeatedOrBoth) {
  using harness::cli::split_commas;
  EXPECT_EQ(split_commas({"a,b", "c", ",d,,e,"}), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(split_commas({"16L"}), (std::vector<std::string>{"16L"}));
  EXPECT_TRUE(split_commas({"", ","}).empty());
}

TEST(Cli, AMissingPositionalArgumentIsNamedNotItsInternalOption) {
  const auto config = run_cli("config");
  EXPECT_EQ(config.code, 2);
  EXPECT_TRUE(has(config.output, "missing ACTION: keys | show")) << config.output;
  EXPECT_FALSE(has(config.output, "--action")) << config.output;
  const auto attention = run_cli("attention");
  EXPECT_EQ(attention.code, 2);
  EXPECT_TRUE(has(attention.output, "missing ACTION: inspect")) << attention.output;
  const auto table = run_cli("export table");
  EXPECT_EQ(table.code, 2);
  EXPECT_TRUE(has(table.output, "missing INPUT")) << table.output;
  EXPECT_FALSE(has(table.output, "--input")) << table.output;
  const auto analyse = run_cli("analyse");
  EXPECT_EQ(analyse.code, 2);
  EXPECT_TRUE(has(analyse.output, "missing TARGET")) << analyse.output;
}

TEST(Cli, HelpShowsTheUsageOnceWithExamplesAndReadableDefaults) {
  const auto table = run_cli("export table --help");
  EXPECT_EQ(table.code, 0);
  EXPECT_FALSE(has(table.output, "--input")) << table.output;
  EXPECT_TRUE(has(table.output, "examples:")) << table.output;
  const auto critical = run_cli("theory critical --help");
  EXPECT_EQ(critical.code, 0);
  EXPECT_EQ(count(critical.output, "usage:"), 1u) << critical.output;
  const auto theory = run_cli("theory --help");
  EXPECT_TRUE(has(theory.output, "entropy") && has(theory.output, "critical")) << theory.output;
  const auto entropy = run_cli("theory entropy --help");
  EXPECT_TRUE(has(entropy.output, "--logn-scale arg (=0.4)")) << entropy.output;
  for (const char* command : {"sweep --help", "train --help", "analyse --help", "config --help",
                              "attention --help", "--help"})
    EXPECT_TRUE(has(run_cli(command).output, "example")) << command;
}

TEST(Cli, VersionNamesTheRevisionAndLibTorch) {
  const auto v = run_cli("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.output.rfind("harness ", 0), 0u) << v.output;
  EXPECT_TRUE(has(v.output, "LibTorch ")) << v.output;
  // The revision fixed at build time (cmake/revision.cmake): 40 hex digits, "-dirty" for a tree
  // with uncommitted changes, or "unknown" outside git; never empty.
  const std::string revision = v.output.substr(8, v.output.find(" (LibTorch") - 8);
  EXPECT_TRUE(std::regex_match(revision, std::regex("[0-9a-f]{40}(-dirty)?|unknown"))) << revision;
}

TEST(Cli, ExportCurvesChecksItsInputBeforeCreatingTheOutputDirectory) {
  test_support::TempDir tmp;
  const auto out = tmp.path / "figures";
  const auto r = run_cli("export curves " + (tmp.path / "no-such.yaml").string() + " --out " + out.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(fs::exists(out));
  const auto theory = run_cli("export curves " + (tmp.path / "no-such.h5").string() + " --out " + out.string());
  EXPECT_EQ(theory.code, 2) << theory.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Cli, AnalyseOfAMissingPathSaysSo) {
  const auto r = run_cli("analyse runs/no-such-run-dir");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.output, "no such run directory or sweep file")) << r.output;
}

TEST(Cli, AttentionInspectErrorsPointAtTheFlag) {
  const auto r = run_cli("attention inspect --method sip-rope");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.output, "--method sip-rope: attention.method")) << r.output;
  EXPECT_FALSE(has(r.output, "--attention.method")) << r.output;
}

TEST(Cli, AFlagTheMethodDoesNotReadIsNotedAsIgnored) {
  const auto rope = run_cli("attention inspect --method rope --tau 10 --distances 0,1");
  EXPECT_EQ(rope.code, 0) << rope.output;
  EXPECT_TRUE(has(rope.output, "note: --tau 10: ignored")) << rope.output;
  const auto si = run_cli("attention inspect --method si+p-rope --tau 10 --distances 0,1");
  EXPECT_EQ(si.code, 0) << si.output;
  EXPECT_FALSE(has(si.output, "ignored")) << si.output;
}

TEST(Cli, ConfigShowNotesTauAndTheBaseFarFromThePapersRatios) {
  test_support::TempDir tmp;
  const auto config = tmp.path / "c.yaml";
  std::ofstream(config) << "attention: {method: si+p-rope}\ntrain: {context: 64}\n";  // τ = 10, base 1024
  const auto defaults = run_cli("config show --config " + config.string());
  EXPECT_EQ(defaults.code, 0) << defaults.output;
  EXPECT_TRUE(has(defaults.output, "note: attention.tau = 10 is L/6.4")) << defaults.output;
  EXPECT_TRUE(has(defaults.output, "note: attention.p_rope_base = 1024 is L/0.0625")) << defaults.output;
  std::ofstream(config) << "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\ntrain: {context: 64}\n";
  const auto scaled = run_cli("config show --config " + config.string());
  EXPECT_EQ(scaled.code, 0) << scaled.output;
  EXPECT_FALSE(has(scaled.output, "note:")) << scaled.output;
  // RoPE reads neither: nothing to say.
  std::ofstream(config) << "attention: {method: rope}\ntrain: {context: 64}\n";
  EXPECT_FALSE(has(run_cli("config show --config " + config.string()).output, "note:"));
}

TEST(Cli, AQuickEntropyTheoryNeverReplacesTheFullRunsFile) {
  test_support::TempDir tmp;
  fs::create_directories(tmp.path / "runs" / "theory");
  std::ofstream(tmp.path / "runs" / "theory" / "entropy.h5") << "the full run";
  const auto r = run_cli("theory entropy --quick --threads 2", tmp.path);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(tmp.path / "runs" / "theory" / "entropy-quick.h5")) << r.output;
  EXPECT_EQ(test_support::read_text(tmp.path / "runs" / "theory" / "entropy.h5"), "the full run");
}

TEST(Cli, SweepStatusCallsAnUnreadableRunFileUnreadable) {
  test_support::TempDir tmp;
  const auto file = tmp.path / "s.yaml";
  std::ofstream(file) << "name: s\nbase:\n  data: {corpus: " << HARNESS_TEST_DATA << "/sotu}\n"
                      << "  run: {out_dir: " << (tmp.path / "runs").string() << "}\nseeds: [0, 1]\n";
  const auto sweep = harness::sweeps::load_sweep(file.string());
  fs::create_directories(sweep.runs[0].run_dir);
  std::ofstream(sweep.runs[0].run_dir + "/run.h5") << "\x89HDF\r\n\x1a\n truncated";
  const auto r = run_cli("sweep status " + file.string());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "unreadable")) << r.output;
  EXPECT_TRUE(has(r.output, "1 unreadable")) << r.output;  // the counts line
  EXPECT_FALSE(has(r.output, " 1 failed")) << r.output;
}
