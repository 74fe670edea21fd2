// Data-parallel training under faults (harness/distributed): a killed, hung or terminated rank is
// named and the run resumes, also with another world size; a taken port, mismatched configs and
// an indivisible batch are clear errors. Helpers: distributed_support.h.
#include <gtest/gtest.h>

#include "distributed_support.h"

using namespace dist_test;

namespace {
// The pid of the harness process whose command line mentions `needle` and whose environment has
// RANK=`rank` (a torchrun worker), or -1.
pid_t find_rank(const std::string& needle, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = test_support::read_text(entry.path() / "cmdline"), environ = test_support::read_text(entry.path() / "environ");
    for (auto* text : {&cmdline, &environ})
      for (char& c : *text)
        if (c == '\0') c = '\n';
    if (cmdline.find(needle) != std::string::npos && cmdline.find("python") == std::string::npos &&
        ("\n" + environ).find("\nRANK=" + std::to_string(rank) + "\n") != std::string::npos)
      return pid_t(std::stoi(name));
  }
  return -1;
}
}  // namespace

TEST(DataParallel, TorchrunRestartsAKilledRankAndTheRunResumes) {
  if (torchrun_command().empty()) GTEST_SKIP() << "no project Python with torchrun (scripts/install-python.sh)";
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(30));
  const auto one = train_one_process(tmp.path, config), dir = tmp.path / "restarted";
  const auto log = tmp.path / "torchrun.log";
  const pid_t torchrun = ::fork();
  if (torchrun == 0) {
    // Saves slowed to 1.5 s (a test hook) keep the 30 steps running long enough to be interrupted.
    const std::string cmd = "HARNESS_TEST_SAVE_DELAY_MS=1500 exec " + torchrun_command() +
                            " --nproc_per_node 2 --max_restarts 1 --monitor_interval 1 "
                            "--master_addr 127.0.0.1 --master_port " + std::to_string(harness::distributed::free_local_port()) +
                            " --no_python " + HARNESS_BINARY + " train --no-progress --config " + config.string() +
                            " --run-dir " + dir.string() + " > " + log.string() + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(log);
  const pid_t victim = find_rank(dir.string(), 1);
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGKILL);
  ASSERT_EQ(wait_for(torchrun, std::chrono::seconds(240)), 0) << test_support::read_text(log);
  const auto r = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(r.state, results::RunState::kDone);
  expect_same_record(r, results::read_run_file((one / "run.h5").string()), 1e-5);
  expect_same_parameters(checkpoint_parameters(config, dir), checkpoint_parameters(config, one), 1e-5);
  EXPECT_NE(test_support::read_text(dir / "train.log").find("resuming"), std::string::npos);
}

TEST(DataParallel, ASaveSlowerThanTheTimeoutIsNoLostRank) {
  // Rank 0 takes 7 s per save (a test hook) with run.dist_timeout = 4 s: the other rank waits for
  // the save at the save barrier (allowance 10 × 4 s) instead of failing a collective.
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(10));
  const auto dir = tmp.path / "slow";
  ASSERT_EQ(run_harness("train --no-progress --nproc 2 --set run.dist_timeout=4 --config " + config.string() +
                            " --run-dir " + dir.string(),
                        tmp.path / "slow.log", "HARNESS_TEST_SAVE_DELAY_MS=7000"),
            0) << test_support::read_text(tmp.path / "slow.log");
  const auto r = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(r.state, results::RunState::kDone);
  EXPECT_EQ(r.train.step.size(), 10u);
}

