// Data-parallel training (harness/distributed): ranks are real processes of the harness executable
// talking c10d Gloo over loopback. Two ranks must train what one process trains (within float
// rounding), resume across world sizes, and fail cleanly, naming the lost rank, when one dies.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "harness/config/engine_options.h"
#include "harness/config/schema.h"
#include "harness/distributed/gradient_reducer.h"
#include "harness/distributed/process_group.h"
#include "harness/distributed/world.h"
#include "harness/train/checkpoint.h"
#include "harness/common/errors.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Muon + Adam (the default optimiser), two layers, validation at L and 4L with attention
// statistics on 8 windows in batches of 2 (so two ranks split four batches).
std::string tiny_yaml(int steps) {
  return std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" +
         (fs::temp_directory_path() / "harness-dist-cache").string() + "'}\n" +
         "model: {layers: 2, d_model: 32, heads: 2}\n"
         "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
         "train: {context: 32, batch_size: 8, steps: " + std::to_string(steps) + ", seed: 5, grad_clip: 1.0}\n"
         "eval: {contexts: [L, 4L], windows: 8, batch_size: 2, every: 10, attention_queries: 8}\n"
         "run: {threads: 1, checkpoint_every: 5, dist_timeout: 20}\n";
}

fs::path write_config(const fs::path& dir, const std::string& yaml) {
  fs::create_directories(dir);
  const auto path = dir / "tiny.yaml";
  std::ofstream(path) << yaml;
  return path;
}

// `harness train ...`; returns the exit code, output in `log`.
int run_harness(const std::string& args, const fs::path& log, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(HARNESS_BINARY) + " " + args + " > " +
                          log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One rank started by hand with torchrun's variables (what a launcher or srun does).
pid_t start_rank(int rank, int world, int port, const std::string& args, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    const std::string cmd = std::string("exec ") + HARNESS_BINARY + " " + args + " > " + log.string() + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits for `pid` at most `limit`; returns its exit code, or -1 on time-out.
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

std::string newest_checkpoint(const std::string& run_dir) {
  const auto entries = harness::train::RunCheckpoints(run_dir).entries();
  if (entries.empty()) throw std::runtime_error(run_dir + ": no checkpoint");
  return (fs::path(run_dir) / entries.back().file).string();
}

// Waits (at most 2 minutes) until the run in `dir` has written its first checkpoint.
bool wait_for_checkpoint(const fs::path& dir) {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!fs::exists(dir / "checkpoints.tsv") && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return fs::exists(dir / "checkpoints.tsv");
}

void expect_close(double a, double b, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(a - b), rel * std::max(1.0, std::fabs(b))) << what << ": " << a << " vs " << b;
}

void expect_same_record(const results::RunRecord& a, const results::RunRecord& b, double rel) {
  ASSERT_EQ(a.train.loss.size(), b.train.loss.size());
  for (size_t i = 0; i < a.train.loss.size(); ++i) {
    expect_close(a.train.loss[i], b.train.loss[i], rel, "train loss at step " + std::to_string(i + 1));
    expect_close(a.train.grad_norm[i], b.train.grad_norm[i], 1e-4, "grad norm at step " + std::to_string(i + 1));
  }
  ASSERT_EQ(a.eval.size(), b.eval.size());
  for (const auto& [T, rows] : b.eval) {
    const auto& other = a.eval.at(T);
    ASSERT_EQ(other.loss.size(), rows.loss.size());
    for (size_t e = 0; e < rows.loss.size(); ++e) {
      expect_close(other.loss[e], rows.loss[e], rel, "validation loss at " + std::to_string(T));
      for (size_t l = 0; l < rows.score_std[e].size(); ++l)
        expect_close(other.score_std[e][l], rows.score_std[e][l], 1e-4, "score std");
      for (size_t k = 0; k < rows.position_loss[e].size(); ++k)
        expect_close(other.position_loss[e][k], rows.position_loss[e][k], rel, "position loss");
    }
    ASSERT_FALSE(rows.attention.arrays.empty());
    for (const auto& [name, array] : rows.attention.arrays) {
      const auto& mine = other.attention.arrays.at(name);
      ASSERT_EQ(mine.shape, array.shape) << name;
      for (size_t i = 0; i < array.values.size(); ++i) {
        if (std::isnan(array.values[i])) {
          EXPECT_TRUE(std::isnan(mine.values[i])) << name << "[" << i << "]";
          continue;
        }
        expect_close(mine.values[i], array.values[i], 1e-4, "/eval/" + std::to_string(T) + "/attention/" + name);
      }
    }
  }
}

std::vector<torch::Tensor> checkpoint_parameters(const fs::path& config, const fs::path& run_dir) {
  const auto loaded = harness::config::load_run_config(config.string());
  models::GPT model(harness::config::gpt_options(loaded.config, 256));
  models::Optimizers optim(model, loaded.config.optim);
  harness::train::load_checkpoint(newest_checkpoint(run_dir.string()), model, optim);
  return model->parameters();
}

// ‖a − b‖ / ‖b‖ per parameter tensor. Not element-wise: Adam (eps 1e-10) turns a gradient
// element that cancels to ~1e-9 into a ±lr step whose sign follows the summation order, so a few
// embedding rows differ by ~1e-4 while the tensor agrees to ~1e-6.
void expect_same_parameters(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = (a[i] - b[i]).to(torch::kDouble).norm().item<double>();
    const double norm = b[i].to(torch::kDouble).norm().item<double>();
    EXPECT_LE(diff, rel * norm) << "parameter " << i << ": ‖a − b‖ = " << diff << ", ‖b‖ = " << norm;
  }
}

