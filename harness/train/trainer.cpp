#include "harness/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <exception>
#include <optional>
#include <thread>

#include "harness/config/engine_options.h"
#include "harness/data/dataset.h"
#include "harness/distributed/gradient_reducer.h"
#include "harness/distributed/process_group.h"
#include "harness/train/checkpoint.h"
#include "harness/train/cuda_sync_check.h"
#include "harness/train/device_memory.h"
#include "harness/train/evaluate.h"
#include "harness/train/batch_shares.h"
#include "harness/train/run_directory.h"
#include "harness/train/run_setup.h"
#include "common/errors.h"
#include "common/interrupt.h"
#include "common/progress.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "models/schedule.h"

namespace fs = std::filesystem;

namespace harness::train {

namespace {

using Clock = std::chrono::steady_clock;

// One run in three stages: prepare (decide what to do with an existing run directory, build and
// so validate everything, before anything is written), start or resume (take the directory,
// load the checkpoint or begin the record), loop (optimiser steps, validations, checkpoints).
//
// Data parallel (options.world.size = W > 1): every rank runs the same session on the same
// stream of windows; rank r takes rows [r·B/W, (r+1)·B/W) of each step's B, the gradients are
// summed over the ranks (the loss of each micro-batch is already divided by the global count of
// micro-batches), so every rank steps identical parameters. Rank 0 alone owns the run directory:
// it decides (done, resume, fresh) and the others follow; a checkpoint reaches them as bytes.
class TrainingSession {
 public:
  TrainingSession(const config::LoadedConfig& loaded, const TrainOptions& options)
      : loaded_(loaded),
        c_(loaded.config),
        options_(options),
        world_(options.world),
        paths_(options.run_dir.empty() ? (fs::path(c_.run.out_dir) / c_.name).string() : options.run_dir),
        hash_(config::config_hash(c_)) {
    outcome_.run_dir = paths_.dir;
  }

  // Each rank's share of a step's windows and its micro-batch; then, with W > 1, the rendezvous.
  // Both before anything is written.
  void connect() {
    const BatchShares shares = batch_shares(loaded_, world_.size, world_.source);
    share_ = shares.per_rank;
    micro_ = shares.micro_batch;
    if (!world_.distributed()) return;
    if (!lead()) spdlog::set_level(spdlog::level::warn);  // rank 0 tells what the data layer loads
    torch::Device device = pick_device(loaded_);
    if (device.is_cuda()) device = torch::Device(torch::kCUDA, world_.local_rank);
    group_ = std::make_unique<distributed::ProcessGroup>(
        world_, hash_, std::chrono::milliseconds(int64_t(c_.run.dist_timeout * 1000)), device);
  }

  // Returns the outcome of a run that is already done (nothing to do), else nullopt.
  std::optional<TrainOutcome> prepare() {
    if (!lead()) return follow_rank0();
    std::optional<TrainOutcome> done;
    try {
      done = prepare_run_directory();
      if (!done) build_setup();
    } catch (const InputError& e) {
      if (group_) group_->share_from_rank0("prepare", std::string("input-error ") + e.what());
      throw;
    } catch (const std::exception& e) {
      if (group_) group_->share_from_rank0("prepare", std::string("error ") + e.what());
      throw;
    }
    if (group_) group_->share_from_rank0("prepare", done ? "done" : resuming_ ? "resume" : "fresh");
    return done;
  }