TEST(DataParallel, ResumesWithAnotherWorldSize) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(20));
  const std::string base =
      "train --no-progress --set train.micro_batch_size=2 --config " + config.string() + " --run-dir ";
  const auto whole = tmp.path / "whole", down = tmp.path / "down", up = tmp.path / "up";
  ASSERT_EQ(run_harness(base + whole.string(), tmp.path / "whole.log"), 0) << test_support::read_text(tmp.path / "whole.log");
  // 2 → 1: two ranks stop after 10 steps (interrupted as asked: exit 0), one process finishes.
  EXPECT_EQ(run_harness(base + down.string() + " --nproc 2 --stop-after-steps 10", tmp.path / "d1.log"), 0)
      << test_support::read_text(tmp.path / "d1.log");
  EXPECT_EQ(results::read_run_file((down / "run.h5").string()).status_step, 10);
  ASSERT_EQ(run_harness(base + down.string() + " --resume", tmp.path / "d2.log"), 0) << test_support::read_text(tmp.path / "d2.log");
  // 1 → 2.
  EXPECT_EQ(run_harness(base + up.string() + " --stop-after-steps 10", tmp.path / "u1.log"), 0);
  ASSERT_EQ(run_harness(base + up.string() + " --nproc 2 --resume", tmp.path / "u2.log"), 0) << test_support::read_text(tmp.path / "u2.log");
  const auto reference = results::read_run_file((whole / "run.h5").string());
  for (const auto& dir : {down, up}) {
    SCOPED_TRACE(dir.string());
    expect_same_record(results::read_run_file((dir / "run.h5").string()), reference, 1e-5);
    expect_same_parameters(checkpoint_parameters(config, dir), checkpoint_parameters(config, whole), 1e-5);
  }
}

TEST(DataParallel, AKilledRankStopsTheOthersNamingItAndTheRunResumes) {
  test_support::TempDir tmp;
  const auto ranks = start_two_ranks(tmp.path, 10);
  const auto& [dir, args, r0, r1] = ranks;
  // Kill rank 1 once a checkpoint exists.
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(tmp.path / "r0.log");
  ::kill(r1, SIGKILL);
  const auto killed = Clock::now();
  EXPECT_EQ(wait_for(r1, std::chrono::seconds(5)), 128 + SIGKILL);
  const int code = wait_for(r0, std::chrono::seconds(15));  // timeout 10 s + the roll call
  if (code < 0) ::kill(r0, SIGKILL);
  EXPECT_EQ(code, 1) << test_support::read_text(tmp.path / "r0.log");
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - killed).count(), 15.0);
  const std::string log = test_support::read_text(tmp.path / "r0.log");
  EXPECT_NE(log.find("rank 1 stopped answering"), std::string::npos) << log;
  const auto failed = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(failed.state, results::RunState::kFailed);
  EXPECT_NE(failed.reason.find("rank 1"), std::string::npos) << failed.reason;
  // The checkpoint is intact: one process resumes it to the end.
  ASSERT_EQ(run_harness(args + " --resume", tmp.path / "resume.log"), 0)
      << test_support::read_text(tmp.path / "resume.log");
  EXPECT_EQ(results::read_run_file((dir / "run.h5").string()).state, results::RunState::kDone);
}

TEST(DataParallel, WithThreeRanksEverySurvivorNamesTheKilledOne) {
  // Rank 2 is killed; rank 0 sees it at once, rank 1 may sit in its collective until its own
  // timeout. Both must name rank 2, and only rank 2 (rank 1 is blocked, not lost; rank 0 keeps the
  // store up until rank 1 has read the verdict).
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(400));
  const auto dir = tmp.path / "run";
  const std::string args = "train --no-progress --set run.dist_timeout=8 --set eval.every=0 "
                           "--set train.batch_size=6 --config " + config.string() + " --run-dir " + dir.string();
  const int port = harness::distributed::free_local_port();
  std::vector<pid_t> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(start_rank(r, 3, port, args, tmp.path / ("r" + std::to_string(r) + ".log")));
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(tmp.path / "r0.log");
  ::kill(ranks[2], SIGKILL);
  EXPECT_EQ(wait_for(ranks[2], std::chrono::seconds(5)), 128 + SIGKILL);
  for (int r = 0; r < 2; ++r) {
    const int code = wait_for(ranks[size_t(r)], std::chrono::seconds(40));
    if (code < 0) ::kill(ranks[size_t(r)], SIGKILL);
    const std::string log = test_support::read_text(tmp.path / ("r" + std::to_string(r) + ".log"));
    EXPECT_EQ(code, 1) << log;
    EXPECT_NE(log.find("rank 2 stopped answering"), std::string::npos) << "rank " << r << ": " << log;
    EXPECT_EQ(log.find("ranks 1, 2 stopped"), std::string::npos) << "rank " << r << ": " << log;
    EXPECT_EQ(log.find("ranks 0, 2 stopped"), std::string::npos) << "rank " << r << ": " << log;
    EXPECT_EQ(log.find("rank 1 stopped"), std::string::npos) << "rank " << r << ": " << log;
    EXPECT_EQ(log.find("rank 0 (which hosts the rendezvous store) is gone"), std::string::npos) << "rank " << r << ": " << log;
  }
}

