#include "harness/distributed/launcher.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "common/errors.h"
#include "harness/distributed/process_group.h"
#include "harness/distributed/world.h"

namespace harness::distributed {

namespace {

std::atomic<int> g_launcher_signal{0};
extern "C" void on_launcher_signal(int sig) { g_launcher_signal.store(sig); }

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::vector<std::string> without_option(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind(name + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

namespace {

// HARNESS_PIN_RANKS=1 (opt-in, for bench/dist_scaling.sh's measurement of thread placement):
// the CPUs this launcher may use, split into `nproc` contiguous shares, rank r bound to share r
// (its threads, OpenMP's included, inherit it through exec). Empty: no pinning (the default:
// the kernel places the ranks). Computed before fork().
std::vector<cpu_set_t> rank_cpu_sets(int nproc) {
  const char* pin = std::getenv("HARNESS_PIN_RANKS");
  if (!pin || std::string(pin) != "1" || nproc < 1) return {};
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (int(cpus.size()) < nproc) return {};
  std::vector<cpu_set_t> sets(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    CPU_ZERO(&sets[size_t(r)]);
    const size_t begin = cpus.size() * size_t(r) / size_t(nproc), end = cpus.size() * size_t(r + 1) / size_t(nproc);
    for (size_t i = begin; i < end; ++i) CPU_SET(cpus[i], &sets[size_t(r)]);
  }
  return sets;
}

// Forks and execs one rank per environment; the children die with the launcher. Everything a
// child needs is built before fork(): it only sets variables and execs.
std::vector<pid_t> start_ranks(const std::string& exe, const std::vector<std::string>& args,
                               const std::vector<std::vector<std::string>>& environments) {
  const std::vector<cpu_set_t> pinned = rank_cpu_sets(int(environments.size()));
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t launcher = ::getpid();
  std::vector<pid_t> children;
  for (size_t rank = 0; rank < environments.size(); ++rank) {
    const auto& environment = environments[rank];
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (const pid_t c : children) ::kill(c, SIGKILL);
      throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher) ::_exit(1);  // the launcher died before prctl
      for (const auto& kv : environment) ::putenv(const_cast<char*>(kv.c_str()));
      if (!pinned.empty()) (void)::sched_setaffinity(0, sizeof(cpu_set_t), &pinned[rank]);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    children.push_back(pid);
  }
  return children;
}

// Waits for every rank: forwards the launcher's SIGINT / SIGTERM to them, and kills the rest
// `grace` after the first failure. Returns the launcher's exit code as launch_local documents it.
int supervise_ranks(const std::vector<pid_t>& children, std::chrono::milliseconds grace) {
  const int nproc = int(children.size());
  std::vector<int> codes(size_t(nproc), -1);
  int running = nproc, first_failure = -1, forwarded = 0;
  std::chrono::steady_clock::time_point kill_at{};
  while (running > 0) {
    const int sig = g_launcher_signal.load();
    if (sig && !forwarded) {
      forwarded = sig;
      for (int r = 0; r < nproc; ++r)
        if (codes[size_t(r)] < 0) ::kill(children[size_t(r)], sig);
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      for (int r = 0; r < nproc; ++r) {
        if (children[size_t(r)] != done) continue;
        codes[size_t(r)] = exit_code(status);
        --running;
        if (codes[size_t(r)] != 0 && codes[size_t(r)] != 130 && first_failure < 0) {
          first_failure = r;
          // Rank 0 found the port taken: nothing was written, the others are only waiting for
          // the store. End them now; the caller starts all again on another port.
          const bool port_taken = r == 0 && codes[0] == kExitPortInUse;
          kill_at = std::chrono::steady_clock::now() + (port_taken ? std::chrono::milliseconds(0) : grace);
        }
      }
      continue;
    }
    if (first_failure >= 0 && std::chrono::steady_clock::now() >= kill_at) {
      for (int r = 0; r < nproc; ++r)
        if (codes[size_t(r)] < 0) {
          if (codes[0] != kExitPortInUse)
            fmt::print(stderr, "launcher: rank {} still running {} s after rank {} failed: killed\n", r,
                       grace.count() / 1000, first_failure);
          ::kill(children[size_t(r)], SIGKILL);
        }
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (first_failure >= 0) return codes[size_t(first_failure)];
  for (const int c : codes)
    if (c != 0) return c;
  return 0;
}

// One start of the ranks on `port`; returns the launcher's exit code as launch_local documents it.
int launch_attempt(const std::string& exe, const std::vector<std::string>& args, int nproc,
                   std::chrono::milliseconds grace, int port) {
  World world;
  world.size = nproc;
  world.master_addr = "127.0.0.1";
  world.master_port = port;
  struct sigaction action {};
  action.sa_handler = on_launcher_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::vector<std::vector<std::string>> environments;
  for (int r = 0; r < nproc; ++r) {
    world.rank = world.local_rank = r;
    environments.push_back(rank_environment(world));
  }
  return supervise_ranks(start_ranks(exe, args, environments), grace);
}

}  // namespace

int launch_local(const std::vector<std::string>& args, int nproc, std::chrono::milliseconds grace) {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw std::runtime_error("cannot resolve /proc/self/exe: " + ec.message());
  // A free port is probed, closed and handed on: another process may take it before rank 0
  // listens (two runs started together). Rank 0 then exits with kExitPortInUse before anything
  // is written, and the ranks start again on another port.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    const int port = free_local_port();
    const int code = launch_attempt(exe, args, nproc, grace, port);
    if (code != kExitPortInUse || attempt == kAttempts) return code;
    fmt::print(stderr, "launcher: port {} was taken before rank 0 could listen; starting the ranks again "
                       "on another (attempt {} of {})\n", port, attempt + 1, kAttempts);
  }
}

}  // namespace harness::distributed