  // From here on the run directory is rank 0's.
  void start_or_resume() {
    auto& model = setup_->model;
    if (lead()) {
      open_run_directory();
    } else {
      run_log_ = rank_log();
    }
    const auto& log = run_log_.all;
    if (resuming_) {
      // Rank 0 chose the newest good checkpoint (prepare_run_directory); the others get its bytes.
      std::vector<char> bytes = lead() ? std::move(resume_from_->bytes) : std::vector<char>{};
      if (group_) bytes = group_->broadcast_bytes(bytes, 0);
      const std::string from = lead() ? resume_from_->path : "rank 0's checkpoint";
      for (const auto& warning : resume_warnings_) run_log_.file->warn("{}", warning);
      CheckpointState state;
      try {
        state = load_checkpoint(bytes, model, *setup_->optim);
      } catch (const c10::Error& e) {
        run_log_.file->error("{}", e.what());
        throw std::runtime_error(fmt::format("cannot read the checkpoint {}: {}", from, e.what_without_backtrace()));
      }
      step_ = state.step;
      tokens_ = state.tokens;
      stream_->seek(state.cursor);
      record_.truncate_after(step_);
      if (!record_.train.seconds.empty()) train_seconds_ = record_.train.seconds.back();
      resumed_seconds_ = train_seconds_;
      record_.state = results::RunState::kRunning;
      record_.reason.clear();
      log->info("resuming {} at step {}/{} from {}", paths_.dir, step_, c_.train.steps, from);
    } else if (lead()) {
      record_ = fresh_record(loaded_, threads_, setup_->device);
      log->info("run {} (id {}): {}", c_.name, hash_, setup_->dataset.describe());
      log->info("model: {} parameters, method {}, L = {}, validation at {}", model->num_parameters(),
                c_.attention.method, c_.train.context, fmt::join(c_.eval_contexts(), ", "));
    }
    record_.config_ints["threads_resumed_with"] = threads_;
    record_.config_ints["world_size"] = world_.size;
    record_.config_ints["micro_batch_size"] = micro_;
    if (group_) {
      if (!resuming_) {  // the same initial weights everywhere, whatever each rank's seed did
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> state = model->parameters();
        for (const auto& b : model->buffers()) state.push_back(b);
        group_->broadcast(state, 0);
      }
      setup_->optim->set_collectives(group_.get());
      // HARNESS_GRAD_BUCKET_KB: the bucket size (default 25 MiB, DDP's bucket_cap_mb). Gradients
      // that fit one bucket are summed after the backward: no overlap (docs/data-parallel.md).
      const char* bucket_kb = std::getenv("HARNESS_GRAD_BUCKET_KB");
      const int64_t bucket_bytes = bucket_kb ? std::max<int64_t>(1, std::atoll(bucket_kb)) << 10
                                             : distributed::GradientReducer::kDefaultBucketBytes;
      reducer_ = std::make_unique<distributed::GradientReducer>(model->parameters(), *group_, bucket_bytes);
      require_identical_parameters("at the start");
      log->info("data parallel: {} ranks over {} ({}), {} sequences per rank and step in "
                "micro-batches of {}, {} threads each",
                world_.size, group_->backend_name(), world_.source, share_, micro_, threads_);
    }
  }

