// What the config-driven benchmarks share: the model of a run config without loading a corpus,
// their --help, and the process set-up and error handling of `harness train`.
#pragma once

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "harness/config/overrides.h"
#include "harness/config/engine_options.h"
#include "harness/config/run_config.h"
#include "harness/data/token_shard.h"
#include "common/process_setup.h"
#include "models/gpt.h"

namespace bench {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
// The middle element (the upper of the two middle ones for an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

inline int64_t vocab_size(const harness::config::RunConfig& c) {
  const auto& tokenizer = c.data.tokenizer;
  return tokenizer.kind == "byte"           ? 256
         : tokenizer.kind == "pretokenized" ? harness::data::kGpt2PaddedVocabSize
                                            : tokenizer.vocab_size;
}

// The run config (with --set overrides) and its model at initial weights (seeded by train.seed),
// on `threads` torch threads.
struct ConfiguredModel {
  harness::config::LoadedConfig loaded;
  int64_t vocab = 0;
  models::GPT model{nullptr};
};
inline ConfiguredModel configured_model(const std::string& path, const std::vector<std::string>& overrides,
                                        int threads) {
  ConfiguredModel m;
  m.loaded = harness::config::load_run_config_with_overrides(path, overrides);
  for (const auto& note : harness::config::unread_key_notes(m.loaded.config, harness::config::override_keys(overrides)))
    fmt::print(stderr, "note: {}\n", note);
  torch::set_num_threads(threads);
  torch::manual_seed(m.loaded.config.train.seed);
  m.vocab = vocab_size(m.loaded.config);
  m.model = models::GPT(harness::config::gpt_options(m.loaded.config, m.vocab));
  return m;
}

// Prints the options and returns true when --help was given.
inline bool help_requested(const boost::program_options::options_description& opts,
                           const boost::program_options::variables_map& vm) {
  if (!vm.count("help")) return false;
  std::ostringstream os;
  os << opts;
  fmt::print("{}", os.str());
  return true;
}

inline int main_with(const char* name, int argc, char** argv, int (*run)(int, char**)) {
  harness::prefer_passive_openmp_waits(argv);  // as `harness train` does
  harness::keep_freed_memory_for_reuse();
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return 1;
  }
}

}  // namespace bench
