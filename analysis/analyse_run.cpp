#include "analysis/analyse_run.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "attention/method.h"
#include "harness/config/engine_options.h"
#include "harness/train/evaluate.h"
#include "harness/train/finished_run.h"
#include "common/errors.h"
#include "results/run_file.h"
#include "sweeps/run_lock.h"

namespace analysis {

using harness::InputError;

namespace {

// The settings an analysis was made at: the same settings, the same numbers.
// The windows by their fingerprint too: with eval.same_text the same count means other text.
std::map<std::string, results::Attribute> settings(const harness::data::EvalWindows& windows, int64_t queries,
                                                   uint64_t seed, int64_t step) {
  return {{"windows", windows.requested},
          {"window_fingerprint", harness::data::window_fingerprint(windows)},
          {"queries_per_window", queries},
          {"eval_seed", int64_t(seed)},
          {"checkpoint_step", step}};
}

// Compared as text: files written before attributes were numbers hold "16" where these hold 16.
bool same_settings(const results::DatasetGroup& g, const std::map<std::string, results::Attribute>& s) {
  for (const auto& [key, value] : s) {
    const auto it = g.attributes.find(key);
    if (it == g.attributes.end() || results::attribute_text(it->second) != results::attribute_text(value))
      return false;
  }
  return true;
}

// The contexts to analyse: --contexts resolved against L, or the run's eval.contexts.
std::vector<int64_t> analysed_contexts(const harness::config::RunConfig& c, const AnalyseOptions& o) {
  if (o.contexts.empty()) return c.eval_contexts();
  std::vector<int64_t> contexts;
  for (const auto& v : o.contexts) {
    const double t = v.resolve(c.train.context);
    if (!(t >= 1) || std::fabs(t - std::round(t)) > 1e-9)
      throw InputError(fmt::format("--contexts: '{}' is {} tokens at L = {}, not a whole number of "
                                   "tokens >= 1", v.text(), t, c.train.context));
    contexts.push_back(std::llround(t));
  }
  return contexts;
}

// The validation windows of each of `contexts`, every one checked before any work: contexts the
// model and the data can take. The run's eval.same_text holds here too: windows cut from the
// longest of the run's contexts and these, so that a context is scored as the run's validation
// scored it.
std::map<int64_t, harness::data::EvalWindows> analysed_windows(const harness::train::FinishedRun& run,
                                                               const std::vector<int64_t>& contexts,
                                                               const std::function<int64_t(int64_t)>& windows_at) {
  const auto& c = run.loaded.config;
  const auto method = attention::resolve_method(harness::config::method_options(c));
  for (const int64_t T : contexts) {
    try {
      attention::check_context(method, T);
    } catch (const std::invalid_argument& e) {
      throw InputError(fmt::format("--contexts: {}", e.what()));
    }
  }
  std::vector<int64_t> drawn = contexts;
  if (c.eval.same_text) {
    const auto own = c.eval_contexts();
    drawn.push_back(*std::max_element(own.begin(), own.end()));
  }
  std::map<int64_t, harness::data::EvalWindows> eval_windows;
  try {
    eval_windows = harness::data::make_validation_windows(run.dataset->validation_documents(), drawn, windows_at,
                                                          c.eval.seed, c.eval.same_text);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}{}", c.eval.same_text ? "eval.same_text: " : "", e.what()));
  }
  for (auto it = eval_windows.begin(); it != eval_windows.end();)
    it = std::find(contexts.begin(), contexts.end(), it->first) == contexts.end() ? eval_windows.erase(it) : std::next(it);
  return eval_windows;
}

}  // namespace

AnalyseOutcome analyse_run(const std::string& run_dir, const AnalyseOptions& o,
                           const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto run = harness::train::open_finished_run(run_dir);  // reads only: a missing run stays missing
  harness::sweeps::RunLock lock;
  if (!lock.try_acquire(run_dir)) {
    std::string holder;
    harness::sweeps::run_lock_held(run_dir, &holder);
    throw InputError(fmt::format("{}: the run is locked by {} (training or being analysed); try "
                                 "again when it is free", run_dir, holder.empty() ? "another process" : holder));
  }
  const auto& c = run.loaded.config;
  if (o.windows > 0 && o.tokens > 0)
    throw InputError("--windows and --tokens both size the validation: give one");
  const auto windows_at = [&](int64_t T) {
    if (o.windows > 0) return o.windows;
    if (o.tokens > 0) return std::max<int64_t>(1, (o.tokens + T - 1) / T);
    return c.eval_windows_at(T);
  };
  const int64_t queries = harness::train::statistics_queries(c.eval.attention_queries, o.queries);
  const int64_t batch = o.batch_size > 0 ? o.batch_size : c.eval.batch_size;
  const auto contexts = analysed_contexts(c, o);

  const auto eval_windows = analysed_windows(run, contexts, windows_at);

  AnalyseOutcome out;
  out.run_dir = run_dir;
  std::map<int64_t, results::DatasetGroup> done;
  for (const auto& [T, w] : eval_windows) {
    const auto wanted = settings(w, queries, c.eval.seed, run.record.status_step);
    const auto existing = run.record.analysis.find(T);
    if (!o.force && existing != run.record.analysis.end() && same_settings(existing->second, wanted)) {
      out.skipped.push_back(T);
      if (progress) progress(fmt::format("T = {}: already analysed at these settings", T));
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = harness::train::evaluate(run.model, w, batch, /*position_buckets=*/1, torch::kCPU,
                                            queries, /*raw_scores=*/true);
    results::DatasetGroup g = r.attention;
    for (const auto& [key, value] : wanted) g.attributes[key] = value;
    g.arrays["loss"] = {{1}, {r.loss}, "nats/token, mean over the windows"};
    g.arrays["loss_se"] = {{1}, {r.loss_se}, "nats/token, standard error of loss over the windows"};
    g.arrays["window_loss"] = {{int64_t(r.window_loss.size())}, r.window_loss,
                               "nats/token, mean of each window (in the order of the windows)"};
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g.attributes["seconds"] = seconds;
    done[T] = std::move(g);
    out.analysed.push_back(T);
    if (progress)
      progress(fmt::format("T = {}: loss {:.4f} ± {:.4f}, {} windows × {} queries, {:.1f} s", T, r.loss,
                           r.loss_se, w.tokens.size(0), queries, seconds));
  }
  if (!done.empty()) {
    // Re-read under the lock, so nothing written since opening is lost.
    results::RunRecord record = results::read_run_file(run.paths.results);
    for (auto& [T, g] : done) record.analysis[T] = std::move(g);
    results::publish(record, run.paths.results);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace analysis