  TrainOutcome loop() {
    const auto& log = run_log_.all;
    install_interrupt_handlers();
    const bool bar = lead() && (options_.progress_bar < 0 ? stderr_is_terminal() : options_.progress_bar == 1);
    Progress progress(run_log_, c_.train.steps, c_.run.log_every, bar);
    setup_->model->train();
    const int64_t session_start = step_;
    const char* defer_for_tests = std::getenv("HARNESS_TEST_DEFER_READS");
    defer_reads_ = setup_->device.is_cuda() || (defer_for_tests && std::string(defer_for_tests) == "1");
    CudaSyncCheck sync_check(setup_->device);  // HARNESS_CUDA_SYNC_CHECK=1: a step that waits fails
    if (sync_check.enabled()) log->info("HARNESS_CUDA_SYNC_CHECK: a host synchronisation inside a step is an error");
    try {
      while (step_ < c_.train.steps) {
        if (const auto reason = stop_reason(session_start)) {
          if (const auto failure = apply_queued_steps(fetch_queued_steps(), progress))
            return fail(progress, *failure);
          stop_as(progress, results::RunState::kInterrupted, *reason);
          log->warn("interrupted ({}); checkpoint saved, continue with --resume", *reason);
          return outcome_;
        }
        const auto t0 = Clock::now();
        sync_check.arm();
        const double factor = models::lr_factor(c_.schedule, step_, c_.train.steps);
        setup_->optim->set_lr_factor(factor);
        setup_->optim->zero_grad();
        const torch::Tensor loss_sum = forward_backward();
        const torch::Tensor grad_norm = models::clip_grad_norm(setup_->model, c_.train.grad_clip);
        setup_->optim->step();
        queue_step(loss_sum, grad_norm, factor);
        const bool last = step_ == c_.train.steps;
        const bool eval_now = last || (c_.eval.every > 0 && step_ % c_.eval.every == 0);
        const bool save_now = !last && c_.run.checkpoint_every > 0 && step_ % c_.run.checkpoint_every == 0;
        // On a GPU the step's values stay queued on the device until a log, validation or
        // checkpoint step (no host synchronisation in between); on the CPU they are read now
        // (HARNESS_TEST_DEFER_READS=1: as on a GPU, for the tests).
        const bool read_now = !defer_reads_ || last || eval_now || save_now ||
                              (c_.run.log_every > 0 && step_ % c_.run.log_every == 0);
        sync_check.disarm();
        const torch::Tensor values = read_now ? fetch_queued_steps() : torch::Tensor();  // waits for the device
        train_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
        record_.train.seconds.back() = train_seconds_;
        if (read_now)
          if (const auto failure = apply_queued_steps(values, progress)) return fail(progress, *failure);
        if (eval_now) run_eval(progress);
        if (save_now) save(results::RunState::kRunning, "");
      }
      progress.finish();
      note_peak_memory();
      save(results::RunState::kDone, "");
    } catch (...) {  // the last save's failure too: a run is done only once it is all written
      progress.finish();
      record_failure(std::current_exception());
      throw;
    }
    log->info("done: {} steps, {} tokens, {:.1f} s training ({:.0f} tokens/s); results in {}", step_,
              tokens_, train_seconds_, double(tokens_) / std::max(train_seconds_, 1e-9), paths_.results);
    if (group_)
      log->info("data parallel: {:.1f} s of the training in collectives ({:.1f}%)",
                group_->seconds_in_collectives(),
                100.0 * group_->seconds_in_collectives() / std::max(train_seconds_, 1e-9));
    outcome_.state = results::RunState::kDone;
    outcome_.step = step_;
    return outcome_;
  }

 private:
  // Why the loop stops before step_ (a signal, or --stop-after-steps), or nothing. One process
  // polls its own signal; ranks stop on the flag the last all-reduce carried, so all of them stop
  // at the same step.
  std::optional<std::string> stop_reason(int64_t session_start) {
    const bool session_over = options_.stop_after_steps > 0 && step_ - session_start >= options_.stop_after_steps;
    const bool signalled = group_ ? stop_flag_ : interrupt_requested();
    if (!signalled && !session_over) return std::nullopt;
    outcome_.stopped_as_asked = session_over && !signalled;
    if (session_over)
      return fmt::format("stopped after {} steps this session (--stop-after-steps)", options_.stop_after_steps);
    if (interrupt_signal()) return fmt::format("signal {} at step {}", interrupt_signal(), step_);
    return fmt::format("a signal to another rank at step {}", step_);
  }

