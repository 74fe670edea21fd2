// What the data-parallel tests share (distributed_test.cpp, distributed_faults_test.cpp): a tiny
// config, the harness started as one process or as ranks with torchrun's variables, and the
// comparisons that say two runs trained the same thing.
#pragma once

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
#include "common/errors.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "results/run_file.h"
#include "test_support.h"

namespace dist_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Muon + Adam (the default optimiser), two layers, validation at L and 4L with attention
// statistics on 8 windows in batches of 2 (so two ranks split four batches).
inline std::string tiny_yaml(int steps) {
  return std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" +
         (fs::temp_directory_path() / "harness-dist-cache").string() + "'}\n" +
         "model: {layers: 2, d_model: 32, heads: 2}\n"
         "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
         "train: {context: 32, batch_size: 8, steps: " + std::to_string(steps) + ", seed: 5, grad_clip: 1.0}\n"
         "eval: {contexts: [L, 4L], windows: 8, batch_size: 2, every: 10, attention_queries: 8}\n"
         "run: {threads: 1, checkpoint_every: 5, dist_timeout: 20}\n";
}

inline fs::path write_config(const fs::path& dir, const std::string& yaml) {
  fs::create_directories(dir);
  const auto path = dir / "tiny.yaml";
  std::ofstream(path) << yaml;
  return path;
}

// `harness train ...`; returns the exit code, output in `log`.
inline int run_harness(const std::string& args, const fs::path& log, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(HARNESS_BINARY) + " " + args + " > " +
                          log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One rank started by hand with torchrun's variables (what a launcher or srun does).
inline pid_t start_rank(int rank, int world, int port, const std::string& args, const fs::path& log) {
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
inline int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

inline std::string newest_checkpoint(const std::string& run_dir) {
  const auto entries = harness::train::RunCheckpoints(run_dir).entries();
  if (entries.empty()) throw std::runtime_error(run_dir + ": no checkpoint");
  return (fs::path(run_dir) / entries.back().file).string();
}

// Waits (at most 2 minutes) until the run in `dir` has written its first checkpoint.
inline bool wait_for_checkpoint(const fs::path& dir) {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!fs::exists(dir / "checkpoints.tsv") && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return fs::exists(dir / "checkpoints.tsv");
}

inline void expect_close(double a, double b, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(a - b), rel * std::max(1.0, std::fabs(b))) << what << ": " << a << " vs " << b;
}

inline void expect_same_record(const results::RunRecord& a, const results::RunRecord& b, double rel) {
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

inline std::vector<torch::Tensor> checkpoint_parameters(const fs::path& config, const fs::path& run_dir) {
  const auto loaded = harness::config::load_run_config(config.string());
  models::GPT model(harness::config::gpt_options(loaded.config, 256));
  models::Optimizers optim(model, loaded.config.optim);
  harness::train::load_checkpoint(newest_checkpoint(run_dir.string()), model, optim);
  return model->parameters();
}

// ‖a − b‖ / ‖b‖ per parameter tensor. Not element-wise: Adam (eps 1e-10) turns a gradient
// element that cancels to ~1e-9 into a ±lr step whose sign follows the summation order, so a few
// embedding rows differ by ~1e-4 while the tensor agrees to ~1e-6.
inline void expect_same_parameters(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = (a[i] - b[i]).to(torch::kDouble).norm().item<double>();
    const double norm = b[i].to(torch::kDouble).norm().item<double>();
    EXPECT_LE(diff, rel * norm) << "parameter " << i << ": ‖a − b‖ = " << diff << ", ‖b‖ = " << norm;
  }
}

// `config` trained by one process in tmp/one: what every data-parallel run of it must equal.
inline fs::path train_one_process(const fs::path& tmp, const fs::path& config) {
  const auto one = tmp / "one";
  EXPECT_EQ(run_harness("train --no-progress --config " + config.string() + " --run-dir " + one.string(),
                        tmp / "one.log"), 0) << test_support::read_text(tmp / "one.log");
  return one;
}

// torchrun of the project's pinned torch (`python -m torch.distributed.run` is the `torchrun`
// command), or "" where there is no project Python.
inline std::string torchrun_command() {
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
inline TwoRanks start_two_ranks(const fs::path& tmp, int dist_timeout) {
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

}  // namespace dist_test
