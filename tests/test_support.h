// Helpers shared by the tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "results/run_file.h"

namespace test_support {

// A fresh directory named after the running test (and the process, and a counter), removed with
// everything in it when the scope ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test =
        info ? std::string(info->test_suite_name()) + "_" + info->name() : std::string("none");
    for (char& c : test)
      if (c == '/') c = '_';  // parameterised tests are named Suite/Test/0
    path = std::filesystem::temp_directory_path() /
           ("harness_test_" + test + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The project's Python (.venv/, scripts/install-python.sh: the pinned torch with its torchrun,
// h5py, numpy), as CMake found it (HARNESS_PYTHON); "" where there is none (a build against a
// LibTorch of one's own, without `make test`'s environment): tests that need it skip then.
inline std::string project_python() {
#ifdef HARNESS_PYTHON
  if (std::filesystem::exists(HARNESS_PYTHON)) return HARNESS_PYTHON;
#endif
  return "";
}

// A file's whole text ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#ifdef HARNESS_BINARY
// The harness binary with `args` in the background, in `dir`, stdout and stderr appended to `log`.
inline pid_t spawn_harness(const std::filesystem::path& dir, const std::vector<std::string>& args,
                           const std::filesystem::path& log) {
  std::vector<std::string> all = {HARNESS_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string dir_s = dir.string(), log_s = log.string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log_s.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (::chdir(dir_s.c_str()) != 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}
#endif

// A child's exit code (128 + signal when killed); kills it and fails the test after `timeout`.
inline int wait_exit(pid_t pid, std::chrono::seconds timeout = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "process " << pid << " timed out";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether a run has checkpointed at least once (step >= 5) and is still running. (run.h5 is
// published just before the checkpoint is written: a kill in between restarts it from step 0.)
inline bool checkpointed_mid_run(const std::string& run_dir) {
  if (!std::filesystem::exists(run_dir + "/run.h5") || !std::filesystem::exists(run_dir + "/checkpoints.tsv"))
    return false;
  try {
    const auto record = results::read_run_file(run_dir + "/run.h5");
    return record.state == results::RunState::kRunning && record.status_step >= 5;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace test_support