  // One step's forward and backward passes over this rank's micro-batches; returns the step's
  // loss (summed over ranks when data parallel) as a 0-dim float64 tensor on the device, its
  // gradients left in the parameters.
  torch::Tensor forward_backward() {
    const int64_t micro_batches = c_.train.batch_size / micro_;  // over all ranks
    // (B, L + 1): the step's windows, the same on every rank; this rank's rows of them. On CUDA
    // in pinned memory, so that each micro-batch's copy runs asynchronously.
    const auto batch = stream_->next_batch(c_.train.batch_size);
    const bool cuda = setup_->device.is_cuda();
    auto mine = batch.slice(0, world_.rank * share_, (world_.rank + 1) * share_);
    if (cuda) mine = mine.pin_memory();
    auto loss_total = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(setup_->device));
    for (int64_t start = 0; start < share_; start += micro_) {
      const auto micro = mine.slice(0, start, start + micro_).to(setup_->device, /*non_blocking=*/cuda);  // (m, L + 1)
      const auto inputs = micro.slice(1, 0, c_.train.context);
      const auto targets = micro.slice(1, 1, c_.train.context + 1);
      auto loss = setup_->model->loss(inputs, targets) / double(micro_batches);
      if (reducer_ && start + micro_ >= share_) reducer_->arm();  // the step's last backward
      loss.backward();
      loss_total += loss.detach().to(torch::kDouble);
    }
    return group_ ? finish_step_reduction(loss_total) : loss_total;
  }

  // The finished step: its row of /train, with the loss and gradient norm still on the device
  // (NaN in the row until apply_queued_steps fills them in).
  void queue_step(const torch::Tensor& loss, const torch::Tensor& grad_norm, double lr_factor) {
    ++step_;
    tokens_ += c_.train.batch_size * c_.train.context;
    record_.train.step.push_back(step_);
    record_.train.tokens.push_back(tokens_);
    record_.train.loss.push_back(std::nan(""));
    record_.train.lr.push_back(lr_factor);
    record_.train.grad_norm.push_back(std::nan(""));
    record_.train.seconds.push_back(train_seconds_);  // the step's end: set by the loop
    queued_.push_back({loss, grad_norm, stop_tensor_});
  }

  // The queued steps' losses, gradient norms and (data parallel) stop flags, (steps, 3) float64
  // on the host: one copy, the one wait for the device.
  torch::Tensor fetch_queued_steps() const {
    if (queued_.empty()) return torch::Tensor();
    std::vector<torch::Tensor> values;
    for (const auto& q : queued_) {
      values.push_back(q.loss);
      values.push_back(q.grad_norm.to(q.loss.device()));
      values.push_back(q.stop.defined() ? q.stop : torch::zeros_like(q.loss));
    }
    return torch::stack(values).to(torch::kCPU, torch::kDouble).view({-1, 3}).contiguous();
  }

  // Fills the queued steps' /train rows from `values` (fetch_queued_steps) and updates the
  // progress line. If a value is not finite, the rows from that step on are dropped, the run
  // stands at the step before, and the failure is returned.
  std::optional<std::string> apply_queued_steps(const torch::Tensor& values, Progress& progress) {
    if (queued_.empty()) return std::nullopt;
    auto& train = record_.train;
    const size_t first = train.step.size() - queued_.size();
    const double window_start = first > 0 ? train.seconds[first - 1] : resumed_seconds_;
    const int64_t window_tokens = int64_t(queued_.size()) * c_.train.batch_size * c_.train.context;
    queued_.clear();
    const auto v = values.accessor<double, 2>();
    for (int64_t k = 0; k < v.size(0); ++k) {
      const size_t row = first + size_t(k);
      const double loss = v[k][0], grad_norm = v[k][1];
      if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
        const std::string reason = fmt::format("non-finite {} at step {}",
                                               std::isfinite(loss) ? "gradient norm" : "loss", train.step[row]);
        truncate_train_rows(row);
        return reason;
      }
      if (v[k][2] > 0) stop_flag_ = true;
      train.loss[row] = loss;
      train.grad_norm[row] = grad_norm;
    }
    progress.update(step_, train.loss.back(), double(window_tokens) / std::max(train.seconds.back() - window_start, 1e-9));
    return std::nullopt;
  }

