// Sweeps end to end with the built harness binary on the fixture corpus: a worker SIGKILLed
// mid-run and a runner stopped by SIGTERM both resume with no duplicated steps; two concurrent
// `sweep run`s train each run exactly once; bad sweep files exit 2 and write nothing; the Slurm
// script is well-formed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "results/run_file.h"
#include "sweeps/sweep_file.h"
#include "test_support.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("harness-sweeps-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}


size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A tiny sweep on the fixture corpus; results under <dir>/results.
fs::path write_sweep(const fs::path& dir, const std::string& name, int steps, const std::string& seeds) {
  const fs::path file = dir / (name + ".yaml");
  std::ofstream(file) << "name: " << name << "\n"
                      << "base:\n"
                      << "  data: {corpus: " << HARNESS_TEST_DATA << "/sotu}\n"
                      << "  model: {layers: 1, d_model: 32, heads: 2}\n"
                      << "  train: {context: 16, batch_size: 4, steps: " << steps << "}\n"
                      << "  eval: {contexts: [L, 4L], windows: 2, every: 20}\n"
                      << "  run: {checkpoint_every: 5, log_every: 5, out_dir: " << (dir / "results").string() << "}\n"
                      << "seeds: " << seeds << "\n";
  return file;
}

int run(const fs::path& dir, const std::vector<std::string>& args, const fs::path& log) {
  return test_support::wait_exit(test_support::spawn_harness(dir, args, log));
}

// pid of the process holding the run's lock (the lock file says "pid@host").
pid_t lock_holder(const std::string& run_dir) {
  const std::string text = test_support::read_text(run_dir + "/lock");
  return text.empty() ? 0 : pid_t(std::stol(text));
}

void expect_complete_without_duplicates(const std::string& run_dir, int64_t steps) {
  const auto record = results::read_run_file(run_dir + "/run.h5");
  EXPECT_EQ(record.state, results::RunState::kDone) << run_dir;
  ASSERT_EQ(int64_t(record.train.size()), steps) << run_dir;
  for (size_t i = 0; i < record.train.size(); ++i) EXPECT_EQ(record.train.step[i], int64_t(i) + 1) << run_dir;
  for (const auto& [T, rows] : record.eval) {
    ASSERT_GT(rows.size(), 0u);
    for (size_t i = 1; i < rows.size(); ++i) EXPECT_LT(rows.step[i - 1], rows.step[i]) << run_dir << " T=" << T;
    EXPECT_EQ(rows.step.back(), steps);
  }
}

}  // namespace

