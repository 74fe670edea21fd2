#include "harness/tasks/needle/needle_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "harness/config/engine_options.h"
#include "harness/tasks/needle/needle_task.h"
#include "harness/tasks/needle/passkey_eval.h"
#include "harness/tasks/needle/passkey_task.h"
#include "harness/train/checkpoint.h"
#include "harness/train/evaluate.h"
#include "harness/train/finished_run.h"
#include "harness/train/run_directory.h"
#include "common/errors.h"
#include "common/interrupt.h"
#include "common/progress.h"
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
  const std::string problem = vocabulary_problem(dataset.tokenizer(), loaded.config.needle.kind);
  if (!problem.empty()) fail_key(loaded, "init_from", problem);
}

}  // namespace

std::string vocabulary_problem(const data::Tokenizer& tokenizer, const std::string& kind) {
  if (tokenizer.pretokenized())
    return fmt::format("the pretrained model reads pretokenized ids ({}): there is no tokenizer to "
                       "write the {} text with", tokenizer.name(), kind);
  std::vector<std::string> probes = {kPasskeyIntro, kPasskeyAfter, kPasskeyQuestion, "0123456789"};
  if (kind != "passkey") {
    probes = {needle_sentence("X", "0123456789"), kQuestion, "=;\n"};
    for (const auto& city : needle_cities()) probes.push_back(city);
  }
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
                         "{} text: '{}' comes back as '{}'",
                         tokenizer.name(), tokenizer.vocab_size(), kind, text, back);
  }
  return "";
}

std::vector<int32_t> greedy_decode(models::GPT& model, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop, int64_t context, bool kv_cache,
                                   torch::Device device) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(!prompt.empty(), "greedy_decode: empty prompt");
  // The last token written is never read back: prompt + max_new − 1 tokens go through the model.
  TORCH_CHECK(max_new >= 1, "greedy_decode: max_new must be at least 1, got ", max_new);
  TORCH_CHECK(int64_t(prompt.size()) + max_new - 1 <= context, "greedy_decode: prompt (", prompt.size(),
              ") + max_new (", max_new, ") − 1 exceed the context ", context);
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
  if (fs::exists(from / "run.h5") || !train::RunCheckpoints(from.string()).empty()) return from.string();
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

namespace {

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return s / double(v.size());
}

// One needle run in stages, as train::TrainingSession runs a training: everything is checked
// before anything is written (prepare), then the run directory is opened, the pretrained model
// fine-tuned and evaluated at each context; the record is published at every end (done,
// interrupted, failed).
class NeedleSession {
 public:
  NeedleSession(const config::LoadedConfig& loaded, const train::TrainOptions& options)
      : loaded_(loaded),
        c_(loaded.config),
        options_(options),
        paths_(options.run_dir.empty() ? (fs::path(c_.run.out_dir) / c_.name).string() : options.run_dir),
        hash_(config::config_hash(c_)) {
    outcome_.run_dir = paths_.dir;
  }

  train::TrainOutcome run() {
    if (auto done = done_already()) return *done;
    prepare();
    open_run_directory();
    if (!fine_tune()) return outcome_;
    base_->model->eval();
    if (passkey_) {
      for (const int64_t d : c_.needle_distances())
        if (!evaluate_passkey(d)) return outcome_;
    } else {
      for (const int64_t T : c_.needle_contexts())
        if (!evaluate(T)) return outcome_;
    }
    train::save_checkpoint(train::RunCheckpoints(paths_.dir), base_->model, *optim_,
                           {c_.needle.steps, tokens_, {}, hash_}, 1);
    finish(results::RunState::kDone, "", c_.needle.steps);
    run_log_.all->info("done: {} fine-tuning steps ({:.1f} s); results in {}", c_.needle.steps, seconds_,
                       paths_.results);
    return outcome_;
  }

 private:
  // A done run resumed is returned as it is; any other existing run is refused as training's is.
  std::optional<train::TrainOutcome> done_already() {
    train::refuse_existing_run(paths_, options_);
    if (!options_.resume || !fs::exists(paths_.results)) return std::nullopt;
    const auto record = results::read_run_file(paths_.results);
    train::require_same_run(record, c_, paths_.dir);
    if (record.state != results::RunState::kDone) return std::nullopt;
    return train::TrainOutcome{record.state, record.reason, record.status_step, paths_.dir, {}};
  }