  // Keeps the first `rows` rows of /train; the run then stands at the last of them.
  void truncate_train_rows(size_t rows) {
    auto& t = record_.train;
    for (auto* column : {&t.loss, &t.lr, &t.grad_norm, &t.seconds}) column->resize(rows);
    for (auto* column : {&t.step, &t.tokens}) column->resize(rows);
    step_ = rows > 0 ? t.step.back() : 0;
    tokens_ = rows > 0 ? t.tokens.back() : 0;
    train_seconds_ = rows > 0 ? t.seconds.back() : 0.0;
  }

  TrainOutcome fail(Progress& progress, const std::string& reason) {
    stop_as(progress, results::RunState::kFailed, reason);
    run_log_.all->error("run failed: {}", reason);
    return outcome_;
  }

  // A run that threw: its record says so, with the rows written so far kept.
  void record_failure(std::exception_ptr error) {
    truncate_train_rows(record_.train.step.size() - queued_.size());  // rows never read
    queued_.clear();
    record_.state = results::RunState::kFailed;
    record_.status_step = step_;
    try {
      std::rethrow_exception(error);
    } catch (const c10::Error& e) {  // LibTorch's own: its C++ trace goes to the log file only
      record_.reason = e.what_without_backtrace();
      run_log_.file->error("{}", e.what());
    } catch (const std::exception& e) {
      record_.reason = e.what();
    } catch (...) {
      record_.reason = "unknown error";
    }
    if (!lead()) return;
    try {
      results::publish(record_, paths_.results);
    } catch (const std::exception& e) {  // the disk that failed the run may fail this too
      run_log_.all->error("the failure is not recorded in {}: {}", paths_.results, e.what());
    }
  }

  bool lead() const { return world_.rank == 0; }

  // Rank 0, before anything is written: refuse to clobber, read the record of a run to resume.
  std::optional<TrainOutcome> prepare_run_directory() {
    refuse_existing_run(paths_, options_);
    resuming_ = options_.resume && fs::exists(paths_.results) && !checkpoints_.empty();
    if (resuming_) {
      record_ = results::read_run_file(paths_.results);
      require_same_run(record_, c_, paths_.dir);
      // A run written under the first id scheme carries today's id from now on.
      record_.config["hash"] = hash_;
      record_.config["canonical"] = config::canonical_text(c_, false);
      if (record_.state == results::RunState::kDone) {
        TrainOutcome done{record_.state, record_.reason, record_.status_step, paths_.dir, {}};
        for (const auto& [T, rows] : record_.eval)
          if (!rows.loss.empty()) done.eval_loss[T] = rows.loss.back();
        return done;
      }
      resume_from_ = checkpoints_.read_newest_good([&](const std::string& warning) {
        spdlog::warn("{}", warning);
        resume_warnings_.push_back(warning);
      });
    }
    return std::nullopt;
  }

  void build_setup() {
    threads_ = use_run_threads(c_, world_.local_size);
    setup_ = build_run_setup(loaded_, world_);  // validates data, contexts, model and optimiser
    if (setup_->device.is_cuda()) {
      device_guard_.emplace(setup_->device);  // this rank's GPU is the current one from here on
      set_tf32(c_.run.tf32);
      reset_peak_device_bytes(setup_->device);
    }
    stream_.emplace(setup_->dataset.train_stream(c_.train.context, c_.train.seed));
  }

  // Ranks > 0: build the same setup, then do what rank 0 decided.
  std::optional<TrainOutcome> follow_rank0() {
    build_setup();
    const std::string decision = group_->share_from_rank0("prepare", "");
    const auto rest = [&](const char* prefix) { return decision.substr(std::string(prefix).size()); };
    if (decision.rfind("input-error ", 0) == 0) throw InputError("rank 0: " + rest("input-error "));
    if (decision.rfind("error ", 0) == 0) throw std::runtime_error("rank 0: " + rest("error "));
    if (decision == "done") return TrainOutcome{results::RunState::kDone, "", 0, paths_.dir, {}};
    resuming_ = decision == "resume";
    return std::nullopt;
  }

