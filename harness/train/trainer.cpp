#include "harness/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "harness/config/engine_options.h"
#include "harness/data/dataset.h"
#include "harness/needle/needle_run.h"
#include "harness/train/checkpoint.h"
#include "harness/train/evaluate.h"
#include "harness/train/run_directory.h"
#include "harness/util/errors.h"
#include "harness/util/interrupt.h"
#include "harness/util/progress.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "models/schedule.h"

namespace fs = std::filesystem;

namespace harness::train {

namespace {

using Clock = std::chrono::steady_clock;

// Everything a run needs, built (and so validated) before anything is written.
struct Setup {
  data::Dataset dataset;
  std::map<int64_t, data::EvalWindows> eval_windows;
  models::GPT model{nullptr};
  std::unique_ptr<models::Optimizers> optim;
  torch::Device device = torch::kCPU;
};

std::unique_ptr<Setup> build(const config::LoadedConfig& loaded) {
  const auto& c = loaded.config;
  auto s = std::unique_ptr<Setup>(new Setup{data::Dataset(c.data), {}, nullptr,
                                            nullptr, pick_device(loaded)});
  for (const int64_t T : c.eval_contexts()) {
    try {
      s->eval_windows.emplace(T, s->dataset.eval_windows(T, c.eval.windows, c.eval.seed));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: eval.contexts: {}", loaded.location_of("eval.contexts").str(),
                                   e.what()));
    }
  }
  torch::manual_seed(c.train.seed);
  try {
    s->model = models::GPT(config::gpt_options(c, s->dataset.vocab_size()));
    s->model->to(s->device);
    s->optim = std::make_unique<models::Optimizers>(s->model, c.optim);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}", loaded.source, e.what()));
  }
  return s;
}

}  // namespace

bool is_same_run(const results::RunRecord& record, const config::RunConfig& config) {
  const std::string id = config::config_hash(config);
  const auto stored = record.config.find("hash");
  if (stored != record.config.end() && stored->second == id) return true;
  // Written under the first id scheme: its stored config decides, by today's id.
  const auto canonical = record.config.find("canonical");
  if (canonical == record.config.end()) return false;
  try {
    return config::config_hash(config::load_run_config_text(canonical->second, "run.h5").config) == id;
  } catch (const InputError&) {
    return false;
  }
}

namespace {

// One run in three stages: prepare (decide what to do with an existing run directory, build and
// so validate everything, before anything is written), start or resume (take the directory,
// load the checkpoint or begin the record), loop (optimiser steps, validations, checkpoints).
class TrainingSession {
 public:
  TrainingSession(const config::LoadedConfig& loaded, const TrainOptions& options)
      : loaded_(loaded),
        c_(loaded.config),
        options_(options),
        paths_(options.run_dir.empty() ? (fs::path(c_.run.out_dir) / c_.name).string() : options.run_dir),
        hash_(config::config_hash(c_)) {
    outcome_.run_dir = paths_.dir;
  }

  // Returns the outcome of a run that is already done (nothing to do), else nullopt.
  std::optional<TrainOutcome> prepare() {
    refuse_existing_run(paths_, options_);
    resuming_ = options_.resume && fs::exists(paths_.checkpoint) && fs::exists(paths_.results);
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
    }
    threads_ = use_run_threads(c_);
    setup_ = build(loaded_);  // validates data, contexts, model and optimiser
    stream_.emplace(setup_->dataset.train_stream(c_.train.context, c_.train.seed));
    return std::nullopt;
  }

  // From here on the run directory is ours.
  void start_or_resume() {
    if (options_.overwrite && !resuming_) {
      fs::remove(paths_.results);
      fs::remove(paths_.checkpoint);
      fs::remove(paths_.log);
    }
    fs::create_directories(paths_.dir);
    run_log_ = make_run_log(paths_.log);
    const auto& log = run_log_.all;
    write_resolved_config(paths_, c_);
    auto& model = setup_->model;
    if (resuming_) {
      const CheckpointState state = load_checkpoint(paths_.checkpoint, model, *setup_->optim);
      step_ = state.step;
      tokens_ = state.tokens;
      stream_->seek(state.cursor);
      record_.truncate_after(step_);
      if (!record_.train.seconds.empty()) train_seconds_ = record_.train.seconds.back();
      record_.state = results::RunState::kRunning;
      record_.reason.clear();
      log->info("resuming {} at step {}/{}", paths_.dir, step_, c_.train.steps);
    } else {
      record_ = fresh_record(loaded_, threads_, setup_->device);
      log->info("run {} (id {}): {}", c_.name, hash_, setup_->dataset.describe());
      log->info("model: {} parameters, method {}, L = {}, validation at {}", model->num_parameters(),
                c_.attention.method, c_.train.context, fmt::join(c_.eval_contexts(), ", "));
    }
    record_.config["threads_resumed_with"] = std::to_string(threads_);
  }

