// `--nproc N`: one data-parallel run as N local processes, like `torchrun --standalone`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace harness::distributed {

// Runs this executable with `args` (argv without argv[0]) as `nproc` ranks: each child gets
// torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free
// MASTER_PORT) and dies with the launcher (PR_SET_PDEATHSIG). SIGINT / SIGTERM are passed to every
// rank, which checkpoint together. When a rank fails, the others normally fail on their own
// (naming it); those still running `grace` later are killed. Returns 0 when every rank exits 0,
// 130 when they were interrupted, else the first failing rank's code (128 + signal if killed).
int launch_local(const std::vector<std::string>& args, int nproc, std::chrono::milliseconds grace);

// `args` without the option `name` and its value ("--nproc 2" and "--nproc=2").
std::vector<std::string> without_option(const std::vector<std::string>& args, const std::string& name);

}  // namespace harness::distributed
