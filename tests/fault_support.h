// What the fault tests share: the harness run with the write_fault library preloaded
// (tests/fault/write_fault.c) and a small run that checkpoints and publishes run.h5 several times.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;  // 128 + signal when killed
  std::string output;
};

// `harness ARGS` with `faults` in its environment and the write_fault library preloaded.
Result run_with_faults(const std::vector<std::string>& args, const std::map<std::string, std::string>& faults,
                       const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("LD_PRELOAD", HARNESS_WRITE_FAULT_LIBRARY, 1);
    for (const auto& [key, value] : faults) ::setenv(key.c_str(), value.c_str(), 1);
    std::vector<std::string> all = {HARNESS_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Result r;
  r.code = test_support::wait_exit(pid, std::chrono::seconds(300));
  r.output = test_support::read_text(log);
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (has(f.path().filename().string(), ".tmp")) out.push_back(f.path().string());
  return out;
}

// A 4-step run that validates and checkpoints every 2 steps (3 publications of run.h5: steps 2
// and 4, and the first checkpoint's), trained in seconds on the fixture corpus.
struct FaultRun {
  test_support::TempDir tmp;
  fs::path config = tmp.path / "disk.yaml";
  FaultRun() {
    std::ofstream(config) << "data: {corpus: '" << HARNESS_TEST_DATA << "/sotu', data_dir: '"
                          << (tmp.path / "cache").string() << "'}\n"
                          << "model: {layers: 1, d_model: 32, heads: 1}\n"
                             "train: {context: 32, batch_size: 2, steps: 4}\n"
                             "eval: {contexts: [L], windows: 2, every: 2}\n"
                             "run: {checkpoint_every: 2, threads: 1}\n";
  }
  fs::path dir(const std::string& name) const { return tmp.path / name; }
  Result train(const std::string& name, const std::map<std::string, std::string>& faults,
               const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"train", "--no-progress", "--config", config.string(), "--run-dir",
                                     dir(name).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_with_faults(args, faults, tmp.path / (name + ".log"));
  }
  // The run in `name`, resumed with no fault, must end equal to an uninterrupted run.
  void expect_resume_equals_whole(const std::string& name) const {
    const Result resumed = train(name, {}, {"--resume"});
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    const Result whole = train("whole", {});
    ASSERT_EQ(whole.code, 0) << whole.output;
    const auto a = results::read_run_file((dir(name) / "run.h5").string());
    const auto b = results::read_run_file((dir("whole") / "run.h5").string());
    EXPECT_EQ(a.state, results::RunState::kDone);
    EXPECT_EQ(a.train.step, b.train.step);
    EXPECT_EQ(a.train.loss, b.train.loss);
  }
};

// A finished run's table exported once to <tmp>/out/table.md: the export's arguments and the
// file as written, for the tests that fail the next export of it.
struct ExportedTable {
  fs::path table;
  std::vector<std::string> args;
  std::string before;
};
inline void export_table_once(const FaultRun& run, ExportedTable& out) {
  ASSERT_EQ(run.train("run", {}).code, 0);
  out.table = run.tmp.path / "out" / "table.md";
  out.args = {"export", "table", run.dir("run").string(), "--out", out.table.string()};
  ASSERT_EQ(run_with_faults(out.args, {}, run.tmp.path / "export.log").code, 0);
  out.before = test_support::read_text(out.table);
  ASSERT_FALSE(out.before.empty());
}

}  // namespace
