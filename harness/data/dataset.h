// The single entry point of the data layer: resolve the corpus, load, split, tokenize.
//
//   harness::data::Dataset data(options);            // once per run
//   auto train = data.train_stream(L, seed);         // TrainStream: next_batch(B) -> (B, L + 1)
//   auto val = data.eval_windows(4 * L, 256, seed);  // EvalWindows: tokens (N, 4L + 1)
//   model vocab: data.vocab_size()
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness/data/corpus.h"
#include "harness/data/data_options.h"
#include "harness/data/token_shard.h"
#include "harness/data/tokenizer.h"
#include "harness/data/windows.h"

namespace harness::data {

enum class CorpusFormat { kText, kTokenShards };

struct DatasetStats {
  int64_t train_documents = 0, validation_documents = 0;
  int64_t train_bytes = 0, validation_bytes = 0;  // text corpora only (0 for shards)
  int64_t train_tokens = 0, validation_tokens = 0;  // excluding separators
  std::string longest_validation_document;
  int64_t longest_validation_tokens = 0;
  int64_t longest_validation_bytes = 0;  // text corpora only
};

class Dataset {
 public:
  // Throws harness::InputError when the corpus is missing or malformed; for the default corpus the
  // message says to run scripts/fetch-corpus.sh (or make quickstart) or set data.corpus.
  // Token-shard corpora: tokenizer kind "byte" (the default) or "pretokenized" gives the
  // pretokenized GPT-2 vocabulary (50304), "sentencepiece" is an error; every token must be
  // < 50304. Text corpora: kind "pretokenized" is an error.
  explicit Dataset(const DataOptions& options);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  int64_t vocab_size() const { return tokenizer_->vocab_size(); }
  bool pretokenized() const { return tokenizer_->pretokenized(); }
  CorpusFormat format() const { return format_; }
  const std::filesystem::path& corpus_path() const { return corpus_path_; }
  const DatasetStats& stats() const { return stats_; }
  std::string describe() const;  // one line: path, format, documents, split, tokens, tokenizer

  // Text corpora: the tokenized training documents; empty for shard corpora (their training data
  // exists only as the packed stream).
  const std::vector<TokenizedDocument>& train_documents() const { return train_; }
  // Validation documents; for shard corpora the stretches between separator tokens, named
  // "<file>#<index>".
  const std::vector<TokenizedDocument>& validation_documents() const { return validation_; }

  // A fresh TrainStream over the shared packed training stream (no copy): context L, seed.
  TrainStream train_stream(int64_t context, uint64_t seed) const;
  // make_eval_windows(validation_documents(), context, count, seed).
  EvalWindows eval_windows(int64_t context, int64_t count, uint64_t seed) const;

 private:
  void load_text(const DataOptions& options);
  void load_shards(const DataOptions& options);

  CorpusFormat format_ = CorpusFormat::kText;
  std::filesystem::path corpus_path_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<TokenizedDocument> train_, validation_;
  std::shared_ptr<const std::vector<int32_t>> train_stream_wide_;    // text corpora
  std::shared_ptr<const MappedTokenShards> train_shards_;           // shard corpora
  DatasetStats stats_;
};

// Resolves DataOptions::corpus to a directory path ("sotu" → <data_dir>/sotu); no checks.
std::filesystem::path resolve_corpus_path(const DataOptions& options);
// The cheap first check of Dataset's constructor, for callers that want to fail before starting
// work (a sweep, before its workers): throws the same InputError when the corpus directory is
// missing or not a directory (for the default corpus: how to install it).
void check_corpus_directory(const DataOptions& options);

}  // namespace harness::data
