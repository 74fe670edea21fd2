// The bridge from a run config to the options each engine stage takes, and the names each stage
// accepts (so config errors list exactly what the engine supports).
#pragma once

#include <string>
#include <vector>

#include "attention/attention.h"
#include "harness/config/run_config.h"
#include "models/gpt.h"

namespace harness::config {

std::vector<std::string> method_names();
std::vector<std::string> positional_names();
std::vector<std::string> transform_names();
std::vector<std::string> kernel_names();
std::vector<std::string> tokenizer_names();
std::vector<std::string> optimizer_names();
std::vector<std::string> schedule_names();

// The optimiser's default learning rate of the hidden weights (Muon 0.02, AdamW 0.003).
double default_hidden_lr(const std::string& optimizer);

// The config's attention.* keys with the model's side (L, heads, head_dim): what
// resolve_method takes.
attention::MethodOptions method_options(const RunConfig& config);

// The model's options: its shape, the vocabulary the data layer reports and the resolved method.
// (The data, optimiser and schedule options are the config's own: config.data, .optim, .schedule.)
models::GPTOptions gpt_options(const RunConfig& config, int64_t vocab_size);

// Builds what the engine would build from `config` and lets it reject impossible combinations
// (odd head_dim with RoPE, ...). Throws std::invalid_argument.
void check_engine_options(const RunConfig& config);

}  // namespace harness::config
