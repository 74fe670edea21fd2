// Faults around writes, injected: the write_fault library (tests/fault/write_fault.c), preloaded
// into the harness binary, makes writes to chosen files fail as a full disk (or a quota, or a
// failing disk) makes them fail. Each test checks what a user sees: an exit code that is not a
// signal, a message naming the file and the cause, no temporary file, earlier results whole, and
// a resume that ends equal to an uninterrupted run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

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

}  // namespace

TEST(Faults, DiskFullDuringACheckpoint) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "checkpoint-"}});
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string file = (run.dir("run") / "checkpoint-2.pt").string();
  EXPECT_TRUE(has(r.output, "error: cannot write the checkpoint " + file + ": No space left on device")) << r.output;
  EXPECT_FALSE(has(r.output, "Exception raised from") || has(r.output, "terminate called")) << r.output;
  EXPECT_EQ(leftovers(run.dir("run")), std::vector<std::string>{});
  const auto record = results::read_run_file((run.dir("run") / "run.h5").string());
  EXPECT_EQ(record.state, results::RunState::kFailed);
  EXPECT_TRUE(has(record.reason, "No space left on device")) << record.reason;
  run.expect_resume_equals_whole("run");
}

TEST(Faults, QuotaExceededDuringACheckpointSaysSo) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "checkpoint-"}, {"HARNESS_FAULT_ERRNO", "EDQUOT"}});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "checkpoint-2.pt: Disk quota exceeded")) << r.output;
}

// The disk fills while run.h5 is written at step 4 (its second publication) and stays full: the
// run stops with exit 1 naming run.h5 and the cause; run.h5 is still step 2's whole file.
TEST(Faults, DiskFullDuringARunFileWriteKeepsThePreviousFile) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "run.h5.tmp"}, {"HARNESS_FAULT_FROM_OPEN", "2"}});
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string file = (run.dir("run") / "run.h5").string();
  EXPECT_TRUE(has(r.output, "error: cannot write " + file + ": ")) << r.output;
  EXPECT_TRUE(has(r.output, "No space left on device")) << r.output;
  EXPECT_TRUE(has(r.output, "the failure is not recorded in " + file)) << r.output;
  EXPECT_EQ(leftovers(run.dir("run")), std::vector<std::string>{});
  const auto record = results::read_run_file(file);  // the previous publication, whole
  EXPECT_EQ(record.state, results::RunState::kRunning);
  EXPECT_EQ(record.status_step, 2);
  run.expect_resume_equals_whole("run");
}

// One write fails, then the disk has room again: the failure itself is recorded in run.h5.
TEST(Faults, ARunFileWriteThatFailsOnceIsRecordedAsTheReason) {
  FaultRun run;
  const Result r = run.train("run", {{"HARNESS_FAULT_FILE", "run.h5.tmp"}, {"HARNESS_FAULT_FROM_OPEN", "2"},
                                     {"HARNESS_FAULT_COUNT", "1"}, {"HARNESS_FAULT_ERRNO", "EIO"}});
  EXPECT_EQ(r.code, 1) << r.output;
  const auto record = results::read_run_file((run.dir("run") / "run.h5").string());
  EXPECT_EQ(record.state, results::RunState::kFailed);
  EXPECT_TRUE(has(record.reason, "cannot write " + (run.dir("run") / "run.h5").string())) << record.reason;
  EXPECT_TRUE(has(record.reason, "Input/output error")) << record.reason;
  run.expect_resume_equals_whole("run");
}

// Exports: the table and the figures' CSVs. A full disk leaves the previous file and no
// temporary one, and says which file.
TEST(Faults, DiskFullDuringAnExportKeepsThePreviousFile) {
  FaultRun run;
  ASSERT_EQ(run.train("run", {}).code, 0);
  const fs::path table = run.tmp.path / "out" / "table.md";
  const std::vector<std::string> args = {"export", "table", run.dir("run").string(), "--out", table.string()};
  ASSERT_EQ(run_with_faults(args, {}, run.tmp.path / "export.log").code, 0);
  const std::string before = test_support::read_text(table);
  ASSERT_FALSE(before.empty());
  const Result r = run_with_faults(args, {{"HARNESS_FAULT_FILE", "table.md"}}, run.tmp.path / "export.log");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "error: cannot write " + table.string() + ": No space left on device")) << r.output;
  EXPECT_EQ(test_support::read_text(table), before);
  EXPECT_EQ(leftovers(run.tmp.path / "out"), std::vector<std::string>{});

  const fs::path figures = run.tmp.path / "figures";
  const Result curves = run_with_faults({"export", "curves", run.dir("run").string(), "--out", figures.string()},
                                        {{"HARNESS_FAULT_FILE", ".csv"}}, run.tmp.path / "curves.log");
  EXPECT_EQ(curves.code, 1) << curves.output;
  EXPECT_TRUE(has(curves.output, ".csv: No space left on device")) << curves.output;
  EXPECT_EQ(leftovers(figures), std::vector<std::string>{});
}

// gnuplot does not check its own writes: on a full disk it leaves a cut-off image and exits 0.
// Played by a stand-in gnuplot that writes half an SVG: the figure is not taken as drawn, the
// cut-off images are removed, and `export curves` exits 1 naming the file.
TEST(Faults, AFigureGnuplotLeftIncompleteIsAnError) {
  FaultRun run;
  ASSERT_EQ(run.train("run", {}).code, 0);
  const fs::path fake = run.tmp.path / "gnuplot";
  std::ofstream(fake) << "#!/bin/sh\n"
                         "stem=\"${1%.gp}\"\n"
                         "printf '<svg xmlns=\"http://www.w3.org/2000/svg\"><path d=\"M 0 0' > \"$stem.svg\"\n"
                         "printf '\\211PNG' > \"$stem.png\"\n";
  fs::permissions(fake, fs::perms::owner_all);
  const fs::path figures = run.tmp.path / "figures";
  const Result r = run_with_faults({"export", "curves", run.dir("run").string(), "--out", figures.string()},
                                   {{"HARNESS_GNUPLOT", fake.string()}}, run.tmp.path / "curves.log");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "error: ")) << r.output;
  EXPECT_TRUE(has(r.output, ".svg incomplete (")) << r.output;
  for (const auto& f : fs::directory_iterator(figures)) {
    const auto ext = f.path().extension();
    EXPECT_TRUE(ext != ".svg" && ext != ".png") << f.path() << " kept";
  }
}