  void open_run_directory() {
    if (options_.overwrite && !resuming_) {
      fs::remove(paths_.results);
      checkpoints_.remove_all();
      fs::remove(paths_.log);
    }
    fs::create_directories(paths_.dir);
    run_log_ = make_run_log(paths_.log);
    write_resolved_config(paths_, c_);
  }

  // Ranks > 0 write no file: warnings and errors to stderr, prefixed with the rank.
  RunLog rank_log() const {
    auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    console->set_pattern(fmt::format("%^[%H:%M:%S %l]%$ [rank {}] %v", world_.rank));
    RunLog log;
    log.all = std::make_shared<spdlog::logger>(fmt::format("rank{}", world_.rank), console);
    log.all->set_level(spdlog::level::warn);
    log.file = log.all;
    return log;
  }

  // Finishes the step's gradient sum over the ranks (the reducer's buckets, started while the
  // last backward ran; each micro-batch's loss is already divided by the global number of
  // micro-batches, so the sum is the global mean's gradient: Gloo has no AVG), and sums the step's
  // loss and the stop flag (any rank asked to stop) with it, on the device: the flag is read with
  // the loss (apply_queued_steps), at the same steps on every rank. Returns the global loss.
  torch::Tensor finish_step_reduction(const torch::Tensor& loss_sum) {
    auto extra = torch::stack({loss_sum, torch::full({}, interrupt_requested() ? 1.0 : 0.0, loss_sum.options())});
    reducer_->finish(extra);
    stop_tensor_ = extra[1];
    return extra[0];
  }

  // Every rank must hold the same bits; a difference (a non-deterministic kernel, a bug) would
  // silently train W different models.
  void require_identical_parameters(const std::string& when) {
    const auto params = setup_->model->parameters();
    const auto sums = group_->all_gather_int(int64_t(distributed::bytes_checksum(params)));
    for (size_t r = 1; r < sums.size(); ++r)
      if (sums[r] != sums[0])
        throw std::runtime_error(fmt::format("data parallel: the parameters of rank {} differ from "
                                             "rank 0's {} (step {})", r, when, step_));
  }

