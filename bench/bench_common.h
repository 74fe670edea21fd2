// What the config-driven benchmarks share: the model's vocabulary without loading a corpus, and
// the process set-up and error handling of `harness train`.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <exception>

#include "harness/config/run_config.h"
#include "harness/data/token_shard.h"
#include "harness/util/process_setup.h"

namespace bench {

inline int64_t vocab_size(const harness::config::RunConfig& c) {
  return c.data.tokenizer == "byte"           ? 256
         : c.data.tokenizer == "pretokenized" ? harness::data::kGpt2PaddedVocabSize
                                              : c.data.vocab_size;
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
