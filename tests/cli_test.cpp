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

// The output of `harness ARGS` (in `cwd`), which must exit with `code` (0 done, 2 a usage error).
std::string output_of(const std::string& args, int code, const fs::path& cwd = {}) {
  const Result r = run_cli(args, cwd);
  EXPECT_EQ(r.code, code) << "harness " << args << ":\n" << r.output;
  return r.output;
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
  const std::string config = output_of("config", 2);
  EXPECT_TRUE(has(config, "missing ACTION: keys | show")) << config;
  EXPECT_FALSE(has(config, "--action")) << config;
  const std::string attention = output_of("attention", 2);
  EXPECT_TRUE(has(attention, "missing ACTION: inspect")) << attention;
  const std::string table = output_of("export table", 2);
  EXPECT_TRUE(has(table, "missing INPUT")) << table;
  EXPECT_FALSE(has(table, "--input")) << table;
  const std::string analyse = output_of("analyse", 2);
  EXPECT_TRUE(has(analyse, "missing TARGET")) << analyse;
}

// `config keys` lists both tables of the one config validator: the run config's keys and, in a
// section of its own, the critical-scaling file's.
TEST(Cli, ConfigKeysListsRunConfigsAndCriticalScalingFiles) {
  const std::string keys = output_of("config keys", 0);
  const size_t run = keys.find("# run configs"), critical = keys.find("# experiment: critical-scaling files");
  ASSERT_NE(run, std::string::npos) << keys;
  ASSERT_NE(critical, std::string::npos) << keys;
  EXPECT_LT(run, critical);
  EXPECT_LT(run, keys.find("\ntrain.steps "));
  EXPECT_LT(critical, keys.find("\nrho.from "));
  EXPECT_NE(keys.find("\nhutchinson.precision "), std::string::npos) << keys;
}

TEST(Cli, HelpShowsTheUsageOnceWithExamplesAndReadableDefaults) {
  const std::string table = output_of("export table --help", 0);
  EXPECT_FALSE(has(table, "--input")) << table;
  EXPECT_TRUE(has(table, "examples:")) << table;
  const std::string critical = output_of("theory critical --help", 0);
  EXPECT_EQ(count(critical, "usage:"), 1u) << critical;
  const auto theory = run_cli("theory --help");
  EXPECT_TRUE(has(theory.output, "entropy") && has(theory.output, "critical")) << theory.output;
  const auto entropy = run_cli("theory entropy --help");
  EXPECT_TRUE(has(entropy.output, "--logn-scale arg (=0.4)")) << entropy.output;
  for (const char* command : {"sweep --help", "train --help", "analyse --help", "config --help",
                              "attention --help", "--help"})
    EXPECT_TRUE(has(run_cli(command).output, "example")) << command;
}

TEST(Cli, VersionNamesTheRevisionAndLibTorch) {
  const std::string v = output_of("--version", 0);
  EXPECT_EQ(v.rfind("harness ", 0), 0u) << v;
  EXPECT_TRUE(has(v, "LibTorch ")) << v;
  // The revision fixed at build time (cmake/revision.cmake): 40 hex digits, "-dirty" for a tree
  // with uncommitted changes, or "unknown" outside git; never empty.
  const std::string revision = v.substr(8, v.find(" (LibTorch") - 8);
  EXPECT_TRUE(std::regex_match(revision, std::regex("[0-9a-f]{40}(-dirty)?|unknown"))) << revision;
}

TEST(Cli, ExportCurvesChecksItsInputBeforeCreatingTheOutputDirectory) {
  test_support::TempDir tmp;
  const auto out = tmp.path / "figures";
  output_of("export curves " + (tmp.path / "no-such.yaml").string() + " --out " + out.string(), 2);
  EXPECT_FALSE(fs::exists(out));
  output_of("export curves " + (tmp.path / "no-such.h5").string() + " --out " + out.string(), 2);
  EXPECT_FALSE(fs::exists(out));
}

TEST(Cli, AnalyseOfAMissingPathSaysSo) {
  const std::string r = output_of("analyse runs/no-such-run-dir", 2);
  EXPECT_TRUE(has(r, "no such run directory or sweep file")) << r;
}

TEST(Cli, AttentionInspectErrorsPointAtTheFlag) {
  const std::string r = output_of("attention inspect --method sip-rope", 2);
  EXPECT_TRUE(has(r, "--method sip-rope: attention.method")) << r;
  EXPECT_FALSE(has(r, "--attention.method")) << r;
}

TEST(Cli, AFlagTheMethodDoesNotReadIsNotedAsIgnored) {
  const std::string rope = output_of("attention inspect --method rope --tau 10 --distances 0,1", 0);
  EXPECT_TRUE(has(rope, "note: --tau 10: ignored")) << rope;
  const std::string si = output_of("attention inspect --method si+p-rope --tau 10 --distances 0,1", 0);
  EXPECT_FALSE(has(si, "ignored")) << si;
}

TEST(Cli, ConfigShowNotesTauAndTheBaseFarFromThePapersRatios) {
  test_support::TempDir tmp;
  const auto config = tmp.path / "c.yaml";
  std::ofstream(config) << "attention: {method: si+p-rope}\ntrain: {context: 64}\n";  // τ = 10, base 1024
  const std::string defaults = output_of("config show --config " + config.string(), 0);
  EXPECT_TRUE(has(defaults, "note: attention.tau = 10 is L/6.4")) << defaults;
  EXPECT_TRUE(has(defaults, "note: attention.p_rope_base = 1024 is L/0.0625")) << defaults;
  std::ofstream(config) << "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\ntrain: {context: 64}\n";
  const std::string scaled = output_of("config show --config " + config.string(), 0);
  EXPECT_FALSE(has(scaled, "note:")) << scaled;
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
  const std::string r = output_of("sweep status " + file.string(), 0);
  EXPECT_TRUE(has(r, "unreadable")) << r;
  EXPECT_TRUE(has(r, "1 unreadable")) << r;  // the counts line
  EXPECT_FALSE(has(r, " 1 failed")) << r;
}