// `config` trained by one process in tmp/one: what every data-parallel run of it must equal.
fs::path train_one_process(const fs::path& tmp, const fs::path& config) {
  const auto one = tmp / "one";
  EXPECT_EQ(run_harness("train --no-progress --config " + config.string() + " --run-dir " + one.string(),
                        tmp / "one.log"), 0) << test_support::read_text(tmp / "one.log");
  return one;
}

// torchrun of the project's pinned torch (`python -m torch.distributed.run` is the `torchrun`
// command), or "" where there is no project Python.
std::string torchrun_command() {
  const std::string python = test_support::project_python();
  return python.empty() ? "" : python + " -m torch.distributed.run";
}

// A long run (400 steps, no validation) on two ranks started by hand; each rank's output in
// r<rank>.log under `tmp`.
struct TwoRanks {
  fs::path dir;
  std::string args;  // the command line both ranks run (plus --resume, to continue it)
  pid_t r0 = -1, r1 = -1;
};
TwoRanks start_two_ranks(const fs::path& tmp, int dist_timeout) {
  TwoRanks t;
  const auto config = write_config(tmp, tiny_yaml(400));
  t.dir = tmp / "run";
  t.args = "train --no-progress --set run.dist_timeout=" + std::to_string(dist_timeout) +
           " --set eval.every=0 --config " + config.string() + " --run-dir " + t.dir.string();
  const int port = harness::distributed::free_local_port();
  t.r0 = start_rank(0, 2, port, t.args, tmp / "r0.log");
  t.r1 = start_rank(1, 2, port, t.args, tmp / "r1.log");
  return t;
}

}  // namespace

