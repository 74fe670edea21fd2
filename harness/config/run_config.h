// A run's configuration: the typed struct the engine reads, filled and checked by the schema
// (schema.h) from YAML. Defaults live in the member initialisers: here, and in the engines' option
// structs it holds (data::DataOptions, models::OptimOptions, models::ScheduleOptions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention/method_options.h"
#include "harness/data/data_options.h"
#include "models/optim_options.h"
#include "models/schedule.h"

namespace harness::config {

// A value given absolutely (`0.16`) or relative to the training context L (`L/400`, `4L`):
// attention/parameters.h's LengthValue, used for eval and needle contexts too.
using ContextValue = attention::LengthValue;

// Positions per window whose attention statistics are recorded: eval.attention_queries' default,
// and what `harness analyse` samples in a run that recorded none.
constexpr int64_t kDefaultAttentionQueries = 16;

struct RunConfig {
  std::string name = "run";  // label; results go to <run.out_dir>/<name>/

  // The engines' own option structs where a key maps onto one field; the schema (schema.cpp)
  // names the keys: data.tokenizer is data.tokenizer.kind here, data.vocab_size its vocab_size.
  data::DataOptions data;

  struct Model {
    int64_t layers = 2;
    int64_t d_model = 128;
    int64_t heads = 4;
    int64_t head_dim = 0;  // 0: d_model / heads (resolved when loading)
    double mlp_ratio = 4.0;
  } model;

  // The attention.* keys: the method, its declared parameters (attention/parameters.h, maybe
  // relative to L) and the kernel; resolved against L and the model's shape by resolve_method.
  attention::MethodConfig attention;

  struct Train {
    int64_t context = 64;          // L
    int64_t batch_size = 32;       // sequences per optimiser step (split by grad_accum)
    int64_t grad_accum = 1;        // micro-batches per step
    int64_t micro_batch_size = 0;  // sequences per forward/backward on a rank; 0: batch_size /
                                   // grad_accum, at most the rank's share (not in the run id)
    int64_t steps = 300;
    uint64_t seed = 0;
    double grad_clip = 0.0;        // 0: off
    std::string precision = "fp32";  // fp32 | bf16 (mixed precision; in the run id when bf16)
    bool activation_checkpointing = false;  // recompute blocks in the backward (not in the run id)
  } train;

  models::OptimOptions optim;  // optim.* (eps is not a key); lr_hidden unset: the optimiser's own
  models::ScheduleOptions schedule;  // schedule.* (min_factor is not a key: 0)

  struct Eval {
    int64_t every = 0;  // steps between validations; 0: only at the end
    std::vector<ContextValue> contexts = {ContextValue::times_l(1), ContextValue::times_l(4),
                                          ContextValue::times_l(16)};
    int64_t windows = 16;           // validation windows per context (when tokens is 0)
    int64_t tokens = 0;             // > 0: validation tokens per context, ceil(tokens / T) windows at T
    int64_t batch_size = 4;
    int64_t position_buckets = 8;   // mean loss per bucket of positions within the window
    uint64_t seed = 1234;           // placement of validation windows (shared across runs)
    bool same_text = false;         // every context scores the same text: windows drawn at the
                                    // longest context, cut into chunks for the shorter ones
    int64_t max_batch_tokens = 65536;  // a context's batches split to at most this many tokens
                                       // per forward (at least one window; not in the run id)
    int64_t attention_queries = kDefaultAttentionQueries;  // statistics of the last N positions per window; 0: off
  } eval;

  // What the run does: "lm" trains a language model (everything above); "needle" fine-tunes the
  // finished run `init_from` on needle-in-a-haystack retrieval and evaluates it
  // (harness/tasks/needle/needle_run.h). The keys above then describe the pretrained run.
  std::string task = "lm";
  std::string init_from;  // a run directory, or a directory of runs (a sweep's) holding this
                          // config's pretraining run under its id

  struct Needle {  // read only with task: needle
    int64_t steps = 300;          // fine-tuning steps (the paper: 100 warm-up, 100 constant,
    int64_t warmup_steps = 100;   // 100 cool-down)
    int64_t cooldown_steps = 100;
    int64_t batch_size = 8;       // examples per step, each of train.context tokens
    std::vector<ContextValue> contexts = {ContextValue::times_l(1), ContextValue::times_l(4),
                                          ContextValue::times_l(16)};
    int64_t examples = 64;        // evaluation examples per context (passkey: per distance)
    uint64_t seed = 0;            // evaluation examples (fine-tuning ones follow train.seed)
    // "needle": three needles, greedy decoding at needle.contexts (needle_task.h); "passkey": one
    // key at needle.distances before the question, teacher-forced (passkey_task.h).
    std::string kind = "needle";
    std::vector<ContextValue> distances = {ContextValue::times_l(0.5), ContextValue::times_l(1),
                                           ContextValue::times_l(2),   ContextValue::times_l(4),
                                           ContextValue::times_l(8),   ContextValue::times_l(15)};
  } needle;

  struct Run {  // how to run; never changes results, so not part of the run id
    std::string out_dir = "runs";
    int64_t threads = 0;            // 0: all cores
    int64_t log_every = 10;
    int64_t checkpoint_every = 100; // 0: only at the end
    int64_t keep_checkpoints = 2;   // the newest checkpoints kept (a resume falls back on them)
    std::string device = "cpu";     // cpu | cuda
    double dist_timeout = 60.0;     // seconds a data-parallel rank waits for the others
    bool tf32 = false;              // CUDA fp32 matmuls on TF32 tensor cores
  } run;

  // Resolved values (relative ones against train.context).
  int64_t train_context() const { return train.context; }
  std::vector<int64_t> eval_contexts() const;
  // Validation windows at context T: eval.windows, or ceil(eval.tokens / T) when eval.tokens > 0.
  int64_t eval_windows_at(int64_t context) const;
  std::vector<int64_t> needle_contexts() const;
  std::vector<int64_t> needle_distances() const;
};

}  // namespace harness::config