  // init_from, the pretrained run and its config, the vocabulary, the contexts: errors at the
  // key, before anything is written.
  void prepare() {
    init_dir_ = pretrained_run_dir(loaded_);
    threads_ = train::use_run_threads(c_);
    device_ = train::pick_device(loaded_);
    try {
      base_.emplace(train::open_finished_run(init_dir_, device_));
    } catch (const InputError& e) {
      fail_key(loaded_, "init_from", e.what());
    }
    base_id_ = config::config_hash(base_->loaded.config);
    const std::string want_id = config::config_hash(pretraining_config(c_));
    if (base_id_ != want_id)
      fail_key(loaded_, "init_from",
               fmt::format("{} is run {}, but this config's pretraining run is {}; they differ in: "
                           "{} (set these keys as the pretrained run has them: its config.yaml)",
                           init_dir_, base_id_, want_id,
                           fmt::join(differing_keys(pretraining_config(c_), base_->loaded.config), "; ")));
    const data::Dataset& dataset = *base_->dataset;
    check_vocabulary(loaded_, dataset);
    const auto encode = [&dataset](const std::string& text) { return dataset.tokenizer().encode(text); };
    const auto generator = [&](const std::vector<data::TokenizedDocument>& docs, const char* split) {
      auto haystacks = texts(dataset, docs);
      if (haystacks.empty())
        fail_key(loaded_, "data.corpus", fmt::format("the corpus has no {} text to build haystacks from", split));
      return Generator(std::move(haystacks), encode);
    };
    if (passkey_) {
      prepare_passkey(dataset, encode);
      return;
    }
    train_examples_.emplace(generator(dataset.train_documents(), "training"));
    eval_examples_.emplace(generator(dataset.validation_documents(), "validation"));
    const int64_t L = c_.train.context, need = train_examples_->min_total_tokens();
    if (L + 1 < need)
      fail_key(loaded_, "train.context",
               fmt::format("a needle example needs at least {} tokens (three needles, the question "
                           "and the answer), but the pretrained run's context is {}: pretrain at a "
                           "longer context (sweeps/needle-base.yaml trains at 256)", need, L));
    for (const int64_t T : c_.needle_contexts())
      if (T < need)
        fail_key(loaded_, "needle.contexts",
                 fmt::format("context {} cannot hold a needle example (at least {} tokens)", T, need));
  }

  // The passkey's examples from the training and validation documents; every distance checked.
  void prepare_passkey(const data::Dataset& dataset, const Encode& encode) {
    const auto generator = [&](const std::vector<data::TokenizedDocument>& docs, const char* split) {
      std::vector<std::vector<int32_t>> tokens;
      for (const auto& d : docs) tokens.push_back(d.tokens);
      try {
        return PasskeyGenerator(tokens, encode);
      } catch (const std::invalid_argument&) {
        fail_key(loaded_, "data.corpus", fmt::format("the corpus has no {} text to build passkey examples from", split));
      }
    };
    passkey_train_.emplace(generator(dataset.train_documents(), "training"));
    passkey_eval_.emplace(generator(dataset.validation_documents(), "validation"));
    const int64_t L = c_.train.context, key = passkey_train_->max_key_tokens(), intro = passkey_train_->intro_tokens();
    const int64_t shortest = passkey_train_->min_distance();
    if (L + 1 < intro + shortest + key || L / 2 + 1 < intro + key)
      fail_key(loaded_, "train.context",
               fmt::format("a passkey example needs at least {} tokens (the key, the question and the answer), "
                           "and half the training context at least {}: the pretrained run's context is {}",
                           intro + shortest + key, 2 * (intro + key - 1), L));
    for (const int64_t d : c_.needle_distances())
      if (d < shortest)
        fail_key(loaded_, "needle.distances",
                 fmt::format("distance {} is shorter than the key, its sentence and the question ({} tokens)", d,
                             shortest));
  }

  // From here on the run directory is ours; an unfinished run starts again.
  void open_run_directory() {
    fs::remove(paths_.results);
    train::RunCheckpoints(paths_.dir).remove_all();
    if (options_.overwrite) fs::remove(paths_.log);
    fs::create_directories(paths_.dir);
    run_log_ = make_run_log(paths_.log);
    train::write_resolved_config(paths_, c_);
    record_ = train::fresh_record(loaded_, threads_, device_);
    record_.config["init_from_run"] = init_dir_;
    record_.config["init_from_id"] = base_id_;
    run_log_.all->info("{} run {} (id {}): fine-tuning {} (id {}, method {}) at L = {}, evaluating at {} {}",
                       c_.needle.kind, c_.name, hash_, init_dir_, base_id_, c_.attention.method, c_.train.context,
                       passkey_ ? "distances" : "contexts",
                       fmt::join(passkey_ ? c_.needle_distances() : c_.needle_contexts(), ", "));
  }

