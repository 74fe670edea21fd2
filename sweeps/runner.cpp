#include "sweeps/runner.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "harness/config/engine_options.h"
#include "harness/data/dataset.h"
#include "harness/distributed/launcher.h"
#include "harness/tasks/task.h"
#include "common/errors.h"
#include "common/interrupt.h"
#include "harness/train/batch_shares.h"
#include "harness/train/checkpoint_list.h"
#include "sweeps/plan.h"
#include "sweeps/run_lock.h"
#include "sweeps/run_status.h"

namespace fs = std::filesystem;

namespace harness::sweeps {

namespace {

using Clock = std::chrono::steady_clock;

std::string clock_time() {
  const std::time_t now = std::time(nullptr);
  return fmt::format("{:%H:%M:%S}", fmt::localtime(now));
}

std::string duration_text(double seconds) {
  const auto s = int64_t(seconds);
  return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02d}", s / 60, s % 60);
}

std::string worker_log(const PlannedRun& run) { return (fs::path(run.run_dir) / "worker.log").string(); }

// The last non-empty line of a worker's log: its error message when it failed before training.
std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

int terminal_columns() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 120;
}

// A block of lines redrawn in place at the bottom of the terminal; event lines scroll above it.
class LiveTable {
 public:
  explicit LiveTable(bool enabled) : enabled_(enabled) {}
  void clear() {
    if (!enabled_ || lines_ == 0) return;
    fmt::print("\033[{}F\033[J", lines_);
    lines_ = 0;
  }
  void draw(const std::vector<std::string>& lines) {
    if (!enabled_) return;
    clear();
    const size_t width = size_t(terminal_columns()) - 1;
    for (const auto& line : lines) fmt::print("{}\n", line.size() > width ? line.substr(0, width) : line);
    lines_ = lines.size();
    std::fflush(stdout);
  }
  // A line that stays (scrolls above the table).
  void event(const std::string& line) {
    clear();
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }

 private:
  bool enabled_;
  size_t lines_ = 0;
};

struct Worker {
  size_t index;
  Clock::time_point started;
};

// A missing corpus is found here, once, before any worker starts (otherwise every worker fails
// with the same message). Only the cheap check: the data layer validates the rest in each run.
void check_corpora(const Sweep& sweep, const std::vector<RunStatus>& statuses) {
  std::set<std::string> checked;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    if (statuses[i].state == RunState::kDone) continue;
    const auto& loaded = sweep.runs[i].loaded;
    const auto& data = loaded.config.data;
    if (!checked.insert(data::resolve_corpus_path(data).string()).second) continue;
    try {
      data::check_corpus_directory(data);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} (run #{} {}): {}", loaded.location_of("data.corpus").str(), i,
                                   sweep.runs[i].id, e.what()));
    }
  }
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int run_one(const Sweep& sweep, size_t index, const RunOneOptions& o) {
  if (index >= sweep.runs.size())
    throw InputError(fmt::format("--index {}: sweep {} has {} runs (indices 0 to {})", index,
                                 sweep.path, sweep.runs.size(), sweep.runs.size() - 1));
  install_interrupt_handlers();  // a signal before training starts still ends in a checkpoint
  const PlannedRun& run = sweep.runs[index];
  const std::string what = fmt::format("run {} (#{} of sweep {}: {})", run.id, index, sweep.name,
                                       varying_settings(sweep, index));
  // Data parallel: the lock is rank 0's (or the launcher's, which passes take_lock = false).
  const bool report = o.world.rank == 0;
  RunLock lock;
  if (o.take_lock && o.world.rank == 0 && !lock.try_acquire(run.run_dir)) {
    std::string holder;
    run_lock_held(run.run_dir, &holder);
    fmt::print(stderr, "[{}] {} is running elsewhere (lock held by {}); skipping it\n", clock_time(),
               what, holder.empty() ? "another process" : holder);
    return kExitRunLocked;
  }
  const RunStatus status = inspect_run(run, /*ignore_lock=*/true);
  if (status.state == RunState::kDone) {
    if (report) fmt::print(stderr, "[{}] {} is already done\n", clock_time(), what);
    return kExitOk;
  }
  if (status.state == RunState::kFailed && !o.retry_failed) {
    if (report)
      fmt::print(stderr, "[{}] {} failed earlier ({}); pass --retry-failed to resume it\n",
                 clock_time(), what, status.reason);
    return kExitFailure;
  }
  const bool resuming = !train::RunCheckpoints(run.run_dir).empty();
  config::LoadedConfig loaded = run.loaded;
  if (o.threads > 0) loaded.config.run.threads = o.threads;
  if (report)
    fmt::print(stderr, "[{}] {} {} in {} ({}{} thread{}, pid {})\n", clock_time(),
               resuming ? "resuming" : "starting", what, run.run_dir,
               o.nproc > 1 ? fmt::format("{} ranks × ", o.nproc) : o.world.distributed() ? fmt::format("{} ranks × ", o.world.size) : "",
               loaded.config.run.threads, loaded.config.run.threads == 1 ? "" : "s", ::getpid());
  if (o.nproc > 1) {  // this process holds the lock; its ranks train
    train::batch_shares(loaded, o.nproc, fmt::format("--nproc-per-run {}", o.nproc));
    std::vector<std::string> args = {"sweep",     "run-one", sweep.path, "--index", std::to_string(index),
                                     "--threads", std::to_string(loaded.config.run.threads),
                                     "--no-lock", "--expect-id", run.id};
    if (o.retry_failed) args.push_back("--retry-failed");
    const int code = distributed::launch_local(
        args, o.nproc, std::chrono::milliseconds(int64_t(loaded.config.run.dist_timeout * 1000) + 10000));
    fmt::print(stderr, "[{}] run {}: {} ranks exited {}\n", clock_time(), run.id, o.nproc, code);
    return code;
  }
  train::TrainOptions options;
  options.run_dir = run.run_dir;
  options.resume = true;
  options.world = o.world;
  const train::TrainOutcome outcome = run_task(loaded, options);
  if (report)
    fmt::print(stderr, "[{}] run {} {} at step {}{}\n", clock_time(), run.id,
               results::to_string(outcome.state), outcome.step,
               outcome.reason.empty() ? "" : ": " + outcome.reason);
  switch (outcome.state) {
    case results::RunState::kDone: return kExitOk;
    case results::RunState::kInterrupted: return kExitInterrupted;
    default: return kExitFailure;
  }
}

