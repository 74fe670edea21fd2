#include "harness/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/config/engine_options.h"
#include "harness/data/dataset.h"
#include "harness/needle/needle_run.h"
#include "harness/train/checkpoint.h"
#include "harness/train/evaluate.h"
#include "harness/util/build_info.h"
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

torch::Device pick_device(const config::LoadedConfig& loaded) {
  if (loaded.config.run.device == "cpu") return torch::kCPU;
  if (!torch::cuda::is_available())
    throw InputError(fmt::format("{}: run.device: cuda requested, but this LibTorch has no CUDA "
                                 "device available; use run.device: cpu",
                                 loaded.location_of("run.device").str()));
  return torch::kCUDA;
}

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
  auto s = std::unique_ptr<Setup>(new Setup{data::Dataset(config::data_options(c)), {}, nullptr,
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
    s->optim = std::make_unique<models::Optimizers>(s->model, config::optim_options(c));
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}", loaded.source, e.what()));
  }
  return s;
}

results::RunRecord fresh_record(const config::LoadedConfig& loaded, int64_t threads,
                                const torch::Device& device) {
  results::RunRecord r;
  r.config["name"] = loaded.config.name;
  r.config["yaml"] = loaded.text;
  r.config["canonical"] = config::canonical_text(loaded.config, false);
  r.config["hash"] = config::config_hash(loaded.config);
  r.config["source"] = loaded.source;
  r.config["git_revision"] = git_revision();
  r.config["libtorch_version"] = libtorch_version();
  r.config["blas"] = blas_config();
  r.config["device"] = device.str();
  r.threads = threads;
  return r;
}

void write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  fs::rename(tmp, path);
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