  TrainOutcome loop() {
    const auto& log = run_log_.all;
    install_interrupt_handlers();
    const bool bar = options_.progress_bar < 0 ? stderr_is_terminal() : options_.progress_bar == 1;
    Progress progress(run_log_, c_.train.steps, c_.run.log_every, bar);
    const int64_t micro_batch = c_.train.batch_size / c_.train.grad_accum;
    auto& model = setup_->model;
    auto& optim = *setup_->optim;
    model->train();
    const int64_t session_start = step_;
    try {
      while (step_ < c_.train.steps) {
        const bool session_over =
            options_.stop_after_steps > 0 && step_ - session_start >= options_.stop_after_steps;
        if (interrupt_requested() || session_over) {
          const std::string reason =
              session_over ? fmt::format("stopped after {} steps this session (--stop-after-steps)",
                                         options_.stop_after_steps)
                           : fmt::format("signal {} at step {}", interrupt_signal(), step_);
          stop_as(progress, results::RunState::kInterrupted, reason);
          log->warn("interrupted ({}); checkpoint saved, continue with --resume", reason);
          return outcome_;
        }
        const auto t0 = Clock::now();
        const double factor = models::lr_factor(c_.schedule, step_, c_.train.steps);
        optim.set_lr_factor(factor);
        optim.zero_grad();
        double loss_sum = 0.0;
        for (int64_t m = 0; m < c_.train.grad_accum; ++m) {
          const auto batch = stream_->next_batch(micro_batch).to(setup_->device);  // (B, L + 1)
          const auto inputs = batch.slice(1, 0, c_.train.context);
          const auto targets = batch.slice(1, 1, c_.train.context + 1);
          auto loss = model->loss(inputs, targets) / double(c_.train.grad_accum);
          loss.backward();
          loss_sum += loss.item<double>();
        }
        const double grad_norm = models::clip_grad_norm(model, c_.train.grad_clip);
        if (!std::isfinite(loss_sum) || !std::isfinite(grad_norm)) {
          const std::string reason = fmt::format("non-finite {} at step {}",
                                                 std::isfinite(loss_sum) ? "gradient norm" : "loss",
                                                 step_ + 1);
          stop_as(progress, results::RunState::kFailed, reason);
          log->error("run failed: {}", reason);
          return outcome_;
        }
        optim.step();
        ++step_;
        tokens_ += c_.train.batch_size * c_.train.context;
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        train_seconds_ += dt;
        record_.train.step.push_back(step_);
        record_.train.tokens.push_back(tokens_);
        record_.train.loss.push_back(loss_sum);
        record_.train.lr.push_back(factor);
        record_.train.grad_norm.push_back(grad_norm);
        record_.train.seconds.push_back(train_seconds_);
        progress.update(step_, loss_sum, double(c_.train.batch_size * c_.train.context) / dt);

        const bool last = step_ == c_.train.steps;
        if (last || (c_.eval.every > 0 && step_ % c_.eval.every == 0)) run_eval(progress);
        if (!last && c_.run.checkpoint_every > 0 && step_ % c_.run.checkpoint_every == 0)
          save(results::RunState::kRunning, "");
      }
    } catch (...) {
      progress.finish();
      record_.state = results::RunState::kFailed;
      record_.status_step = step_;
      try {
        throw;
      } catch (const std::exception& e) {
        record_.reason = e.what();
      } catch (...) {
        record_.reason = "unknown error";
      }
      results::publish(record_, paths_.results);  // keep the rows written so far
      throw;
    }
    progress.finish();
    save(results::RunState::kDone, "");
    log->info("done: {} steps, {} tokens, {:.1f} s training; results in {}", step_, tokens_,
              train_seconds_, paths_.results);
    outcome_.state = results::RunState::kDone;
    outcome_.step = step_;
    return outcome_;
  }

 private:
  void save(results::RunState state, const std::string& reason) {
    record_.state = state;
    record_.reason = reason;
    record_.status_step = step_;
    // run.h5 first, then the checkpoint: a crash in between leaves rows past the checkpoint,
    // which a resume truncates and recomputes identically.
    results::publish(record_, paths_.results);
    if (state != results::RunState::kFailed)
      save_checkpoint(paths_.checkpoint, setup_->model, *setup_->optim,
                      {step_, tokens_, stream_->cursor(), hash_});
  }

  // Ends the run before its last step: results (and, unless failed, a checkpoint) written.
  void stop_as(Progress& progress, results::RunState state, const std::string& reason) {
    progress.finish();
    save(state, reason);
    outcome_.state = state;
    outcome_.reason = reason;
    outcome_.step = step_;
  }

  void run_eval(Progress& progress) {
    std::vector<std::string> parts;
    for (const auto& [T, windows] : setup_->eval_windows) {
      const EvalResult r = evaluate(setup_->model, windows, c_.eval.batch_size,
                                    c_.eval.position_buckets, setup_->device, c_.eval.attention_queries);
      auto& rows = record_.eval[T];
      rows.step.push_back(step_);
      rows.loss.push_back(r.loss);
      rows.position_loss.push_back(r.position_loss);
      rows.score_std.push_back(r.score_std);
      if (!r.attention.empty()) rows.attention.append_row(r.attention);
      outcome_.eval_loss[T] = r.loss;
      parts.push_back(fmt::format("{}: {:.4f}", T, r.loss));
    }
    progress.message(fmt::format("step {}: validation loss by context — {}", step_, fmt::join(parts, ", ")));
  }

  const config::LoadedConfig& loaded_;
  const config::RunConfig& c_;
  const TrainOptions& options_;
  const results::RunPaths paths_;
  const std::string hash_;
  results::RunRecord record_;
  bool resuming_ = false;
  int64_t threads_ = 1;
  std::unique_ptr<Setup> setup_;
  std::optional<data::TrainStream> stream_;
  RunLog run_log_;
  TrainOutcome outcome_;
  int64_t step_ = 0, tokens_ = 0;
  double train_seconds_ = 0.0;
};

}  // namespace

TrainOutcome train(const config::LoadedConfig& loaded, const TrainOptions& options) {
  if (loaded.config.task == "needle") return needle::run_needle(loaded, options);
  TrainingSession session(loaded, options);
  if (auto done = session.prepare()) return *done;
  session.start_or_resume();
  return session.loop();
}

}  // namespace harness::train