namespace {

// One `sweep run` invocation as stages, as TrainingSession runs a training: sort the runs (what is
// done, running elsewhere, failed), check what must hold before anything starts, then keep `jobs`
// worker processes busy (launch, reap, the live table) until the queue is empty, and summarise.
class SweepScheduler {
 public:
  SweepScheduler(const Sweep& s, const LocalRunOptions& o)
      : sweep(s),
        options(o),
        jobs(std::max(1, o.jobs)),
        ranks(std::max(1, o.nproc_per_run)),
        threads(o.threads_per_job > 0 ? o.threads_per_job : std::max(1, available_cores() / (jobs * ranks))),
        threads_arg(std::to_string(threads)),
        live(o.live_display < 0 ? ::isatty(STDOUT_FILENO) == 1 : o.live_display == 1),
        table(live) {}

  int run() {
    classify();
    introduce();
    install_interrupt_handlers();
    started = Clock::now();
    last_draw = started - std::chrono::seconds(10);  // draw at once
    while (!queue.empty() || !workers.empty()) {
      if (interrupt_requested() && !stopping) stop_workers();
      while (!stopping && int(workers.size()) < jobs && !queue.empty()) {
        const auto next = next_launchable();
        if (!next) break;  // every queued run waits on one still running
        launch(*next);
      }
      int wait_status = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0)
        if (workers.count(pid)) reap(pid, wait_status);
      draw();
      if (!workers.empty() || !queue.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    table.clear();
    return summarise();
  }

 private:
  // What to do with each run; needle runs whose pretraining run is not done are refused here
  // (nothing written), or, when this invocation trains that run, started after it.
  void classify() {
    const auto statuses = inspect_runs(sweep);
    check_corpora(sweep, statuses);
    for (size_t i = 0; i < sweep.runs.size(); ++i) {
      switch (statuses[i].state) {
        case RunState::kDone: done_before.push_back(i); break;
        case RunState::kRunning: elsewhere.push_back(i); break;
        case RunState::kFailed:
          if (options.retry_failed) queue.push_back(i);
          else failed_skipped.push_back(i);
          break;
        default: queue.push_back(i);  // pending, interrupted, killed
      }
    }
    waits_on = check_pretraining(sweep, std::vector<size_t>(queue.begin(), queue.end()), true);
    write_sweep_record(sweep);
  }

  void introduce() {
    std::string intro = fmt::format("sweep {}: {} runs, {} done, {} to run ({} at a time, {}{} thread{} "
                                    "each) → {}/",
                                    sweep.name, sweep.runs.size(), done_before.size(), queue.size(),
                                    jobs, ranks > 1 ? fmt::format("{} ranks × ", ranks) : "", threads,
                                    threads == 1 ? "" : "s", sweep.sweep_dir);
    if (!elsewhere.empty()) intro += fmt::format("; {} running elsewhere", elsewhere.size());
    if (!failed_skipped.empty())
      intro += fmt::format("; {} failed earlier (skipped; --retry-failed resumes them)", failed_skipped.size());
    table.event(intro);
  }

  std::string describe_run(size_t i) const {
    return fmt::format("#{} {} {}", i, sweep.runs[i].id, varying_settings(sweep, i));
  }

  static bool has(const std::vector<size_t>& v, size_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

  // The first queued run whose pretraining run (if it waits on one) is done, taken off the queue;
  // one whose pretraining run ended any other way is not started.
  std::optional<size_t> next_launchable() {
    for (auto it = queue.begin(); it != queue.end();) {
      const auto dep = waits_on.find(*it);
      if (dep == waits_on.end() || has(done_now, dep->second)) {
        const size_t i = *it;
        queue.erase(it);
        return i;
      }
      const size_t j = dep->second;
      if (has(failed_now, j) || has(interrupted_now, j) || has(elsewhere, j)) {
        table.event(fmt::format("[{}] not started: {} (its pretraining run #{} did not finish here)",
                                clock_time(), describe_run(*it), j));
        blocked.push_back(*it);
        it = queue.erase(it);
        continue;
      }
      ++it;
    }
    return std::nullopt;
  }

  void launch(size_t i) {
    const PlannedRun& run = sweep.runs[i];
    std::string holder;
    if (run_lock_held(run.run_dir, &holder)) {
      elsewhere.push_back(i);
      table.event(fmt::format("[{}] running elsewhere ({}): {}", clock_time(), holder, describe_run(i)));
      return;
    }
    fs::create_directories(run.run_dir);
    // Everything the child needs is prepared before fork(): it only redirects and execs.
    const std::string log = worker_log(run), index = std::to_string(i);
    // The resolved binary, not /proc/self/exe: a process is named after the file it execs, and a
    // worker should show as `harness` in ps and top, not `exe`.
    std::error_code ec;
    const fs::path resolved = fs::read_symlink(options.executable, ec);
    const std::string executable = ec ? options.executable : resolved.string();
    std::vector<std::string> args = {executable, "sweep", "run-one", sweep.path,     "--index",
                                     index,      "--threads", threads_arg, "--expect-id", run.id};
    if (options.retry_failed) args.push_back("--retry-failed");
    if (ranks > 1) args.insert(args.end(), {"--nproc", std::to_string(ranks)});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
    if (pid == 0) {
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      const int in = ::open("/dev/null", O_RDONLY);
      if (out >= 0) ::dup2(out, STDOUT_FILENO), ::dup2(out, STDERR_FILENO);
      if (in >= 0) ::dup2(in, STDIN_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    workers[pid] = Worker{i, Clock::now()};
    table.event(fmt::format("[{}] started  {}  (log {})", clock_time(), describe_run(i), log));
  }

  void reap(pid_t pid, int wait_status) {
    const size_t i = workers.at(pid).index;
    const double seconds = std::chrono::duration<double>(Clock::now() - workers.at(pid).started).count();
    workers.erase(pid);
    const PlannedRun& run = sweep.runs[i];
    // What this worker left in the file, whoever holds the lock now: another runner's worker may
    // already hold it to find the run done, and a live holder would read as "running" (the
    // cause of ConcurrentRunnersTrainEachRunOnce's rare failure: a done run reported FAILED).
    const RunStatus status = inspect_run(run, /*ignore_lock=*/true);
    const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    std::string verdict, detail;
    if (code == kExitRunLocked) {
      elsewhere.push_back(i);
      verdict = "elsewhere";
      detail = "another process took its lock first";
    } else if (code == kExitOk && status.state == RunState::kDone) {
      done_now.push_back(i);
      verdict = "done";
      for (const auto& [T, loss] : status.eval_loss)
        detail += fmt::format("{}{}: {:.4f}", detail.empty() ? "val " : ", ", T, loss);
      for (const auto& [T, accuracy] : status.needle_accuracy)
        detail += fmt::format("{}{}: {:.3f}", detail.empty() ? "needle accuracy " : ", ", T, accuracy);
    } else if (code == kExitInterrupted) {
      interrupted_now.push_back(i);
      verdict = "stopped";
      detail = fmt::format("checkpointed at step {}", status.step);
    } else {
      failed_now.push_back(i);
      verdict = "FAILED";
      if (WIFSIGNALED(wait_status))
        detail = fmt::format("worker killed by signal {} ({}) at step {}; the next `sweep run` "
                             "resumes it", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)), status.step);
      else if (status.state == RunState::kFailed && !status.reason.empty())
        detail = status.reason;
      else
        detail = fmt::format("exit code {}: {}", code, last_log_line(worker_log(run)));
    }
    table.event(fmt::format("[{}] {:<8} {}  ({}; {})", clock_time(), verdict, describe_run(i), detail,
                            duration_text(seconds)));
  }

  void stop_workers() {
    stopping = true;
    queue.clear();
    for (const auto& [pid, w] : workers) ::kill(pid, interrupt_signal());
    table.event(fmt::format("[{}] signal {}: asked {} worker{} to checkpoint and stop", clock_time(),
                            interrupt_signal(), workers.size(), workers.size() == 1 ? "" : "s"));
  }

  void draw() {
    if (!live || Clock::now() - last_draw < std::chrono::milliseconds(500)) return;
    std::vector<std::string> lines;
    for (const auto& [pid, w] : workers) {
      std::string progress = latest_progress_line(sweep.runs[w.index].run_dir);
      if (progress.empty()) progress = "starting";
      lines.push_back(fmt::format("  ▸ #{:<3} {}  {}", w.index, varying_settings(sweep, w.index), progress));
    }
    lines.push_back(fmt::format(
        "  {} of {} done · {} running · {} queued · {} failed · {}", done_before.size() + done_now.size(),
        sweep.runs.size(), workers.size(), queue.size(), failed_now.size(),
        duration_text(std::chrono::duration<double>(Clock::now() - started).count())));
    table.draw(lines);
    last_draw = Clock::now();
  }

  int summarise() {
    const double total = std::chrono::duration<double>(Clock::now() - started).count();
    std::string summary = fmt::format("sweep {}: {} of {} runs done ({} this time), {} failed, {} skipped",
                                      sweep.name, done_before.size() + done_now.size(), sweep.runs.size(),
                                      done_now.size(), failed_now.size() + failed_skipped.size(),
                                      done_before.size() + elsewhere.size() + failed_skipped.size());
    std::vector<std::string> notes;
    if (!done_before.empty()) notes.push_back(fmt::format("{} already done", done_before.size()));
    if (!elsewhere.empty()) notes.push_back(fmt::format("{} running elsewhere", elsewhere.size()));
    if (!failed_skipped.empty())
      notes.push_back(fmt::format("{} failed earlier: --retry-failed resumes them", failed_skipped.size()));
    if (!notes.empty()) summary += fmt::format(" ({})", fmt::join(notes, "; "));
    if (!blocked.empty())
      summary += fmt::format(", {} not started (their pretraining run did not finish)", blocked.size());
    if (!interrupted_now.empty())
      summary += fmt::format(", {} interrupted (checkpointed; run again to resume)", interrupted_now.size());
    summary += fmt::format(" in {}", duration_text(total));
    fmt::print("{}\n", summary);
    for (const size_t i : failed_now) {
      const RunStatus s = inspect_run(sweep.runs[i]);
      fmt::print("  failed: {}  ({}; log {})\n", describe_run(i),
                 s.reason.empty() ? last_log_line(worker_log(sweep.runs[i])) : s.reason,
                 worker_log(sweep.runs[i]));
    }
    std::fflush(stdout);
    if (stopping) return kExitInterrupted;
    return failed_now.empty() && failed_skipped.empty() && blocked.empty() ? kExitOk : kExitFailure;
  }

  const Sweep& sweep;
  const LocalRunOptions& options;
  const int jobs, ranks, threads;
  const std::string threads_arg;
  const bool live;
  LiveTable table;
  std::deque<size_t> queue;
  std::map<size_t, size_t> waits_on;  // needle run → the pretraining run it waits for
  std::vector<size_t> done_before, elsewhere, failed_skipped;
  std::vector<size_t> done_now, failed_now, interrupted_now;
  std::vector<size_t> blocked;  // needle runs whose pretraining run did not finish here
  std::map<pid_t, Worker> workers;
  bool stopping = false;
  Clock::time_point started, last_draw;  // set when run() starts launching
};

}  // namespace

int run_sweep(const Sweep& sweep, const LocalRunOptions& options) { return SweepScheduler(sweep, options).run(); }

}  // namespace harness::sweeps