TEST(DataParallel, AKilledRankZeroEndsTheOthersAndTheRunResumes) {
  test_support::TempDir tmp;
  const auto ranks = start_two_ranks(tmp.path, 10);
  const auto& [dir, args, r0, r1] = ranks;
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(tmp.path / "r0.log");
  ::kill(r0, SIGKILL);  // rank 0 hosts the store and owns the run directory
  const auto killed = Clock::now();
  EXPECT_EQ(wait_for(r0, std::chrono::seconds(5)), 128 + SIGKILL);
  const int code = wait_for(r1, std::chrono::seconds(15));
  if (code < 0) ::kill(r1, SIGKILL);
  EXPECT_EQ(code, 1) << test_support::read_text(tmp.path / "r1.log");
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - killed).count(), 15.0);
  const std::string log = test_support::read_text(tmp.path / "r1.log");
  EXPECT_NE(log.find("rank 0"), std::string::npos) << log;
  // The last checkpoint is intact (rank 0 died between saves, or its save was atomic).
  ASSERT_EQ(run_harness(args + " --resume", tmp.path / "resume.log"), 0) << test_support::read_text(tmp.path / "resume.log");
  EXPECT_EQ(results::read_run_file((dir / "run.h5").string()).state, results::RunState::kDone);
}

TEST(DataParallel, SigtermToOneRankCheckpointsEveryRankAtOneStep) {
  test_support::TempDir tmp;
  const auto ranks = start_two_ranks(tmp.path, 20);
  const auto& [dir, args, r0, r1] = ranks;
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(tmp.path / "r0.log");
  ::kill(r1, SIGTERM);  // one rank only: the flag rides the next all-reduce to rank 0
  const int c1 = wait_for(r1, std::chrono::seconds(30)), c0 = wait_for(r0, std::chrono::seconds(30));
  if (c0 < 0) ::kill(r0, SIGKILL);
  if (c1 < 0) ::kill(r1, SIGKILL);
  EXPECT_EQ(c0, 130) << test_support::read_text(tmp.path / "r0.log");
  EXPECT_EQ(c1, 130) << test_support::read_text(tmp.path / "r1.log");
  const auto r = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(r.state, results::RunState::kInterrupted);
  EXPECT_NE(r.reason.find("a signal to another rank"), std::string::npos) << r.reason;
  // Rank 0's checkpoint is at the step the run stopped at: the resume continues from there.
  const auto loaded = harness::config::load_run_config((tmp.path / "tiny.yaml").string());
  models::GPT model(harness::config::gpt_options(loaded.config, 256));
  models::Optimizers optim(model, loaded.config.optim);
  const auto state = harness::train::load_checkpoint(newest_checkpoint(dir.string()), model, optim);
  EXPECT_EQ(state.step, r.status_step);
}

TEST(DataParallel, OverlappedBucketsWithRealProcessesEqualOneBucket) {
  // 4 KiB buckets: the 2-layer model's gradients go in many all-reduces started during the
  // backward; the result must be the one-bucket result.
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(10));
  const auto one = tmp.path / "one", many = tmp.path / "many";
  const std::string base = "train --no-progress --nproc 2 --config " + config.string() + " --run-dir ";
  ASSERT_EQ(run_harness(base + one.string(), tmp.path / "one.log"), 0) << test_support::read_text(tmp.path / "one.log");
  ASSERT_EQ(run_harness(base + many.string(), tmp.path / "many.log", "HARNESS_GRAD_BUCKET_KB=4"), 0)
      << test_support::read_text(tmp.path / "many.log");
  expect_same_record(results::read_run_file((many / "run.h5").string()),
                     results::read_run_file((one / "run.h5").string()), 1e-6);
  expect_same_parameters(checkpoint_parameters(config, many), checkpoint_parameters(config, one), 1e-6);
}

