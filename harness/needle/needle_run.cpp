#include "harness/needle/needle_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "harness/config/engine_options.h"
#include "harness/needle/needle_task.h"
#include "harness/train/checkpoint.h"
#include "harness/train/finished_run.h"
#include "harness/train/run_directory.h"
#include "harness/util/errors.h"
#include "harness/util/interrupt.h"
#include "harness/util/progress.h"
#include "models/optimizers.h"
#include "models/schedule.h"

namespace fs = std::filesystem;

namespace harness::needle {

namespace {

using Clock = std::chrono::steady_clock;

int32_t argmax_last(const torch::Tensor& logits) {  // (1, n, V) → the last row's argmax
  return int32_t(logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>());
}

torch::Tensor as_tokens(const std::vector<int32_t>& ids, torch::Device device) {
  std::vector<int64_t> wide(ids.begin(), ids.end());
  return torch::tensor(wide, torch::kLong).view({1, int64_t(wide.size())}).to(device);  // (1, n)
}

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {  // splitmix64 over three words
  uint64_t h = 0x243F6A8885A308D3ull;
  for (uint64_t x : {a, b, c}) {
    h += x + 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

std::vector<std::string> texts(const data::Dataset& dataset,
                               const std::vector<data::TokenizedDocument>& docs) {
  std::vector<std::string> out;
  for (const auto& d : docs)
    if (!d.tokens.empty()) out.push_back(dataset.tokenizer().decode(d.tokens));
  return out;
}

[[noreturn]] void fail_key(const config::LoadedConfig& loaded, const std::string& key,
                           const std::string& what) {
  config::fail_at(loaded.location_of(key), key, what);
}

// Every key of the run's identity on which two configs differ, "key: a (pretrained: b)".
std::vector<std::string> differing_keys(const config::RunConfig& a, const config::RunConfig& b) {
  std::vector<std::string> out;
  for (const auto& k : config::schema()) {
    if (!k.affects_results || (!k.is_read(a) && !k.is_read(b))) continue;
    const std::string va = k.get(a), vb = k.get(b);
    if (va != vb) out.push_back(fmt::format("{}: {} (pretrained: {})", k.path, va, vb));
  }
  return out;
}

void check_vocabulary(const config::LoadedConfig& loaded, const data::Dataset& dataset) {
  const std::string problem = vocabulary_problem(dataset.tokenizer());
  if (!problem.empty()) fail_key(loaded, "init_from", problem);
}

}  // namespace

std::string vocabulary_problem(const data::Tokenizer& tokenizer) {
  if (tokenizer.pretokenized())
    return fmt::format("the pretrained model reads pretokenized ids ({}): there is no tokenizer to "
                       "write the needle text with", tokenizer.name());
  std::vector<std::string> probes = {needle_sentence("X", "0123456789"), kQuestion, "=;\n"};
  for (const auto& city : needle_cities()) probes.push_back(city);
  for (const auto& text : probes) {
    std::vector<int32_t> ids;
    std::string back;
    try {
      ids = tokenizer.encode(text);
      back = tokenizer.decode(ids);
    } catch (const std::exception& e) {
      back = std::string("(error: ") + e.what() + ")";
    }
    bool in_vocab = true;
    for (const int32_t id : ids) in_vocab = in_vocab && id >= 0 && id < tokenizer.vocab_size();
    if (back != text || !in_vocab)
      return fmt::format("the pretrained model's vocabulary ({}, {} tokens) cannot express the "
                         "needle text: '{}' comes back as '{}'",
                         tokenizer.name(), tokenizer.vocab_size(), text, back);
  }
  return "";
}

std::vector<int32_t> greedy_decode(models::GPT& model, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop, int64_t context, bool kv_cache,
                                   torch::Device device) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(!prompt.empty(), "greedy_decode: empty prompt");
  TORCH_CHECK(int64_t(prompt.size()) + max_new <= context, "greedy_decode: prompt (",
              prompt.size(), ") + max_new (", max_new, ") exceed the context ", context);
  std::vector<int32_t> out;
  if (kv_cache) {
    models::KVCache cache(context);
    auto logits = model->forward_cached(as_tokens(prompt, device), cache);  // (1, P, V)
    while (int64_t(out.size()) < max_new) {
      out.push_back(argmax_last(logits));
      if (out.back() == stop || int64_t(out.size()) == max_new) break;
      logits = model->forward_cached(as_tokens({out.back()}, device), cache);  // (1, 1, V)
    }
    return out;
  }
  std::vector<int32_t> sequence = prompt;
  while (int64_t(out.size()) < max_new) {
    out.push_back(argmax_last(model->forward(as_tokens(sequence, device), context)));  // (1, t, V)
    sequence.push_back(out.back());
    if (out.back() == stop) break;
  }
  return out;
}

torch::Tensor masked_loss(models::GPT& model, const torch::Tensor& inputs,
                          const torch::Tensor& targets, const torch::Tensor& mask) {
  const auto logits = model->forward(inputs);  // (B, T, V)
  const auto nll = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // (B·T)
  const auto m = mask.reshape({-1}).to(nll.dtype());
  return (nll * m).sum() / m.sum().clamp_min(1.0);
}

config::RunConfig pretraining_config(const config::RunConfig& needle_config) {
  config::RunConfig c = needle_config;
  c.task = "lm";
  c.init_from.clear();
  c.needle = config::RunConfig::Needle{};
  return c;
}

std::string pretrained_run_dir(const config::LoadedConfig& loaded) {
  const auto& c = loaded.config;
  const fs::path from = c.init_from;
  if (!fs::is_directory(from))
    fail_key(loaded, "init_from", fmt::format("'{}' is not a directory (expected a run directory, "
                                              "or a directory of runs such as runs/needle-base)",
                                              c.init_from));
  if (fs::exists(from / "run.h5") || fs::exists(from / "checkpoint.pt")) return from.string();
  const std::string id = config::config_hash(pretraining_config(c));
  const fs::path run = from / id;
  if (!fs::is_directory(run))
    fail_key(loaded, "init_from",
             fmt::format("'{}' holds no run {}: the pretraining run of this config (its keys with "
                         "task: lm) is missing; train it first (for the shipped sweep: harness "
                         "sweep run sweeps/needle-base.yaml)",
                         c.init_from, id));
  return run.string();
}

train::TrainOutcome run_needle(const config::LoadedConfig& loaded, const train::TrainOptions& options) {
  const auto& c = loaded.config;
  const results::RunPaths paths(options.run_dir.empty() ? (fs::path(c.run.out_dir) / c.name).string()
                                                        : options.run_dir);
  const std::string hash = config::config_hash(c);
  train::refuse_existing_run(paths, options);
  if (options.resume && fs::exists(paths.results)) {
    const auto record = results::read_run_file(paths.results);
    train::require_same_run(record, c, paths.dir);
    if (record.state == results::RunState::kDone) {
      train::TrainOutcome done{record.state, record.reason, record.status_step, paths.dir, {}};
      return done;
    }
  }

  // Everything checked before anything is written.
  const std::string init_dir = pretrained_run_dir(loaded);
  const int64_t threads = train::use_run_threads(c);
  const torch::Device device = train::pick_device(loaded);
  train::FinishedRun base = [&] {
    try {
      return train::open_finished_run(init_dir, device);
    } catch (const InputError& e) {
      fail_key(loaded, "init_from", e.what());
    }
  }();
  const std::string base_id = config::config_hash(base.loaded.config);
  const std::string want_id = config::config_hash(pretraining_config(c));
  if (base_id != want_id)
    fail_key(loaded, "init_from",
             fmt::format("{} is run {}, but this config's pretraining run is {}; they differ in: "
                         "{} (set these keys as the pretrained run has them: its config.yaml)",
                         init_dir, base_id, want_id,
                         fmt::join(differing_keys(pretraining_config(c), base.loaded.config), "; ")));
  const data::Dataset& dataset = *base.dataset;
  check_vocabulary(loaded, dataset);
  const auto encode = [&dataset](const std::string& text) { return dataset.tokenizer().encode(text); };
  const auto generator = [&](const std::vector<data::TokenizedDocument>& docs, const char* split) {
    auto haystacks = texts(dataset, docs);
    if (haystacks.empty())
      fail_key(loaded, "data.corpus", fmt::format("the corpus has no {} text to build haystacks from", split));
    return Generator(std::move(haystacks), encode);
  };
  const Generator train_examples = generator(dataset.train_documents(), "training");
  const Generator eval_examples = generator(dataset.validation_documents(), "validation");
  const int64_t L = c.train.context, need = train_examples.min_total_tokens();
  if (L + 1 < need)
    fail_key(loaded, "train.context",
             fmt::format("a needle example needs at least {} tokens (three needles, the question "
                         "and the answer), but the pretrained run's context is {}: pretrain at a "
                         "longer context (sweeps/needle-base.yaml trains at 256)", need, L));
  for (const int64_t T : c.needle_contexts())
    if (T < need)
      fail_key(loaded, "needle.contexts",
               fmt::format("context {} cannot hold a needle example (at least {} tokens)", T, need));

  // From here on the run directory is ours; an unfinished run starts again.
  fs::remove(paths.results);
  fs::remove(paths.checkpoint);
  if (options.overwrite) fs::remove(paths.log);
  fs::create_directories(paths.dir);
  const RunLog run_log = make_run_log(paths.log);
  const auto& log = run_log.all;
  train::write_resolved_config(paths, c);
  results::RunRecord record = train::fresh_record(loaded, threads, device);
  record.config["init_from_run"] = init_dir;
  record.config["init_from_id"] = base_id;
  log->info("needle run {} (id {}): fine-tuning {} (id {}, method {}) at L = {}, evaluating at {}",
            c.name, hash, init_dir, base_id, c.attention.method, L,
            fmt::join(c.needle_contexts(), ", "));

  models::GPT& model = base.model;
  model->train();
  models::Optimizers optim(model, c.optim);
  models::ScheduleOptions schedule;
  schedule.kind = "constant-cooldown";
  schedule.warmup_steps = c.needle.warmup_steps;
  schedule.cooldown_fraction = double(c.needle.cooldown_steps) / double(c.needle.steps);

  train::TrainOutcome outcome;
  outcome.run_dir = paths.dir;
  const auto finish = [&](results::RunState state, const std::string& reason, int64_t step) {
    record.state = state;
    record.reason = reason;
    record.status_step = step;
    results::publish(record, paths.results);
    outcome.state = state;
    outcome.reason = reason;
    outcome.step = step;
  };

  install_interrupt_handlers();
  const bool bar = options.progress_bar < 0 ? stderr_is_terminal() : options.progress_bar == 1;
  Progress progress(run_log, c.needle.steps, c.run.log_every, bar);
  int64_t tokens = 0;
  double seconds = 0.0;
  const int64_t B = c.needle.batch_size;
  for (int64_t step = 0; step < c.needle.steps; ++step) {
    if (interrupt_requested()) {
      progress.finish();
      finish(results::RunState::kInterrupted,
             fmt::format("signal {} at fine-tuning step {}", interrupt_signal(), step), step);
      log->warn("interrupted; a needle run starts again from the pretrained weights on --resume");
      return outcome;
    }
    const auto t0 = Clock::now();
    // (B, L + 1) examples, right-padded (subword tokens) with mask 0.
    auto batch = torch::zeros({B, L + 1}, torch::kLong);
    auto mask = torch::zeros({B, L}, torch::kFloat);
    for (int64_t b = 0; b < B; ++b) {
      const Example e = train_examples.make(L + 1, mix(c.train.seed, uint64_t(step), uint64_t(b)));
      const auto m = target_mask(e);
      for (size_t i = 0; i < e.tokens.size(); ++i) batch[b][int64_t(i)] = int64_t(e.tokens[i]);
      for (size_t i = 0; i < m.size(); ++i) mask[b][int64_t(i)] = m[i];
    }
    batch = batch.to(device);
    const double factor = models::lr_factor(schedule, step, c.needle.steps);
    optim.set_lr_factor(factor);
    optim.zero_grad();
    auto loss = masked_loss(model, batch.slice(1, 0, L), batch.slice(1, 1, L + 1), mask.to(device));
    loss.backward();
    const double loss_value = loss.item<double>();
    const double grad_norm = models::clip_grad_norm(model, c.train.grad_clip);
    if (!std::isfinite(loss_value) || !std::isfinite(grad_norm)) {
      progress.finish();
      finish(results::RunState::kFailed, fmt::format("non-finite loss at fine-tuning step {}", step + 1), step);
      log->error("run failed: {}", record.reason);
      return outcome;
    }
    optim.step();
    tokens += B * L;
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    record.train.step.push_back(step + 1);
    record.train.tokens.push_back(tokens);
    record.train.loss.push_back(loss_value);
    record.train.lr.push_back(factor);
    record.train.grad_norm.push_back(grad_norm);
    record.train.seconds.push_back(seconds);
    progress.update(step + 1, loss_value, double(B * L) / std::max(1e-9, seconds / double(step + 1)));
  }
  progress.finish();
  model->eval();

  // Evaluation: greedy decoding with the KV cache, at each context.
  const auto newline = dataset.tokenizer().encode("\n");
  const int32_t stop = newline.size() == 1 ? newline[0] : -1;
  for (const int64_t T : c.needle_contexts()) {
    const auto t0 = Clock::now();
    const int64_t N = c.needle.examples;
    std::vector<double> retrieved, city, number, depth;
    for (int64_t n = 0; n < N; ++n) {
      if (interrupt_requested()) {
        finish(results::RunState::kInterrupted, fmt::format("signal {} during evaluation", interrupt_signal()),
               c.needle.steps);
        return outcome;
      }
      const Example e = eval_examples.make(T, mix(c.needle.seed, uint64_t(T), uint64_t(n)));
      const std::vector<int32_t> prompt(e.tokens.begin(), e.tokens.begin() + e.prompt_tokens);
      const auto out = greedy_decode(model, prompt, e.target_tokens(), stop, T, true, device);
      const std::string text = dataset.tokenizer().decode(out);
      const Score s = score_answer(text, e.needles);
      for (int k = 0; k < kNeedles; ++k) {
        retrieved.push_back(s.retrieved[size_t(k)]);
        city.push_back(s.city[size_t(k)]);
        number.push_back(s.number[size_t(k)]);
        depth.push_back(double(e.needles[size_t(k)].offset) / double(e.prompt.size()));
      }
      if (n < 2) run_log.file->info("context {} example {}: expected '{}', generated '{}'", T, n, e.answer, text);
    }
    const auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return s / double(v.size());
    };
    // Standard error over examples (each example's fraction of needles retrieved).
    std::vector<double> per_example;
    for (int64_t n = 0; n < N; ++n)
      per_example.push_back((retrieved[size_t(3 * n)] + retrieved[size_t(3 * n + 1)] + retrieved[size_t(3 * n + 2)]) / 3.0);
    const double acc = mean(retrieved);
    double ss = 0;
    for (double x : per_example) ss += (x - acc) * (x - acc);
    const double se = N > 1 ? std::sqrt(ss / double(N - 1) / double(N)) : std::nan("");

    results::DatasetGroup g;
    const std::vector<int64_t> shape = {N, kNeedles};
    g.arrays["retrieved"] = {shape, retrieved, "1 = city and number right, per example and needle (order of appearance)"};
    g.arrays["city_correct"] = {shape, city, "1 = city right"};
    g.arrays["number_correct"] = {shape, number, "1 = number right"};
    g.arrays["needle_depth"] = {shape, depth, "needle start / prompt length (bytes)"};
    g.arrays["accuracy"] = {{1}, {acc}, "fraction of needles retrieved"};
    g.arrays["accuracy_se"] = {{1}, {se}, "standard error of accuracy over examples"};
    g.arrays["city_accuracy"] = {{1}, {mean(city)}, "fraction of cities right"};
    g.arrays["number_accuracy"] = {{1}, {mean(number)}, "fraction of numbers right"};
    g.attributes["examples"] = int64_t(N);
    g.attributes["seed"] = int64_t(c.needle.seed);
    g.attributes["decoding"] = "greedy, KV cache";
    record.needle[T] = std::move(g);
    log->info("needle at context {}: accuracy {:.3f} ± {:.3f} (cities {:.3f}, numbers {:.3f}; {} "
              "examples, {:.1f} s)",
              T, acc, se, mean(city), mean(number), N,
              std::chrono::duration<double>(Clock::now() - t0).count());
  }
  train::save_checkpoint(paths.checkpoint, model, optim, {c.needle.steps, tokens, {}, hash});
  finish(results::RunState::kDone, "", c.needle.steps);
  log->info("done: {} fine-tuning steps ({:.1f} s); results in {}", c.needle.steps, seconds, paths.results);
  return outcome;
}

}  // namespace harness::needle
