// Passkey retrieval at a controlled distance (needle.kind: passkey), the text side: no torch here.
//
// An example of N tokens, assembled from pieces each encoded on its own (so that every distance
// is exact in tokens, with any tokenizer):
//
//   <text: A tokens> "The pass key is " <key> ". Remember it. " <text: B tokens> <question> <key>
//                                       ^ the key's first token                           ^ the answer
//   question "\nWhat is the pass key? The pass key is "          key: 5 digits, uniform in [10000, 99999]
//
// The distance d runs from the key's first token to the answer's first token:
// d = |key| + |". Remember it. "| + B + |question|. The text is one contiguous stretch of corpus
// tokens (documents concatenated, from a random position, wrapping at the end) split at the key.
// An evaluation example at distance d has N = d + L/2 + 1 tokens, d + L/2 inputs (A = L/2 + 1 −
// |"The pass key is "| − |key|): at d = L/2 exactly a training window, and each longer distance
// adds only what it needs.
// A training example has N = L + 1 tokens (inputs and targets of one window) and d uniform over
// every distance that fits. Everything follows from the seed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/tasks/needle/needle_task.h"

namespace harness::needle {

extern const char* const kPasskeyIntro;     // "The pass key is "
extern const char* const kPasskeyAfter;     // ". Remember it. "
extern const char* const kPasskeyQuestion;  // "\nWhat is the pass key? The pass key is "

struct PasskeyExample {
  std::vector<int32_t> tokens;  // N tokens; the last answer_tokens are the key again
  std::string key;              // 5 digits
  int64_t key_position = 0;     // index of the key's first token in the text
  int64_t answer_tokens = 0;
  int64_t distance = 0;         // answer's first token − key's first token
  int64_t answer_position() const { return int64_t(tokens.size()) - answer_tokens; }
};

class PasskeyGenerator {
 public:
  // documents: the text's source tokens (non-empty in total); encode: the run's tokenizer.
  PasskeyGenerator(const std::vector<std::vector<int32_t>>& documents, Encode encode);

  // The shortest distance for a key drawn by `seed` (B = 0), and for any key (the longest key).
  int64_t min_distance() const;
  // Tokens before the key's first token at least, and the key's length at most.
  int64_t intro_tokens() const { return int64_t(intro_.size()); }
  int64_t max_key_tokens() const { return max_key_tokens_; }

  // An example of `total` tokens at `distance`. Throws std::invalid_argument when it does not fit
  // (A < 0 or B < 0).
  PasskeyExample make(int64_t total, int64_t distance, uint64_t seed) const;
  // An evaluation example: total = distance + train_context / 2 + 1.
  PasskeyExample make_at_distance(int64_t distance, int64_t train_context, uint64_t seed) const;
  // A training example of `total` tokens, its distance uniform over those that fit.
  PasskeyExample make_training(int64_t total, uint64_t seed) const;

 private:
  std::vector<int32_t> key_tokens(uint64_t seed, std::string* key) const;
  std::shared_ptr<std::vector<int32_t>> text_;
  Encode encode_;
  std::vector<int32_t> intro_, after_, question_;
  int64_t max_key_tokens_ = 0;
};

// The training loss mask (targets tokens[1, N)): 1 on the answer's tokens, else 0.
std::vector<float> answer_mask(const PasskeyExample& example);

}  // namespace harness::needle
