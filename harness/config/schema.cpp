// Loading a run config: YAML mappings onto the key table (harness/config/schema_keys.cpp), with
// located errors and did-you-mean; overrides; the cross-key checks after loading.
#include "harness/config/schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "attention/cuda/kernel_limits.h"
#include "attention/method.h"
#include "harness/config/engine_options.h"
#include "harness/config/yaml_values.h"
#include "common/errors.h"

namespace harness::config {

namespace {

[[noreturn]] void fail(const Location& at, const std::string& key, const std::string& what) {
  fail_at(at, key, what);
}

}  // namespace

std::vector<int64_t> RunConfig::eval_contexts() const {
  std::vector<int64_t> out;
  for (const auto& c : eval.contexts) out.push_back(std::llround(c.resolve(train.context)));
  return out;
}

int64_t RunConfig::eval_windows_at(int64_t context) const {
  if (eval.tokens <= 0) return eval.windows;
  return std::max<int64_t>(1, (eval.tokens + context - 1) / std::max<int64_t>(context, 1));
}

std::vector<int64_t> RunConfig::needle_contexts() const {
  std::vector<int64_t> out;
  for (const auto& c : needle.contexts) out.push_back(std::llround(c.resolve(train.context)));
  return out;
}

std::vector<int64_t> RunConfig::needle_distances() const {
  std::vector<int64_t> out;
  for (const auto& c : needle.distances) out.push_back(std::llround(c.resolve(train.context)));
  return out;
}

Location LoadedConfig::location_of(const std::string& key) const {
  const auto it = where.find(key);
  return it != where.end() ? it->second : Location{source, 0, 0};
}

void apply_yaml(LoadedConfig& loaded, const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) return;  // an empty file: all defaults
  if (!root.IsMap())
    throw InputError(fmt::format("{}: expected a mapping of config keys at the top level, got {}",
                                 Location::of(source, root).str(), describe(root)));
  apply_keys(schema(), schema_paths(), loaded.config, root, source, loaded.where);
}

void apply_override(LoadedConfig& loaded, const std::string& key, const YAML::Node& value,
                    const Location& at) {
  const KeySpec* spec = find_key(key);
  if (!spec) unknown_key(schema_paths(), at, key);
  spec->set(loaded.config, value, at);
  loaded.where[key] = at;
}

namespace {

// Validation and task contexts: whole numbers of tokens, the same text cut from the longest; a
// needle run's init_from and schedule.
void check_contexts_and_task(const LoadedConfig& loaded) {
  const RunConfig& c = loaded.config;
  auto fail_at = [&](const std::string& key, const std::string& what) {
    fail(loaded.location_of(key), key, what);
  };
  for (size_t i = 0; i < c.eval.contexts.size(); ++i) {
    const double t = c.eval.contexts[i].resolve(c.train.context);
    if (t < 1 || std::fabs(t - std::round(t)) > 1e-9)
      fail_at("eval.contexts", fmt::format("context '{}' resolves to {} at L = {}, not a whole "
                                           "number of tokens",
                                           c.eval.contexts[i].text(), t, c.train.context));
  }
  if (c.eval.same_text && !c.eval.contexts.empty()) {
    const auto contexts = c.eval_contexts();
    const int64_t longest = *std::max_element(contexts.begin(), contexts.end());
    for (const int64_t T : contexts)
      if (T >= 1 && longest % T != 0)
        fail_at("eval.same_text", fmt::format("the same text is cut from windows of the longest "
                                              "context ({}) into chunks, so every context must divide "
                                              "it; eval.contexts holds {} (contexts: {})",
                                              longest, T, fmt::join(contexts, ", ")));
  }
  if (c.task == "needle") {
    if (c.init_from.empty())
      fail_at("task", "task: needle fine-tunes a pretrained run: set init_from to its run "
                      "directory, or to the directory of runs that holds it (a sweep's)");
    if (c.needle.warmup_steps + c.needle.cooldown_steps > c.needle.steps)
      fail_at(loaded.where.count("needle.cooldown_steps") ? "needle.cooldown_steps" : "needle.warmup_steps",
              fmt::format("needle.warmup_steps + needle.cooldown_steps ({} + {}) must not exceed "
                          "needle.steps ({})",
                          c.needle.warmup_steps, c.needle.cooldown_steps, c.needle.steps));
    const bool passkey = c.needle.kind == "passkey";
    for (const auto& v : passkey ? c.needle.distances : c.needle.contexts) {
      const double t = v.resolve(c.train.context);
      if (t < 1 || std::fabs(t - std::round(t)) > 1e-9)
        fail_at(passkey ? "needle.distances" : "needle.contexts",
                fmt::format("{} '{}' resolves to {} at L = {}, not a whole number of tokens",
                            passkey ? "distance" : "context", v.text(), t, c.train.context));
    }
  } else if (!c.init_from.empty()) {
    fail_at("init_from", "init_from is read only with task: needle (this run trains from scratch)");
  }
}

}  // namespace

