// What the training loop consumes: the packed training stream cut into windows, and fixed
// evaluation windows inside single validation documents.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness/data/corpus.h"
#include "harness/data/token_source.h"
#include "harness/data/tokenizer.h"

namespace harness::data {

struct TokenizedDocument {
  std::string name;
  std::vector<int32_t> tokens;
};

// Encodes every document once, in order.
std::vector<TokenizedDocument> tokenize(const Tokenizer& tokenizer, const std::vector<Document>& documents);

// Packs documents into one stream: [sep, doc0..., sep, doc1..., ...] — the separator goes BEFORE
// every document (as in the GPT-2 shards, where each document starts with <|endoftext|>), so the
// first token of each document is predicted from the separator.
std::vector<int32_t> pack_documents(const std::vector<TokenizedDocument>& documents, int32_t separator);

// Seeded random numbers that are the same with every standard library: std::mt19937_64 (fully
// specified by the standard) and our own unbiased bounded draw (rejection sampling) and
// Fisher–Yates shuffle — not std::uniform_int_distribution / std::shuffle.
uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound);  // in [0, bound), bound >= 1
void fisher_yates_shuffle(std::vector<uint64_t>& values, std::mt19937_64& engine);

// The training stream, cut into num_windows() = floor(N / (L + 1)) non-overlapping windows of
// L + 1 tokens: window w = stream[w * (L + 1), (w + 1) * (L + 1)); input = first L tokens, target =
// last L (shifted by one). The N mod (L + 1) tail tokens are never used. Every epoch visits every
// window once, in the order of a permutation drawn from (seed, epoch) only — so any epoch's order
// can be recomputed on seek — by Fisher–Yates with std::mt19937_64. Batches run across epoch
// boundaries. The stream is shared (not copied) between copies of a TrainStream: text corpora
// keep it in memory as int32, shard corpora map their files (token_shard.h).
class TrainStream {
 public:
  struct Cursor {
    uint64_t epoch = 0;
    uint64_t position = 0;  // windows of this epoch already served, in [0, num_windows()]
    bool operator==(const Cursor& o) const { return epoch == o.epoch && position == o.position; }
    bool operator!=(const Cursor& o) const { return !(*this == o); }
  };

  // Packs `documents` with pack_documents(documents, separator).
  TrainStream(const std::vector<TokenizedDocument>& documents, int32_t separator, int64_t context, uint64_t seed);
  TrainStream(std::shared_ptr<const std::vector<int32_t>> stream, int64_t context, uint64_t seed);
  TrainStream(std::shared_ptr<const std::vector<uint16_t>> stream, int64_t context, uint64_t seed);
  TrainStream(std::shared_ptr<const TokenSource> stream, int64_t context, uint64_t seed);

  // (batch_size, context + 1) int64 on the CPU: row b is the next window of the epoch order.
  // Inputs are [:, :-1], targets [:, 1:]. Advances the cursor by batch_size windows.
  torch::Tensor next_batch(int64_t batch_size);

  Cursor cursor() const { return cursor_; }
  // Restores a cursor() taken earlier (from a stream with the same data, context and seed): the
  // batches that follow are identical to an uninterrupted run. Throws harness::InputError if
  // position > num_windows().
  void seek(Cursor cursor);

  int64_t context() const { return context_; }
  int64_t num_windows() const { return num_windows_; }
  int64_t num_tokens() const;  // N, the stream length
  uint64_t seed() const { return seed_; }
  // The epoch order: epoch_order(e)[i] is the window served at position i of epoch e.
  std::vector<uint64_t> epoch_order(uint64_t epoch) const;
  // (N,) int64 copy of the whole stream (for tests and inspection; large for shard corpora).
  torch::Tensor stream() const;

 private:
  void init();

  std::shared_ptr<const TokenSource> source_;
  int64_t context_ = 0;
  uint64_t seed_ = 0;
  int64_t num_windows_ = 0;
  Cursor cursor_;
  std::vector<uint64_t> order_;  // epoch_order(cursor_.epoch)
};

struct EvalWindows {
  int64_t context = 0;                // T
  torch::Tensor tokens;               // (N, T + 1) int64 on the CPU; inputs [:, :-1], targets [:, 1:]
  std::vector<std::string> sources;   // N entries: "<document name>@<token offset>"
  int64_t requested = 0;              // the count asked for; N < requested when fewer windows exist
};

// Evaluation windows of T + 1 = context + 1 tokens, each inside a single validation document.
// Candidates: in every document with >= T + 1 tokens, the non-overlapping windows at offsets
// 0, T + 1, 2 (T + 1), ...; all documents are pooled. If there are at most `count` candidates all
// are used (a warning is logged when that is fewer than `count`); otherwise `count` distinct
// candidates are drawn with std::mt19937_64(seed) (Floyd's algorithm, uniform_below). Rows are in
// document order, then offset order. The result depends only on (validation, context, count, seed).
// Throws harness::InputError when no validation document has T + 1 tokens (naming the context and
// the longest validation document and its length), or when context or count is < 1.
EvalWindows make_eval_windows(const std::vector<TokenizedDocument>& validation, int64_t context, int64_t count,
                              uint64_t seed);

// The windows of a shorter context cut from `longest` (context T_l): each long window split into
// T_l / T consecutive chunks, chunk c = its tokens [cT, cT + T] (T + 1 tokens; a chunk's last
// token is the next chunk's first), so the chunks' targets are the long windows' targets, each
// once, and every context scores the same text. Rows: window by window, chunks in order; sources
// "<document>@<offset + cT>"; requested scales by T_l / T. Throws harness::InputError when T < 1
// or T does not divide T_l.
EvalWindows cut_eval_windows(const EvalWindows& longest, int64_t context);

// Validation windows at every context in `contexts`: make_eval_windows(validation, T, count(T),
// seed) at each, or with same_text one draw at the longest context (count(longest) windows) and
// cut_eval_windows for the others. An InputError names the context it arose at.
std::map<int64_t, EvalWindows> make_validation_windows(const std::vector<TokenizedDocument>& validation,
                                                       const std::vector<int64_t>& contexts,
                                                       const std::function<int64_t(int64_t)>& count,
                                                       uint64_t seed, bool same_text);

// Each window's document as a number: 0, 1, … in the order the documents first appear among the
// windows (rows are in document order), from `sources` ("<document name>@<offset>").
std::vector<int64_t> window_documents(const EvalWindows& windows);

// What identifies a set of windows, "fnv1a64:<16 hex digits>" of their tokens: two runs whose
// validation has the same fingerprint were scored on the same text, window by window.
std::string window_fingerprint(const EvalWindows& windows);

}  // namespace harness::data