TEST(DataParallel, WorldFromTorchrunAndSlurmVariables) {
  using harness::distributed::world_from_environment;
  std::map<std::string, std::string> env;
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(world_from_environment(getenv).distributed());
  env = {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
         {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"}};
  auto w = world_from_environment(getenv);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_EQ(w.master_addr, "node7");
  EXPECT_EQ(w.master_port, 29400);
  // Slurm: an srun step's task; the port follows the job id.
  env = {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"},
         {"SLURM_NTASKS_PER_NODE", "2(x2)"}, {"SLURM_JOB_ID", "123456"}, {"MASTER_ADDR", "n1"}};
  w = world_from_environment(getenv);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_EQ(w.master_port, harness::distributed::slurm_port(123456, 0));
  EXPECT_FALSE(w.join_agent_store);
  // The step's node list (not the job's), its layout at this node, a port per job and step.
  env = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "3"},
         {"SLURM_NODEID", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_TASKS_PER_NODE", "4(x2)"},
         {"SLURM_JOB_ID", "123456"}, {"SLURM_JOB_NODELIST", "node[01-08]"},
         {"SLURM_STEP_NODELIST", "node[03-05,07]"}};
  w = world_from_environment(getenv);
  EXPECT_EQ(w.master_addr, "node03");
  EXPECT_EQ(w.local_size, 1);  // the fourth node of 2,2,2,1
  EXPECT_EQ(w.master_port, 12000 + (16 * 3456 + 3) % 20000);
  EXPECT_NE(w.master_port, harness::distributed::slurm_port(123456, 2));  // two steps of one job differ
  for (long long job : {0LL, 1LL, 19999LL, 123456LL, 9999999LL})
    for (long long step : {0LL, 15LL}) {
      const int port = harness::distributed::slurm_port(job, step);
      EXPECT_GE(port, 1024);
      EXPECT_LT(port, 32768);  // below Linux's ephemeral range
    }
  env.erase("SLURM_STEP_TASKS_PER_NODE");  // srun --ntasks=N: the job's layout
  env["SLURM_NODEID"] = "1";
  EXPECT_EQ(world_from_environment(getenv).local_size, 4);
  // torchrun's static rendezvous: join its agent's store, keys of this attempt.
  env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
         {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}};
  w = world_from_environment(getenv);
  EXPECT_TRUE(w.join_agent_store);
  EXPECT_EQ(w.restart_count, 2);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(world_from_environment(getenv).join_agent_store);
  // The batch script itself (no step) is no rank.
  env = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "1"},
         {"SLURM_JOB_NODELIST", "n[1-2]"}};
  EXPECT_FALSE(world_from_environment(getenv).distributed());
  env["SLURM_STEP_ID"] = "0";
  EXPECT_TRUE(world_from_environment(getenv).distributed());
  // Bad values name the variable.
  env = {{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}};
  try {
    world_from_environment(getenv);
    FAIL() << "RANK = WORLD_SIZE accepted";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='4'"), std::string::npos) << e.what();
  }
  env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}};
  EXPECT_THROW(world_from_environment(getenv), harness::InputError);  // no MASTER_PORT
}