TEST(DataParallel, ATakenPortIsReportedForTheLauncherToRetry) {
  // Rank 0 cannot listen on a port held by another process: it exits with kExitPortInUse (75)
  // before anything is written, the code on which the --nproc launcher starts the ranks again on
  // another port.
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(4));
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(held, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(held, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const auto dir = tmp.path / "run";
  const pid_t r0 = start_rank(0, 2, port, "train --no-progress --set run.dist_timeout=10 --config " + config.string() +
                                              " --run-dir " + dir.string(), tmp.path / "r0.log");
  const int code = wait_for(r0, std::chrono::seconds(30));
  ::close(held);
  EXPECT_EQ(code, harness::kExitPortInUse) << test_support::read_text(tmp.path / "r0.log");
  EXPECT_NE(test_support::read_text(tmp.path / "r0.log").find("the port is taken"), std::string::npos) << test_support::read_text(tmp.path / "r0.log");
  EXPECT_FALSE(fs::exists(dir / "run.h5"));
}

TEST(DataParallel, TwoTwoRankRunsStartedTogetherBothFinish) {
  // Two launchers probe free ports at the same moment; a collision is retried, never a failure.
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(10));
  const auto one = train_one_process(tmp.path, config);
  const auto reference = results::read_run_file((one / "run.h5").string());
  std::vector<pid_t> launchers;
  for (const char* name : {"a", "b"}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string cmd = std::string("exec ") + HARNESS_BINARY + " train --no-progress --nproc 2 --config " +
                              config.string() + " --run-dir " + (tmp.path / name).string() + " > " +
                              (tmp.path / (std::string(name) + ".log")).string() + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    launchers.push_back(pid);
  }
  for (size_t i = 0; i < launchers.size(); ++i) {
    const std::string name = i == 0 ? "a" : "b";
    EXPECT_EQ(wait_for(launchers[i], std::chrono::seconds(180)), 0) << test_support::read_text(tmp.path / (name + ".log"));
    expect_same_record(results::read_run_file((tmp.path / name / "run.h5").string()), reference, 1e-5);
  }
}

TEST(DataParallel, AHungRankIsNamedAfterTheTimeout) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(400));
  const auto dir = tmp.path / "run";
  const std::string args = "train --no-progress --set run.dist_timeout=3 --set eval.every=0 --config " +
                           config.string() + " --run-dir " + dir.string();
  const int port = harness::distributed::free_local_port();
  const pid_t r0 = start_rank(0, 2, port, args, tmp.path / "r0.log");
  const pid_t r1 = start_rank(1, 2, port, args, tmp.path / "r1.log");
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(tmp.path / "r0.log");
  ::kill(r1, SIGSTOP);
  const int code = wait_for(r0, std::chrono::seconds(15));
  ::kill(r1, SIGKILL);
  wait_for(r1, std::chrono::seconds(5));
  if (code < 0) ::kill(r0, SIGKILL);
  EXPECT_EQ(code, 1);
  const std::string log = test_support::read_text(tmp.path / "r0.log");
  EXPECT_NE(log.find("rank 1 stopped answering"), std::string::npos) << log;
}