TrainOutcome train(const config::LoadedConfig& loaded, const TrainOptions& options) {
  if (loaded.config.task == "needle") return needle::run_needle(loaded, options);
  const auto& c = loaded.config;
  const results::RunPaths paths(options.run_dir.empty() ? (fs::path(c.run.out_dir) / c.name).string()
                                               : options.run_dir);
  const std::string hash = config::config_hash(c);

  // Decide what to do with an existing run before doing any work.
  const bool has_results = fs::exists(paths.results);
  const bool has_checkpoint = fs::exists(paths.checkpoint);
  if ((has_results || has_checkpoint) && !options.resume && !options.overwrite) {
    std::string state = "unknown";
    if (has_results) state = results::to_string(results::read_run_file(paths.results).state);
    throw InputError(fmt::format("{} already holds a run (state: {}); pass --resume to continue "
                                 "it, --overwrite to start again, or choose another name",
                                 paths.dir, state));
  }
  results::RunRecord record;
  bool resuming = options.resume && has_checkpoint && has_results;
  if (resuming) {
    record = results::read_run_file(paths.results);
    if (!is_same_run(record, c))
      throw InputError(fmt::format("{}: the config changed since this run started (run id {} → "
                                   "{}); start a new run or restore the config",
                                   paths.dir, record.config["hash"], hash));
    // A run written under the first id scheme carries today's id from now on.
    record.config["hash"] = hash;
    record.config["canonical"] = config::canonical_text(c, false);
    if (record.state == results::RunState::kDone) {
      TrainOutcome done{record.state, record.reason, record.status_step, paths.dir, {}};
      for (const auto& [T, rows] : record.eval)
        if (!rows.loss.empty()) done.eval_loss[T] = rows.loss.back();
      return done;
    }
  }

  const int64_t threads =
      c.run.threads > 0 ? c.run.threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  torch::set_num_threads(int(threads));
  auto setup = build(loaded);  // validates data, contexts, model and optimiser
  auto& model = setup->model;
  auto& optim = *setup->optim;
  auto stream = setup->dataset.train_stream(c.train.context, c.train.seed);

  // From here on the run directory is ours.
  if (options.overwrite && !resuming) {
    fs::remove(paths.results);
    fs::remove(paths.checkpoint);
    fs::remove(paths.log);
  }
  fs::create_directories(paths.dir);
  const RunLog run_log = make_run_log(paths.log);
  const auto& log = run_log.all;
  write_text(paths.config, fmt::format("# resolved config of run {} (id {})\n{}", c.name, hash,
                                       config::canonical_text(c, false)));

  int64_t step = 0, tokens = 0;
  double train_seconds = 0.0;
  if (resuming) {
    const CheckpointState state = load_checkpoint(paths.checkpoint, model, optim);
    step = state.step;
    tokens = state.tokens;
    stream.seek(state.cursor);
    record.truncate_after(step);
    if (!record.train.seconds.empty()) train_seconds = record.train.seconds.back();
    record.state = results::RunState::kRunning;
    record.reason.clear();
    log->info("resuming {} at step {}/{}", paths.dir, step, c.train.steps);
  } else {
    record = fresh_record(loaded, threads, setup->device);
    log->info("run {} (id {}): {}", c.name, hash, setup->dataset.describe());
    log->info("model: {} parameters, method {}, L = {}, validation at {}", model->num_parameters(),
              c.attention.method, c.train.context, fmt::join(c.eval_contexts(), ", "));
  }
  record.config["threads_resumed_with"] = std::to_string(threads);

  const auto save = [&](results::RunState state, const std::string& reason) {
    record.state = state;
    record.reason = reason;
    record.status_step = step;
    // run.h5 first, then the checkpoint: a crash in between leaves rows past the checkpoint,
    // which a resume truncates and recomputes identically.
    results::publish(record, paths.results);
    if (state != results::RunState::kFailed)
      save_checkpoint(paths.checkpoint, model, optim, {step, tokens, stream.cursor(), hash});
  };

  TrainOutcome outcome;
  outcome.run_dir = paths.dir;
  const auto run_eval = [&](Progress& progress) {
    std::vector<std::string> parts;
    for (const auto& [T, windows] : setup->eval_windows) {
      const EvalResult r = evaluate(model, windows, c.eval.batch_size, c.eval.position_buckets,
                                    setup->device, c.eval.attention_queries);
      auto& rows = record.eval[T];
      rows.step.push_back(step);
      rows.loss.push_back(r.loss);
      rows.position_loss.push_back(r.position_loss);
      rows.score_std.push_back(r.score_std);
      if (!r.attention.empty()) rows.attention.append_row(r.attention);
      outcome.eval_loss[T] = r.loss;
      parts.push_back(fmt::format("{}: {:.4f}", T, r.loss));
    }
    progress.message(fmt::format("step {}: validation loss by context — {}", step, fmt::join(parts, ", ")));
  };

  install_interrupt_handlers();
  const bool bar = options.progress_bar < 0 ? stderr_is_terminal() : options.progress_bar == 1;
  Progress progress(run_log, c.train.steps, c.run.log_every, bar);
  // Ends the run before its last step: results (and, unless failed, a checkpoint) written.
  const auto stop_as = [&](results::RunState state, const std::string& reason) {
    progress.finish();
    save(state, reason);
    outcome.state = state;
    outcome.reason = reason;
    outcome.step = step;
  };
  const auto schedule = config::schedule_options(c);
  const int64_t micro_batch = c.train.batch_size / c.train.grad_accum;
  model->train();
  const int64_t session_start = step;
  try {
    while (step < c.train.steps) {
      const bool session_over =
          options.stop_after_steps > 0 && step - session_start >= options.stop_after_steps;
      if (interrupt_requested() || session_over) {
        const std::string reason =
            session_over ? fmt::format("stopped after {} steps this session (--stop-after-steps)",
                                       options.stop_after_steps)
                         : fmt::format("signal {} at step {}", interrupt_signal(), step);
        stop_as(results::RunState::kInterrupted, reason);
        log->warn("interrupted ({}); checkpoint saved, continue with --resume", reason);
        return outcome;
      }
      const auto t0 = Clock::now();
      const double factor = models::lr_factor(schedule, step, c.train.steps);
      optim.set_lr_factor(factor);
      optim.zero_grad();
      double loss_sum = 0.0;
      for (int64_t m = 0; m < c.train.grad_accum; ++m) {
        const auto batch = stream.next_batch(micro_batch).to(setup->device);  // (B, L + 1)
        const auto inputs = batch.slice(1, 0, c.train.context);
        const auto targets = batch.slice(1, 1, c.train.context + 1);
        auto loss = model->loss(inputs, targets) / double(c.train.grad_accum);
        loss.backward();
        loss_sum += loss.item<double>();
      }
      const double grad_norm = models::clip_grad_norm(model, c.train.grad_clip);
      if (!std::isfinite(loss_sum) || !std::isfinite(grad_norm)) {
        const std::string reason = fmt::format("non-finite {} at step {}",
                                               std::isfinite(loss_sum) ? "gradient norm" : "loss",
                                               step + 1);
        stop_as(results::RunState::kFailed, reason);
        log->error("run failed: {}", reason);
        return outcome;
      }
      optim.step();
      ++step;
      tokens += c.train.batch_size * c.train.context;
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      train_seconds += dt;
      record.train.step.push_back(step);
      record.train.tokens.push_back(tokens);
      record.train.loss.push_back(loss_sum);
      record.train.lr.push_back(factor);
      record.train.grad_norm.push_back(grad_norm);
      record.train.seconds.push_back(train_seconds);
      progress.update(step, loss_sum, double(c.train.batch_size * c.train.context) / dt);

      const bool last = step == c.train.steps;
      if (last || (c.eval.every > 0 && step % c.eval.every == 0)) run_eval(progress);
      if (!last && c.run.checkpoint_every > 0 && step % c.run.checkpoint_every == 0)
        save(results::RunState::kRunning, "");
    }
  } catch (...) {
    progress.finish();
    record.state = results::RunState::kFailed;
    record.status_step = step;
    try {
      throw;
    } catch (const std::exception& e) {
      record.reason = e.what();
    } catch (...) {
      record.reason = "unknown error";
    }
    results::publish(record, paths.results);  // keep the rows written so far
    throw;
  }
  progress.finish();
  save(results::RunState::kDone, "");
  log->info("done: {} steps, {} tokens, {:.1f} s training; results in {}", step, tokens,
            train_seconds, paths.results);
  outcome.state = results::RunState::kDone;
  outcome.step = step;
  return outcome;
}

}  // namespace harness::train