TEST(DataParallel, SlurmHostListsAndTaskLayouts) {
  using harness::distributed::expand_hostlist;
  using harness::distributed::expand_tasks_per_node;
  EXPECT_EQ(expand_hostlist("node[01-04,07]"),
            (std::vector<std::string>{"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expand_hostlist("gpu5"), (std::vector<std::string>{"gpu5"}));
  EXPECT_EQ(expand_hostlist("a[8-10]-ib,b1"), (std::vector<std::string>{"a8-ib", "a9-ib", "a10-ib", "b1"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (std::vector<std::string>{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)"), (std::vector<int>{1, 3, 3}));
  for (const char* bad : {"node[01-", "node[3-1]", "node[a]", "", "x,,y"})
    EXPECT_THROW(expand_hostlist(bad), harness::InputError) << bad;
  for (const char* bad : {"2(x)", "2(3)", "0", "x", "2(x3"})
    EXPECT_THROW(expand_tasks_per_node(bad), harness::InputError) << bad;
}

TEST(DataParallel, GlooListensWhereTheOtherHostsReachIt) {
  using harness::distributed::gloo_listen_address;
  harness::distributed::World w;
  w.size = 4;
  w.local_size = 2;
  w.spans_hosts = true;
  w.master_addr = "node1";
  w.source = "torchrun variables";
  auto one_host = w;
  one_host.spans_hosts = false;
  const std::vector<harness::distributed::Interface> lo_eth{{"lo", "127.0.0.1"}, {"eth0", "10.1.2.3"}};
  // One host: loopback is right. Several: the route's address, unless it is loopback (Debian's
  // 127.0.1.1 for the host's own name), then the one other interface.
  EXPECT_EQ(gloo_listen_address(one_host, "127.0.1.1", lo_eth), "127.0.1.1");
  EXPECT_EQ(gloo_listen_address(w, "10.1.2.3", lo_eth), "10.1.2.3");
  EXPECT_EQ(gloo_listen_address(w, "127.0.1.1", lo_eth), "10.1.2.3");
  try {
    gloo_listen_address(w, "127.0.1.1", {{"lo", "127.0.0.1"}, {"eth0", "10.1.2.3"}, {"ib0", "192.168.7.1"}});
    FAIL() << "two candidate interfaces accepted";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GLOO_SOCKET_IFNAME"), std::string::npos) << msg;
    EXPECT_NE(msg.find("eth0 10.1.2.3, ib0 192.168.7.1"), std::string::npos) << msg;
  }
  EXPECT_THROW(gloo_listen_address(w, "127.0.1.1", {{"lo", "127.0.0.1"}}), std::runtime_error);
  // Which worlds span hosts.
  std::map<std::string, std::string> env{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_TRUE(harness::distributed::world_from_environment(getenv).spans_hosts);
  env["LOCAL_WORLD_SIZE"] = "4";
  EXPECT_FALSE(harness::distributed::world_from_environment(getenv).spans_hosts);
  env.erase("LOCAL_WORLD_SIZE");  // not said: taken as one host
  EXPECT_FALSE(harness::distributed::world_from_environment(getenv).spans_hosts);
}

TEST(DataParallel, TwoRanksTrainWhatOneProcessTrains) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(20));
  const auto one = train_one_process(tmp.path, config), two = tmp.path / "two";
  ASSERT_EQ(run_harness("train --no-progress --nproc 2 --config " + config.string() + " --run-dir " + two.string(),
                    tmp.path / "two.log"), 0) << test_support::read_text(tmp.path / "two.log");
  const std::string log = test_support::read_text(tmp.path / "two.log");
  EXPECT_NE(log.find("data parallel: 2 ranks over gloo"), std::string::npos) << log;
  const auto a = results::read_run_file((two / "run.h5").string());
  const auto b = results::read_run_file((one / "run.h5").string());
  EXPECT_EQ(a.config_ints.at("world_size"), 2);
  EXPECT_EQ(b.config_ints.at("world_size"), 1);
  EXPECT_EQ(a.config.at("hash"), b.config.at("hash"));  // the world size is not in the run id
  expect_same_record(a, b, 1e-5);
  expect_same_parameters(checkpoint_parameters(config, two), checkpoint_parameters(config, one), 1e-5);
  // Only rank 0 writes the directory.
  EXPECT_FALSE(fs::exists(two / "run.h5.tmp"));
}

// A real torchrun (the pinned torch's): the static rendezvous, where torchrun's agent hosts the
// store on MASTER_PORT and rank 0 must join it, and --standalone.
TEST(DataParallel, ARealTorchrunTrainsWhatOneProcessTrains) {
  if (torchrun_command().empty()) GTEST_SKIP() << "no project Python with torchrun (scripts/install-python.sh)";
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(10));
  const auto one = train_one_process(tmp.path, config);
  const auto reference = results::read_run_file((one / "run.h5").string());
  const std::vector<std::pair<std::string, std::string>> launches = {
      {"static", "--nproc_per_node 2 --master_addr 127.0.0.1 --master_port " +
                     std::to_string(harness::distributed::free_local_port())},
      {"standalone", "--standalone --nproc_per_node 2"}};
  for (const auto& [name, rendezvous] : launches) {
    SCOPED_TRACE(name);
    const auto dir = tmp.path / name;
    const auto log = tmp.path / (name + ".log");
    const std::string cmd = torchrun_command() + " " + rendezvous + " --no_python " + HARNESS_BINARY +
                            " train --no-progress --config " + config.string() + " --run-dir " + dir.string() +
                            " > " + log.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test_support::read_text(log);
    const auto a = results::read_run_file((dir / "run.h5").string());
    EXPECT_EQ(a.config_ints.at("world_size"), 2);
    expect_same_record(a, reference, 1e-5);
    expect_same_parameters(checkpoint_parameters(config, dir), checkpoint_parameters(config, one), 1e-5);
  }
}

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

// ---- the overlapped gradient all-reduce, in one process ----------------------------------------

namespace {
// A stand-in for W identical ranks: a sum over the ranks is W times this rank's value. Records the
// order buckets start in, and whether the backward pass was still running then.
struct FakeRanks : models::Collectives {
  int world = 2;
  bool backward_done = false;
  std::vector<int64_t> started;  // bucket sizes, in start order
  int during_backward = 0;
  int rank() const override { return 0; }
  int world_size() const override { return world; }
  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
    for (auto& t : tensors) t.mul_(world);
  }
  std::function<void()> all_reduce_sum_start(torch::Tensor flat) override {
    started.push_back(flat.numel());
    if (!backward_done) ++during_backward;
    return [flat, this] { flat.mul_(world); };
  }
  std::vector<torch::Tensor> all_gather(const torch::Tensor& mine) override { return {mine, mine}; }
  void broadcast(std::vector<torch::Tensor>&, int) override {}
};
}  // namespace

TEST(DataParallel, GradientReducerSumsEveryBucketInOrderWhileTheBackwardRuns) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 32),
                            torch::nn::ReLU(), torch::nn::Linear(32, 4));
  // Parameters without a gradient: zeros in the sum, and none after. First in the list, so they
  // are in the last bucket (an unused parameter holds back its bucket and every later one).
  torch::nn::Linear unused(4, 4);
  auto params = unused->parameters();
  for (const auto& p : net->parameters()) params.push_back(p);
  const auto x1 = torch::randn({5, 16}), x2 = torch::randn({5, 16});
  auto loss = [&](const torch::Tensor& x) { return net->forward(x).pow(2).sum(); };

  // Reference: two micro-batches accumulated, no reducer.
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  loss(x1).backward();
  loss(x2).backward();
  std::vector<torch::Tensor> want;
  for (const auto& p : params) want.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());

  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  FakeRanks ranks;
  {
    harness::distributed::GradientReducer reducer(params, ranks, /*bucket_bytes=*/256);  // 4 buckets
    loss(x1).backward();  // not armed: plain accumulation
    EXPECT_TRUE(ranks.started.empty());
    reducer.arm();
    loss(x2).backward();
    ranks.backward_done = true;
    auto extra = torch::tensor({1.5, 0.0}, torch::kDouble);
    reducer.finish(extra);
    EXPECT_DOUBLE_EQ(extra[0].item<double>(), 3.0);
  }
  // Every bucket started once, in the reverse order of the parameters, most during the backward.
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  int64_t started = 0;
  for (size_t i = 0; i + 1 < ranks.started.size(); ++i) started += ranks.started[i];  // last: extra
  EXPECT_EQ(started, total);
  EXPECT_GE(ranks.started.size(), 4u);
  EXPECT_EQ(ranks.during_backward, 3) << "every bucket but the unused parameters' starts in the backward";
  for (size_t n = 0; n < params.size(); ++n) {
    ASSERT_EQ(params[n].grad().defined(), want[n].defined()) << "parameter " << n;
    if (want[n].defined()) {
      EXPECT_TRUE(params[n].grad().allclose(2 * want[n], 1e-6, 1e-7)) << "parameter " << n;
    }
  }
  // The hooks are gone with the reducer: a later backward accumulates as usual.
  const size_t starts = ranks.started.size();
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  loss(x1).backward();
  EXPECT_EQ(ranks.started.size(), starts);
}