TEST(DataParallel, RanksWithDifferentConfigsFailAtTheRendezvous) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(20));
  const auto dir = tmp.path / "run";
  const std::string args = "train --no-progress --set run.dist_timeout=10 --config " + config.string() +
                           " --run-dir " + dir.string();
  const int port = harness::distributed::free_local_port();
  const pid_t r0 = start_rank(0, 2, port, args, tmp.path / "r0.log");
  const pid_t r1 = start_rank(1, 2, port, args + " --set train.seed=6", tmp.path / "r1.log");
  EXPECT_EQ(wait_for(r0, std::chrono::seconds(15)), 1);
  EXPECT_EQ(wait_for(r1, std::chrono::seconds(15)), 1);
  const std::string log = test_support::read_text(tmp.path / "r0.log");
  EXPECT_NE(log.find("rank 1 has run id"), std::string::npos) << log;
  EXPECT_NE(log.find("different configs"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(DataParallel, ABatchTheRanksDoNotDivideIsALocatedError) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(20));
  const auto dir = tmp.path / "run";
  EXPECT_EQ(run_harness("train --nproc 3 --config " + config.string() + " --run-dir " + dir.string(), tmp.path / "log"), 2);
  const std::string log = test_support::read_text(tmp.path / "log");
  EXPECT_NE(log.find("tiny.yaml:4:"), std::string::npos) << log;  // train.batch_size's line
  EXPECT_NE(log.find("train.batch_size (8) is not divisible by the world size (3 ranks, from --nproc 3)"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir));
  // A micro-batch that does not divide a rank's share (12 / 2 = 6): located at the key.
  EXPECT_EQ(run_harness("train --nproc 2 --set train.batch_size=12 --set train.micro_batch_size=4 --config " +
                        config.string() + " --run-dir " + dir.string(), tmp.path / "log2"), 2);
  const std::string log2 = test_support::read_text(tmp.path / "log2");
  EXPECT_NE(log2.find("--set train.micro_batch_size=4"), std::string::npos) << log2;
  EXPECT_NE(log2.find("(12 / 2 ranks = 6)"), std::string::npos) << log2;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(DataParallel, ASweepRunsEachRunAsTwoLocalRanks) {
  test_support::TempDir tmp;
  std::ofstream(tmp.path / "sweep.yaml")
      << "name: dp\nbase:\n  data: {corpus: '" << HARNESS_TEST_DATA << "/sotu'}\n"
      << "  model: {layers: 1, d_model: 32, heads: 2}\n  train: {context: 16, batch_size: 4, steps: 10}\n"
      << "  eval: {contexts: [L], windows: 4}\n  run: {out_dir: '" << (tmp.path / "runs").string() << "'}\n"
      << "seeds: [0]\n";
  ASSERT_EQ(run_harness("sweep run " + (tmp.path / "sweep.yaml").string() + " --nproc-per-run 2 --no-live",
                        tmp.path / "log"), 0) << test_support::read_text(tmp.path / "log");
  int runs = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path / "runs" / "dp")) {
    if (!fs::exists(entry.path() / "run.h5")) continue;
    const auto r = results::read_run_file((entry.path() / "run.h5").string());
    EXPECT_EQ(r.state, results::RunState::kDone);
    EXPECT_EQ(r.config_ints.at("world_size"), 2);
    ++runs;
  }
  EXPECT_EQ(runs, 1);
}

TEST(DataParallel, SigtermToTheLauncherCheckpointsEveryRankAtOneStep) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(2000));
  const auto dir = tmp.path / "run";
  const std::string args = "train --no-progress --nproc 2 --set eval.every=0 --config " + config.string() +
                           " --run-dir " + dir.string();
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    const std::string cmd = std::string("exec ") + HARNESS_BINARY + " " + args + " > " +
                            (tmp.path / "log").string() + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(wait_for_checkpoint(dir)) << test_support::read_text(tmp.path / "log");
  ::kill(launcher, SIGTERM);
  const int code = wait_for(launcher, std::chrono::seconds(30));
  if (code < 0) ::kill(launcher, SIGKILL);
  EXPECT_EQ(code, 130) << test_support::read_text(tmp.path / "log");
  const auto r = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(r.state, results::RunState::kInterrupted);
  EXPECT_LT(r.status_step, 2000);
  // The checkpoint is the stop's: resuming continues from that step.
  ASSERT_EQ(run_harness("train --no-progress --resume --set train.steps=" + std::to_string(r.status_step + 5) +
                            " --set eval.every=0 --config " + config.string() + " --run-dir " + dir.string(),
                        tmp.path / "resume.log"), 2)
      << "a changed train.steps is a changed run: refused";
  ASSERT_EQ(run_harness("train --no-progress --resume --stop-after-steps 5 --set eval.every=0 --config " +
                            config.string() + " --run-dir " + dir.string(), tmp.path / "resume.log"), 0)
      << test_support::read_text(tmp.path / "resume.log");
  EXPECT_EQ(results::read_run_file((dir / "run.h5").string()).status_step, r.status_step + 5);
}
