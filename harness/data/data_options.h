// What a run reads and how it is tokenized: the data layer's options (torch-free, so a run config
// holds them as they are: harness/config/run_config.h). Keys: data.* in harness/config/schema.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace harness::data {

struct TokenizerOptions {
  std::string kind = "byte";  // byte | sentencepiece | pretokenized (token-shard corpora only)
  int64_t vocab_size = 256;   // used by sentencepiece; byte is always 256, pretokenized 50304
};

struct DataOptions {
  // "sotu" → <data_dir>/sotu (installed by scripts/fetch-corpus.sh); anything else is a path: a
  // directory of .txt files (one document each), or of *train*.bin / *val*.bin token shards.
  std::string corpus = "sotu";
  std::string data_dir = "data";  // where fetched corpora and tokenizer caches live
  double val_fraction = 0.1;      // text corpora only; shard corpora come split
  TokenizerOptions tokenizer;     // keys data.tokenizer (its kind) and data.vocab_size
  std::filesystem::path cache_dir;  // tokenizer cache; empty → <data_dir>/cache (not a key)
};

}  // namespace harness::data