TEST(SweepCommand, BadSweepExitsTwoAndWritesNothing) {
  const fs::path dir = fresh_dir("bad");
  std::ofstream(dir / "bad.yaml") << "name: bad\nbase: {run: {out_dir: " << (dir / "results").string()
                                  << "}}\ngrid:\n  attention.tua: [1, 2]\n";
  for (const std::string action : {"plan", "run", "status", "table", "submit"}) {
    const fs::path log = dir / (action + ".log");
    std::vector<std::string> args = {"sweep", action, "bad.yaml"};
    if (action == "submit") args.push_back("--slurm");
    EXPECT_EQ(run(dir, args, log), 2) << action;
    const std::string out = test_support::read_text(log);
    EXPECT_NE(out.find("bad.yaml:4:3: unknown key 'attention.tua' — did you mean 'attention.tau'?"),
              std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists(dir / "results"));
  fs::remove_all(dir);
}

TEST(SweepCommand, MissingCorpusIsReportedOnceBeforeAnyWorkerStarts) {
  const fs::path dir = fresh_dir("nocorpus");
  std::ofstream(dir / "nocorpus.yaml") << "name: nocorpus\nbase:\n  data: {corpus: " << (dir / "missing").string()
                                       << "}\n  run: {out_dir: " << (dir / "results").string()
                                       << "}\nseeds: [1, 2, 3]\n";
  const fs::path log = dir / "run.log";
  EXPECT_EQ(run(dir, {"sweep", "run", "nocorpus.yaml", "--no-live"}, log), 2);
  const std::string out = test_support::read_text(log);
  EXPECT_EQ(count(out, "does not exist"), 1u) << out;  // once, not once per run
  EXPECT_NE(out.find("nocorpus.yaml:3:"), std::string::npos) << out;  // where data.corpus is set
  EXPECT_NE(out.find((dir / "missing").string()), std::string::npos) << out;
  EXPECT_EQ(count(out, "started"), 0u) << out;
  EXPECT_FALSE(fs::exists(dir / "results"));
  fs::remove_all(dir);
}

// The Slurm script of a sweep whose runs are all pending (--dry-run: nothing is submitted): an
// array of the pending runs, requeued on the time limit's signal, each task checking its run id.
TEST(SweepCommand, TheSlurmScriptOfAPendingSweep) {
  const fs::path dir = fresh_dir("slurm-script");
  const fs::path file = write_sweep(dir, "resume", 120, "[0, 1]");
  const auto sweep = harness::sweeps::load_sweep(file.string());
  ASSERT_EQ(sweep.runs.size(), 2u);
  ASSERT_EQ(run(dir, {"sweep", "submit", file.string(), "--slurm", "--dry-run", "--max-parallel", "1",
                      "--time", "00:10:00", "--partition", "debug"},
                dir / "submit.log"), 0) << test_support::read_text(dir / "submit.log");
  std::vector<fs::path> scripts;
  for (const auto& e : fs::directory_iterator(dir / "results/resume/slurm")) scripts.push_back(e.path());
  ASSERT_EQ(scripts.size(), 1u);
  const std::string script = test_support::read_text(scripts[0]);
  for (const std::string& line : std::vector<std::string>{"#SBATCH --array=0-1%1", "#SBATCH --signal=B:USR1@120", "#SBATCH --requeue",
                                 "#SBATCH --open-mode=append", "#SBATCH --partition=debug",
                                 "#SBATCH --time=00:10:00", "RUN_INDICES=(0 1)", "scontrol requeue",
                                 "sweep run-one \"$SWEEP\" --index \"$run_index\" --expect-id \"$run_id\"",
                                 "RUN_IDS=(" + sweep.runs[0].id + " " + sweep.runs[1].id + ")"})
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
  EXPECT_NE(script.find("#SBATCH --output=" + (dir / "results/resume/slurm/%A_%a.out").string()), std::string::npos);
  EXPECT_EQ(std::system(("bash -n " + scripts[0].string()).c_str()), 0);
  EXPECT_TRUE(fs::exists(dir / "results/resume/runs.tsv"));
  EXPECT_TRUE(fs::exists(dir / "results/resume/sweep.yaml"));
  fs::remove_all(dir);
}

TEST(SweepCommand, KilledWorkerAndStoppedRunnerResumeWithoutDuplicatedSteps) {
  const fs::path dir = fresh_dir("resume");
  const int steps = 120;
  const fs::path file = write_sweep(dir, "resume", steps, "[0, 1]");
  const auto sweep = harness::sweeps::load_sweep(file.string());
  ASSERT_EQ(sweep.runs.size(), 2u);
  // run_dir is relative to the working directory the commands run in.
  const std::string run0 = (dir / sweep.runs[0].run_dir).string(), run1 = (dir / sweep.runs[1].run_dir).string();

  // 1. SIGKILL run 0's worker after its first checkpoint; SIGTERM the runner during run 1.
  const pid_t runner = test_support::spawn_harness(dir, {"sweep", "run", file.string(), "--jobs", "1", "--threads-per-job", "1"},
                             dir / "run1.log");
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (!test_support::checkpointed_mid_run(run0) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const pid_t worker = lock_holder(run0);
  ASSERT_GT(worker, 0);
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  while (!test_support::checkpointed_mid_run(run1) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(::kill(runner, SIGTERM), 0);
  EXPECT_EQ(test_support::wait_exit(runner), 130) << test_support::read_text(dir / "run1.log");
  const std::string first = test_support::read_text(dir / "run1.log");
  EXPECT_NE(first.find("FAILED"), std::string::npos) << first;
  EXPECT_NE(first.find("killed by signal 9"), std::string::npos) << first;

  ASSERT_EQ(run(dir, {"sweep", "status", file.string()}, dir / "status1.log"), 0);
  const std::string status1 = test_support::read_text(dir / "status1.log");
  EXPECT_NE(status1.find("killed: no process holds its lock"), std::string::npos) << status1;
  EXPECT_NE(status1.find("0 of 2 runs done, 2 interrupted"), std::string::npos) << status1;

  // 2. Run again: both resume from their checkpoints and finish.
  ASSERT_EQ(run(dir, {"sweep", "run", file.string(), "--jobs", "2", "--threads-per-job", "1"}, dir / "run2.log"), 0)
      << test_support::read_text(dir / "run2.log");
  for (const auto& run_dir : {run0, run1}) {
    const std::string log = test_support::read_text(run_dir + "/worker.log");
    EXPECT_EQ(count(log, "starting run"), 1u) << log;
    EXPECT_EQ(count(log, "resuming run"), 1u) << log;
    expect_complete_without_duplicates(run_dir, steps);
  }

  // 3. Everything done: a third run does nothing; plan, status and table agree.
  ASSERT_EQ(run(dir, {"sweep", "run", file.string()}, dir / "run3.log"), 0);
  EXPECT_NE(test_support::read_text(dir / "run3.log").find("2 of 2 runs done (0 this time)"), std::string::npos)
      << test_support::read_text(dir / "run3.log");
  ASSERT_EQ(run(dir, {"sweep", "plan", file.string()}, dir / "plan.log"), 0);
  const std::string plan = test_support::read_text(dir / "plan.log");
  EXPECT_NE(plan.find(sweep.runs[0].id + "  #0   train.seed=0  done"), std::string::npos) << plan;
  EXPECT_NE(plan.find("2 of 2 runs done"), std::string::npos) << plan;
  ASSERT_EQ(run(dir, {"sweep", "table", file.string(), "--csv", (dir / "table.csv").string()}, dir / "table.log"), 0);
  const std::string csv = test_support::read_text(dir / "table.csv");
  EXPECT_EQ(csv.rfind("run_id,train.seed,state,loss_16,loss_64\n", 0), 0u) << csv;
  EXPECT_EQ(count(csv, ",done,"), 2u) << csv;
  EXPECT_NE(test_support::read_text(dir / "table.log").find("val@64"), std::string::npos);
  // Mean over seeds is export table's table, not a second builder.
  ASSERT_EQ(run(dir, {"sweep", "table", file.string(), "--mean-over-seeds"}, dir / "mean.log"), 0);
  ASSERT_EQ(run(dir, {"export", "table", file.string()}, dir / "export.log"), 0);
  EXPECT_EQ(test_support::read_text(dir / "mean.log"), test_support::read_text(dir / "export.log"));
  EXPECT_NE(test_support::read_text(dir / "mean.log").find("± "), std::string::npos)
      << test_support::read_text(dir / "mean.log");
  fs::remove_all(dir);
}

// A sweep file edited while `sweep run` runs (a seed added) moves runs to other indices: a worker
// launched for the old run #1 refuses, naming the change, instead of training whatever is #1 now.
TEST(SweepCommand, AWorkerRefusesARunWhoseIdChangedUnderItsIndex) {
  const fs::path dir = fresh_dir("edited");
  const fs::path file = write_sweep(dir, "edited", 10, "[0, 2]");
  const auto before = harness::sweeps::load_sweep(file.string());
  write_sweep(dir, "edited", 10, "[0, 1, 2]");
  const auto after = harness::sweeps::load_sweep(file.string());
  ASSERT_NE(before.runs[1].id, after.runs[1].id);
  EXPECT_EQ(run(dir, {"sweep", "run-one", file.string(), "--index", "1", "--expect-id", before.runs[1].id},
                dir / "edited.log"),
            2);
  const std::string log = test_support::read_text(dir / "edited.log");
  EXPECT_NE(log.find("the sweep file changed since `sweep run` started: run #1 was " + before.runs[1].id + ", now " +
                     after.runs[1].id + " (train.seed=1)"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(after.runs[1].run_dir + "/run.h5"));
  // The id it expects: the run goes ahead.
  EXPECT_EQ(run(dir, {"sweep", "run-one", file.string(), "--index", "1", "--expect-id", after.runs[1].id},
                dir / "same.log"),
            0)
      << test_support::read_text(dir / "same.log");
  fs::remove_all(dir);
}

TEST(SweepCommand, ConcurrentRunnersTrainEachRunOnce) {
  const fs::path dir = fresh_dir("concurrent");
  const int steps = 40;
  const fs::path file = write_sweep(dir, "twice", steps, "[0, 1, 2]");
  const auto sweep = harness::sweeps::load_sweep(file.string());
  const std::vector<std::string> args = {"sweep", "run", file.string(), "--jobs", "2", "--threads-per-job", "1"};
  const pid_t a = test_support::spawn_harness(dir, args, dir / "a.log");
  const pid_t b = test_support::spawn_harness(dir, args, dir / "b.log");
  EXPECT_EQ(test_support::wait_exit(a), 0) << test_support::read_text(dir / "a.log");
  EXPECT_EQ(test_support::wait_exit(b), 0) << test_support::read_text(dir / "b.log");
  for (const auto& r : sweep.runs) {
    const std::string run_dir = (dir / r.run_dir).string();
    const std::string worker_log = test_support::read_text(run_dir + "/worker.log");
    EXPECT_EQ(count(worker_log, "starting run"), 1u) << worker_log;
    EXPECT_EQ(count(worker_log, "resuming run"), 0u) << worker_log;
    EXPECT_EQ(count(test_support::read_text(run_dir + "/train.log"), " (id " + r.id + ")"), 1u);  // one fresh start
    expect_complete_without_duplicates(run_dir, steps);
  }
  fs::remove_all(dir);
}