void resolve_and_validate(LoadedConfig& loaded) {
  RunConfig& c = loaded.config;
  auto fail_at = [&](const std::string& key, const std::string& what) {
    fail(loaded.location_of(key), key, what);
  };
  if (c.train.batch_size % c.train.grad_accum != 0)
    fail_at("train.grad_accum", fmt::format("must divide train.batch_size ({}), got {}",
                                            c.train.batch_size, c.train.grad_accum));
  if (c.train.micro_batch_size > 0 && c.train.batch_size % c.train.micro_batch_size != 0)
    fail_at("train.micro_batch_size", fmt::format("must divide train.batch_size ({}), got {}",
                                                  c.train.batch_size, c.train.micro_batch_size));
  if (c.data.tokenizer.kind == "byte" && loaded.where.count("data.vocab_size") &&
      c.data.tokenizer.vocab_size != 256)
    fail_at("data.vocab_size", "the byte tokenizer has a vocabulary of 256; set data.tokenizer: "
                               "sentencepiece to choose a size");
  check_contexts_and_task(loaded);
  if (c.schedule.warmup_steps >= c.train.steps && c.schedule.warmup_steps > 0)
    fail_at("schedule.warmup_steps", fmt::format("must be below train.steps ({}), got {}",
                                                 c.train.steps, c.schedule.warmup_steps));
  if (c.model.head_dim == 0) {  // the GPT-2 convention: heads × head_dim = d_model
    if (c.model.d_model % c.model.heads != 0)
      fail_at(loaded.where.count("model.heads") ? "model.heads" : "model.d_model",
              fmt::format("model.d_model ({}) is not divisible by model.heads ({}); change one, or "
                          "set model.head_dim explicitly",
                          c.model.d_model, c.model.heads));
    c.model.head_dim = c.model.d_model / c.model.heads;
  }
  if (!loaded.where.count("optim.lr_hidden")) c.optim.lr_hidden = default_hidden_lr(c.optim.name);
  // The CUDA kernel runs with kernel: cuda, and with kernel: fused on run.device: cuda.
  const bool cuda_kernel = c.attention.kernel == "cuda" || (c.attention.kernel == "fused" && c.run.device == "cuda");
  if (cuda_kernel && !attention::cuda::supported_head_dim(c.model.head_dim))
    fail_at(loaded.where.count("model.head_dim")    ? "model.head_dim"
            : loaded.where.count("attention.kernel") ? "attention.kernel"
                                                      : "model.d_model",
            fmt::format("the CUDA attention kernel (attention.kernel: {}{}) supports model.head_dim "
                        "{}; this run has head_dim {}{}. Choose one of those, or attention.kernel: "
                        "reference",
                        c.attention.kernel, c.attention.kernel == "fused" ? " on run.device: cuda" : "",
                        fmt::join(attention::cuda::kSupportedHeadDims, " or "), c.model.head_dim,
                        loaded.where.count("model.head_dim")
                            ? ""
                            : fmt::format(" (d_model {} / heads {})", c.model.d_model, c.model.heads)));
  try {
    check_engine_options(c);
  } catch (const std::invalid_argument& e) {
    fail_at("attention.method", e.what());
  }
}

bool is_valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength || !std::isalnum(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool is_valid_run_name(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) return is_valid_name(name);
  const std::string id = name.substr(slash + 1);
  return is_valid_name(name.substr(0, slash)) && id.size() == 16 &&
         std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); });
}

LoadedConfig load_run_config_text(const std::string& yaml_text, const std::string& source,
                                  const std::string& name) {
  LoadedConfig loaded;
  loaded.source = source;
  loaded.text = yaml_text;
  if (!name.empty()) loaded.config.name = name;
  apply_yaml(loaded, parse_yaml(yaml_text, source), source);
  if (!is_valid_run_name(loaded.config.name))  // named after its file, and the file's name is no name
    throw InputError(fmt::format("{}: name: the run would be named '{}' after its file, which is not {}; "
                                 "set name: in the config", source, loaded.config.name, kNameRule));
  resolve_and_validate(loaded);
  return loaded;
}

LoadedConfig load_run_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    throw InputError(fmt::format("{}: {}", path, exists ? "cannot read the config file"
                                                        : "config file not found"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return load_run_config_text(text.str(), path, std::filesystem::path(path).stem().string());
}

}  // namespace harness::config