  // The paper's schedule (warm-up, constant, cool-down) on the answer tokens only; false when it
  // stopped (a signal: interrupted; a non-finite loss: failed).
  bool fine_tune() {
    models::GPT& model = base_->model;
    model->train();
    optim_.emplace(model, c_.optim);
    models::ScheduleOptions schedule;
    schedule.kind = "constant-cooldown";
    schedule.warmup_steps = c_.needle.warmup_steps;
    schedule.cooldown_fraction = double(c_.needle.cooldown_steps) / double(c_.needle.steps);
    install_interrupt_handlers();
    const bool bar = options_.progress_bar < 0 ? stderr_is_terminal() : options_.progress_bar == 1;
    Progress progress(run_log_, c_.needle.steps, c_.run.log_every, bar);
    const int64_t B = c_.needle.batch_size, L = c_.train.context;
    for (int64_t step = 0; step < c_.needle.steps; ++step) {
      if (interrupt_requested()) {
        progress.finish();
        finish(results::RunState::kInterrupted,
               fmt::format("signal {} at fine-tuning step {}", interrupt_signal(), step), step);
        run_log_.all->warn("interrupted; a needle run starts again from the pretrained weights on --resume");
        return false;
      }
      const auto t0 = Clock::now();
      // (B, L + 1) examples, right-padded (subword tokens) with mask 0.
      auto batch = torch::zeros({B, L + 1}, torch::kLong);
      auto mask = torch::zeros({B, L}, torch::kFloat);
      for (int64_t b = 0; b < B; ++b) {
        const uint64_t seed = mix(c_.train.seed, uint64_t(step), uint64_t(b));
        std::vector<int32_t> tokens;
        std::vector<float> m;
        if (passkey_) {
          auto e = passkey_train_->make_training(L + 1, seed);
          m = answer_mask(e);
          tokens = std::move(e.tokens);
        } else {
          auto e = train_examples_->make(L + 1, seed);
          m = target_mask(e);
          tokens = std::move(e.tokens);
        }
        for (size_t i = 0; i < tokens.size(); ++i) batch[b][int64_t(i)] = int64_t(tokens[i]);
        for (size_t i = 0; i < m.size(); ++i) mask[b][int64_t(i)] = m[i];
      }
      batch = batch.to(device_);
      const double factor = models::lr_factor(schedule, step, c_.needle.steps);
      optim_->set_lr_factor(factor);
      optim_->zero_grad();
      auto loss = masked_loss(model, batch.slice(1, 0, L), batch.slice(1, 1, L + 1), mask.to(device_));
      loss.backward();
      const double loss_value = loss.item<double>();
      const double grad_norm = models::clip_grad_norm(model, c_.train.grad_clip).item<double>();
      if (!std::isfinite(loss_value) || !std::isfinite(grad_norm)) {
        progress.finish();
        finish(results::RunState::kFailed, fmt::format("non-finite loss at fine-tuning step {}", step + 1), step);
        run_log_.all->error("run failed: {}", record_.reason);
        return false;
      }
      optim_->step();
      tokens_ += B * L;
      seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
      auto& t = record_.train;
      t.step.push_back(step + 1);
      t.tokens.push_back(tokens_);
      t.loss.push_back(loss_value);
      t.lr.push_back(factor);
      t.grad_norm.push_back(grad_norm);
      t.seconds.push_back(seconds_);
      progress.update(step + 1, loss_value, double(B * L) / std::max(1e-9, seconds_ / double(step + 1)));
    }
    progress.finish();
    return true;
  }

