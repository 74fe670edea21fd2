// `harness theory critical` and the `experiment: critical-scaling` dispatch of `harness sweep`:
// the command writes the HDF5 file and the figures, bad input exits 2 and writes nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "results/hdf5_io.h"
#include "analysis/theory/critical_scaling_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

const char* kTinyYaml =
    "experiment: critical-scaling\nn: [64]\nd: [4]\nrho: [0.5]\ngamma: {count: 5}\nrows: 16\n"
    "hutchinson: {rows: 8, probes: 2}\ncausal: {rows: 16}\nthreads: 1\n";

// Runs the harness binary in `dir` with `args`; returns its exit code, output in *output.
int harness(const fs::path& dir, const std::string& args, std::string* output) {
  const fs::path log = dir / "harness.log";
  const std::string cmd = "cd '" + dir.string() + "' && " + HARNESS_BINARY + " " + args + " > '" +
                          log.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  if (output) *output = test_support::read_text(log);
  fs::remove(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST(CriticalScalingCommand, RunsWritesAndRendersThenRejectsBadInputWritingNothing) {
  test_support::TempDir dir;
  std::ofstream(dir.path / "grid.yaml") << kTinyYaml;
  std::string output;
  ASSERT_EQ(harness(dir.path, "theory critical --config grid.yaml --out out/c.h5 --figures fig", &output), 0)
      << output;
  EXPECT_EQ(results::h5::file_kind((dir.path / "out" / "c.h5").string()), "critical-scaling");
  EXPECT_TRUE(fs::exists(dir.path / "fig" / "critical_gamma_c.md"));
  EXPECT_NE(output.find("| 0.50 | 2.000 |"), std::string::npos) << output;
  // Printed once: the figures' gnuplot children must not replay unflushed output.
  const std::string footer = "γ̂_c: the γ where the mean self-weight";
  EXPECT_EQ(output.find(footer), output.rfind(footer)) << output;

  std::ofstream(dir.path / "bad.yaml") << "experiment: critical-scaling\nrho: [0.5, 1.5]\n";
  ASSERT_EQ(harness(dir.path, "theory critical --config bad.yaml --out bad/c.h5 --figures badfig", &output), 2);
  EXPECT_NE(output.find("bad.yaml:2:12: rho: expected a number in [0, 1), got 1.5"), std::string::npos)
      << output;
  EXPECT_FALSE(fs::exists(dir.path / "bad"));
  EXPECT_FALSE(fs::exists(dir.path / "badfig"));
  EXPECT_EQ(harness(dir.path, "theory critical --quick --run nowhere --out bad/c.h5", &output), 2);
  EXPECT_NE(output.find("nowhere: no such run directory"), std::string::npos) << output;
  EXPECT_EQ(harness(dir.path, "theory nonsense", &output), 2);
  EXPECT_NE(output.find("theory: unknown experiment 'nonsense'; expected: entropy, critical"), std::string::npos)
      << output;
  // An unwritable --out fails before the grid runs (no file can be created under /proc).
  EXPECT_EQ(harness(dir.path, "theory critical --quick --out /proc/critical.h5", &output), 2);
  EXPECT_NE(output.find("--out /proc/critical.h5: cannot write there"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(dir.path / "bad"));
}

TEST(CriticalScalingCommand, SweepRunAndPlanDispatchOnTheExperimentKey) {
  test_support::TempDir dir;
  std::ofstream(dir.path / "grid.yaml") << kTinyYaml;
  std::string output;
  ASSERT_EQ(harness(dir.path, "sweep plan grid.yaml", &output), 0) << output;
  EXPECT_NE(output.find("critical-scaling experiment (grid.yaml)"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(dir.path / "runs"));
  ASSERT_EQ(harness(dir.path, "sweep run grid.yaml", &output), 0) << output;
  EXPECT_EQ(results::h5::file_kind((dir.path / "runs/theory/critical-scaling.h5").string()),
            "critical-scaling");
}