  void save(results::RunState state, const std::string& reason) {
    record_.state = state;
    record_.reason = reason;
    record_.status_step = step_;
    // Data parallel: every rank waits until rank 0 has published (with an allowance of its own),
    // so that a slow save is not taken for a lost rank and no rank exits (which under
    // `srun --kill-on-bad-exit` would end rank 0) while rank 0 is still writing.
    const std::string key = fmt::format("save {} at step {}", ++saves_, step_);
    const auto allowance = std::chrono::milliseconds(int64_t(10 * 1000 * c_.run.dist_timeout));
    if (!lead()) {
      if (group_) group_->wait_for_rank0(key, allowance);
      return;
    }
    // run.h5 first, then the checkpoint: a crash in between leaves rows past the checkpoint,
    // which a resume truncates and recomputes identically.
    results::publish(record_, paths_.results);
    if (const char* delay = std::getenv("HARNESS_TEST_SAVE_DELAY_MS"))  // tests: a slow disk
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(delay)));
    if (state != results::RunState::kFailed)
      save_checkpoint(checkpoints_, setup_->model, *setup_->optim, {step_, tokens_, stream_->cursor(), hash_},
                      c_.run.keep_checkpoints);
    if (group_) group_->wait_for_rank0(key, allowance);
  }

  // CUDA: the allocator's peak over this session, in run.h5 and the log.
  void note_peak_memory() {
    if (!setup_->device.is_cuda()) return;
    const int64_t peak = peak_device_bytes(setup_->device);
    record_.config_ints["peak_device_bytes"] = peak;
    run_log_.all->info("peak {} memory: {:.2f} GiB", setup_->device.str(), double(peak) / double(int64_t(1) << 30));
  }

  // Ends the run before its last step: results (and, unless failed, a checkpoint) written.
  void stop_as(Progress& progress, results::RunState state, const std::string& reason) {
    progress.finish();
    note_peak_memory();
    save(state, reason);
    outcome_.state = state;
    outcome_.reason = reason;
    outcome_.step = step_;
  }

  void run_eval(Progress& progress) {
    std::vector<std::string> parts;
    for (const auto& [T, windows] : setup_->eval_windows) {
      const int64_t batch = eval_batch_windows(c_.eval.batch_size, c_.eval.max_batch_tokens, T);
      const EvalResult r = evaluate(setup_->model, windows, batch,
                                    c_.eval.position_buckets, setup_->device, c_.eval.attention_queries,
                                    false, group_.get());
      auto& rows = record_.eval[T];
      rows.step.push_back(step_);
      rows.loss.push_back(r.loss);
      rows.loss_se.push_back(r.loss_se);
      rows.windows.push_back(int64_t(r.window_loss.size()));
      rows.window_loss = r.window_loss;
      rows.window_fingerprint = r.window_fingerprint;
      rows.window_document = r.window_document;
      rows.position_loss.push_back(r.position_loss);
      rows.score_std.push_back(r.score_std);
      if (!r.attention.empty()) rows.attention.append_row(r.attention);
      outcome_.eval_loss[T] = r.loss;
      parts.push_back(fmt::format("{}: {:.4f} ± {:.4f}", T, r.loss, r.loss_se));
    }
    if (group_) require_identical_parameters(fmt::format("at the validation of step {}", step_));
    progress.message(fmt::format("step {}: validation loss (± s.e. over windows) by context — {}", step_,
                                 fmt::join(parts, ", ")));
  }

  const config::LoadedConfig& loaded_;
  const config::RunConfig& c_;
  const TrainOptions& options_;
  const distributed::World world_;
  const results::RunPaths paths_;
  const RunCheckpoints checkpoints_{paths_.dir};
  const std::string hash_;
  std::unique_ptr<distributed::ProcessGroup> group_;  // W > 1 only
  std::unique_ptr<distributed::GradientReducer> reducer_;  // W > 1 only (after group_: hooks go first)
  int64_t share_ = 0, micro_ = 0;              // sequences per rank and step; per forward
  bool stop_flag_ = false;                     // some rank was signalled (W > 1), as last read
  torch::Tensor stop_tensor_;                  // the last step's summed stop flags (W > 1)
  // Steps whose values are still on the device (queue_step, fetch_queued_steps).
  struct QueuedStep {
    torch::Tensor loss, grad_norm, stop;  // 0-dim float64; stop undefined for one process
  };
  std::vector<QueuedStep> queued_;
  bool defer_reads_ = false;                   // read queued steps only at log/eval/checkpoint steps
  double resumed_seconds_ = 0.0;               // training seconds before this session
  results::RunRecord record_;
  bool resuming_ = false;
  std::optional<RunCheckpoints::Read> resume_from_;  // rank 0, resuming: the newest good checkpoint
  std::vector<std::string> resume_warnings_;          // the damaged ones skipped to find it
  int64_t threads_ = 1;
  std::unique_ptr<RunSetup> setup_;
  std::optional<c10::DeviceGuard> device_guard_;  // CUDA: the run's device is the current one
  std::optional<data::TrainStream> stream_;
  RunLog run_log_;
  TrainOutcome outcome_;
  int64_t step_ = 0, tokens_ = 0;
  int64_t saves_ = 0;  // saves so far this session: the save barrier's key (data parallel)
  double train_seconds_ = 0.0;
};

}  // namespace

TrainOutcome train(const config::LoadedConfig& loaded, const TrainOptions& options) {
  if (loaded.config.task == "needle")
    throw std::logic_error("train::train: a needle config runs through harness::run_task");
  TrainingSession session(loaded, options);
  session.connect();
  if (auto done = session.prepare()) return *done;
  session.start_or_resume();
  return session.loop();
}

}  // namespace harness::train