  // Greedy decoding with the KV cache on needle.examples examples of T tokens, into
  // record_.needle[T]; false when interrupted.
  bool evaluate(int64_t T) {
    const auto t0 = Clock::now();
    const data::Dataset& dataset = *base_->dataset;
    const auto newline = dataset.tokenizer().encode("\n");
    const int32_t stop = newline.size() == 1 ? newline[0] : -1;
    const int64_t N = c_.needle.examples;
    std::vector<double> retrieved, city, number, depth;
    for (int64_t n = 0; n < N; ++n) {
      if (interrupt_requested()) {
        finish(results::RunState::kInterrupted, fmt::format("signal {} during evaluation", interrupt_signal()),
               c_.needle.steps);
        return false;
      }
      const Example e = eval_examples_->make(T, mix(c_.needle.seed, uint64_t(T), uint64_t(n)));
      const std::vector<int32_t> prompt(e.tokens.begin(), e.tokens.begin() + e.prompt_tokens);
      const auto out = greedy_decode(base_->model, prompt, e.target_tokens(), stop, T, true, device_);
      const std::string text = dataset.tokenizer().decode(out);
      const Score s = score_answer(text, e.needles);
      for (int k = 0; k < kNeedles; ++k) {
        retrieved.push_back(s.retrieved[size_t(k)]);
        city.push_back(s.city[size_t(k)]);
        number.push_back(s.number[size_t(k)]);
        depth.push_back(double(e.needles[size_t(k)].offset) / double(e.prompt.size()));
      }
      if (n < 2) run_log_.file->info("context {} example {}: expected '{}', generated '{}'", T, n, e.answer, text);
    }
    // Standard error over examples (each example's fraction of needles retrieved).
    const double acc = mean_of(retrieved);
    double ss = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double x = (retrieved[size_t(3 * n)] + retrieved[size_t(3 * n + 1)] + retrieved[size_t(3 * n + 2)]) / 3.0;
      ss += (x - acc) * (x - acc);
    }
    const double se = N > 1 ? std::sqrt(ss / double(N - 1) / double(N)) : std::nan("");
    results::DatasetGroup g;
    const std::vector<int64_t> shape = {N, kNeedles};
    g.arrays["retrieved"] = {shape, retrieved, "1 = city and number right, per example and needle (order of appearance)"};
    g.arrays["city_correct"] = {shape, city, "1 = city right"};
    g.arrays["number_correct"] = {shape, number, "1 = number right"};
    g.arrays["needle_depth"] = {shape, depth, "needle start / prompt length (bytes)"};
    g.arrays["accuracy"] = {{1}, {acc}, "fraction of needles retrieved"};
    g.arrays["accuracy_se"] = {{1}, {se}, "standard error of accuracy over examples"};
    g.arrays["city_accuracy"] = {{1}, {mean_of(city)}, "fraction of cities right"};
    g.arrays["number_accuracy"] = {{1}, {mean_of(number)}, "fraction of numbers right"};
    g.attributes["examples"] = int64_t(N);
    g.attributes["seed"] = int64_t(c_.needle.seed);
    g.attributes["decoding"] = "greedy, KV cache";
    record_.needle[T] = std::move(g);
    run_log_.all->info("needle at context {}: accuracy {:.3f} ± {:.3f} (cities {:.3f}, numbers {:.3f}; {} "
                       "examples, {:.1f} s)",
                       T, acc, se, mean_of(city), mean_of(number), N,
                       std::chrono::duration<double>(Clock::now() - t0).count());
    return true;
  }

  // needle.examples passkey examples at distance d (validation text, seeded by needle.seed: the
  // same for every run), scored teacher-forced into record_.needle[d]; false when interrupted.
  bool evaluate_passkey(int64_t d) {
    if (interrupt_requested()) {
      finish(results::RunState::kInterrupted, fmt::format("signal {} during evaluation", interrupt_signal()),
             c_.needle.steps);
      return false;
    }
    const auto t0 = Clock::now();
    std::vector<PasskeyExample> examples;
    for (int64_t n = 0; n < c_.needle.examples; ++n)
      examples.push_back(passkey_eval_->make_at_distance(d, c_.train.context, mix(c_.needle.seed, uint64_t(d), uint64_t(n))));
    const int64_t N = int64_t(examples.front().tokens.size());
    const auto scores = score_passkeys(base_->model, examples,
                                       train::eval_batch_windows(c_.eval.batch_size, c_.eval.max_batch_tokens, N - 1),
                                       device_);
    auto g = passkey_group(scores, d, N, c_.needle.seed);
    run_log_.all->info("passkey at distance {} ({} tokens): exact {:.3f} ± {:.3f}, log-probability {:.2f} nats ({} "
                       "examples, {:.1f} s)",
                       d, N, g.arrays.at("accuracy").values[0], g.arrays.at("accuracy_se").values[0],
                       g.arrays.at("mean_log_prob").values[0], examples.size(),
                       std::chrono::duration<double>(Clock::now() - t0).count());
    record_.needle[d] = std::move(g);
    return true;
  }

  void finish(results::RunState state, const std::string& reason, int64_t step) {
    record_.state = state;
    record_.reason = reason;
    record_.status_step = step;
    results::publish(record_, paths_.results);
    outcome_.state = state;
    outcome_.reason = reason;
    outcome_.step = step;
  }

  const config::LoadedConfig& loaded_;
  const config::RunConfig& c_;
  const train::TrainOptions& options_;
  const results::RunPaths paths_;
  const std::string hash_;
  std::string init_dir_, base_id_;
  int64_t threads_ = 1;
  torch::Device device_ = torch::kCPU;
  std::optional<train::FinishedRun> base_;  // the pretrained run: model, dataset, config
  const bool passkey_ = c_.needle.kind == "passkey";
  std::optional<Generator> train_examples_, eval_examples_;
  std::optional<PasskeyGenerator> passkey_train_, passkey_eval_;
  std::optional<models::Optimizers> optim_;
  RunLog run_log_;
  results::RunRecord record_;
  int64_t tokens_ = 0;
  double seconds_ = 0.0;
  train::TrainOutcome outcome_;
};

}  // namespace

train::TrainOutcome run_needle(const config::LoadedConfig& loaded, const train::TrainOptions& options) {
  return NeedleSession(loaded, options).run();
}

}  // namespace harness::needle
