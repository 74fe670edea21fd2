// Needle in a haystack, the run (task: needle): fine-tune a finished language-model run on needle
// retrieval at its training context, then evaluate retrieval by greedy decoding at each of
// needle.contexts, into the run's run.h5 (/needle/<T>/…). The examples: needle_task.h. With
// needle.kind: passkey, the same fine-tune on passkey examples (passkey_task.h), evaluated
// teacher-forced at each of needle.distances into /needle/<distance>/ (passkey_eval.h).
//
//   init_from → the pretrained run (open_finished_run), checked before anything is written:
//     missing, unfinished or of another config (the needle run's own keys other than task,
//     init_from and needle.* must be the pretrained run's), a tokenizer that cannot write the
//     needle text, a context too short for the prompt: harness::InputError naming the key.
//   fine-tuning: needle.steps steps of needle.batch_size fresh examples of train.context tokens
//     (haystacks from training documents), loss on the target tokens only, the run's optimiser,
//     linear warm-up / constant / linear cool-down (needle.warmup_steps, needle.cooldown_steps).
//   evaluation: needle.examples examples per context (haystacks from validation documents, seeded
//     by needle.seed: the same for every run), greedy decoding with a KV cache.
//
// An interrupted needle run starts again from the pretrained weights when resumed (it is short).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/schema.h"
#include "harness/data/tokenizer.h"
#include "harness/train/trainer.h"
#include "models/gpt.h"

namespace harness::needle {

// Greedy decoding: up to max_new tokens after `prompt`, stopping after `stop` (< 0: never).
// Every forward pass uses the per-context quantities of `context` (>= prompt + max_new − 1, the
// tokens that go through the model): the length of the whole example. kv_cache: prefill once, then one position per step
// (GPTImpl::forward_cached); otherwise the whole prefix is recomputed for every token
// (GPTImpl::forward(prefix, context)) — the slow reference the cache must equal.
std::vector<int32_t> greedy_decode(models::GPT& model, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop, int64_t context, bool kv_cache,
                                   torch::Device device = torch::kCPU);

// Mean next-token cross-entropy over the positions where mask = 1: inputs, targets (B, T) int64,
// mask (B, T) float.
torch::Tensor masked_loss(models::GPT& model, const torch::Tensor& inputs,
                          const torch::Tensor& targets, const torch::Tensor& mask);

// Why `tokenizer` cannot write the text of needle.kind `kind` (needle: every city, the digits,
// the sentence, the question; passkey: its sentences and the digits; encode then decode must give
// the text back), or "" when it can.
std::string vocabulary_problem(const data::Tokenizer& tokenizer, const std::string& kind = "needle");

// The config of the run a needle config fine-tunes: the same keys with task: lm (its id is the
// pretraining run's id).
config::RunConfig pretraining_config(const config::RunConfig& needle_config);
// init_from resolved to the pretrained run's directory (throws harness::InputError at init_from
// when it names nothing usable).
std::string pretrained_run_dir(const config::LoadedConfig& loaded);

// The run (called by train::train for task: needle).
train::TrainOutcome run_needle(const config::LoadedConfig& loaded, const train::TrainOptions& options);

}  // namespace harness::needle
