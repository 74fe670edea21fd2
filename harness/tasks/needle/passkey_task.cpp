#include "harness/tasks/needle/passkey_task.h"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

#include "harness/data/windows.h"

namespace harness::needle {

const char* const kPasskeyIntro = "The pass key is ";
const char* const kPasskeyAfter = ". Remember it. ";
const char* const kPasskeyQuestion = "\nWhat is the pass key? The pass key is ";

namespace {

// The seed's two independent draws: the key and the text's start (and a training distance).
std::mt19937_64 engine_for(uint64_t seed) { return std::mt19937_64(seed ^ 0x70A55E7C0DEull); }

}  // namespace

PasskeyGenerator::PasskeyGenerator(const std::vector<std::vector<int32_t>>& documents, Encode encode)
    : text_(std::make_shared<std::vector<int32_t>>()), encode_(std::move(encode)) {
  for (const auto& d : documents) text_->insert(text_->end(), d.begin(), d.end());
  if (text_->empty()) throw std::invalid_argument("passkey: no text to build examples from");
  intro_ = encode_(kPasskeyIntro);
  after_ = encode_(kPasskeyAfter);
  question_ = encode_(kPasskeyQuestion);
  // A 5-digit key is at most 5 tokens (a digit is one token or part of one) with any tokenizer
  // that can write digits (vocabulary_problem); a subword one may write some keys in fewer.
  max_key_tokens_ = 5;
  for (const char* key : {"10000", "99999", "88888", "12345"})
    max_key_tokens_ = std::max<int64_t>(max_key_tokens_, int64_t(encode_(key).size()));
}

int64_t PasskeyGenerator::min_distance() const {
  return max_key_tokens_ + int64_t(after_.size()) + int64_t(question_.size());
}

std::vector<int32_t> PasskeyGenerator::key_tokens(uint64_t seed, std::string* key) const {
  auto engine = engine_for(seed);
  *key = std::to_string(10000 + data::uniform_below(engine, 90000));
  return encode_(*key);
}

PasskeyExample PasskeyGenerator::make(int64_t total, int64_t distance, uint64_t seed) const {
  PasskeyExample e;
  const auto key = key_tokens(seed, &e.key);
  const int64_t K = int64_t(key.size());
  const int64_t B = distance - K - int64_t(after_.size()) - int64_t(question_.size());
  const int64_t A = total - int64_t(intro_.size()) - distance - K;
  if (B < 0 || A < 0)
    throw std::invalid_argument(fmt::format("passkey: an example of {} tokens cannot hold the key at distance {} "
                                            "(shortest distance {}, and the text before the key needs {} tokens)",
                                            total, distance, distance - B, intro_.size() + K));
  auto engine = engine_for(seed);
  data::uniform_below(engine, 90000);  // the key's draw
  const uint64_t n = text_->size();
  const uint64_t start = data::uniform_below(engine, n);
  auto text = [&](int64_t from, int64_t count) {
    for (int64_t i = 0; i < count; ++i) e.tokens.push_back((*text_)[(start + uint64_t(from + i)) % n]);
  };
  auto append = [&](const std::vector<int32_t>& piece) { e.tokens.insert(e.tokens.end(), piece.begin(), piece.end()); };
  text(0, A);
  append(intro_);
  e.key_position = int64_t(e.tokens.size());
  append(key);
  append(after_);
  text(A, B);
  append(question_);
  append(key);
  e.answer_tokens = K;
  e.distance = distance;
  return e;
}

PasskeyExample PasskeyGenerator::make_at_distance(int64_t distance, int64_t train_context, uint64_t seed) const {
  return make(distance + train_context / 2 + 1, distance, seed);
}

PasskeyExample PasskeyGenerator::make_training(int64_t total, uint64_t seed) const {
  std::string key;
  const int64_t K = int64_t(key_tokens(seed, &key).size());
  const int64_t lo = K + int64_t(after_.size()) + int64_t(question_.size());
  const int64_t hi = total - int64_t(intro_.size()) - K;  // A = 0
  if (hi < lo)
    throw std::invalid_argument(fmt::format("passkey: a training example of {} tokens cannot hold one (at least {})",
                                            total, lo + int64_t(intro_.size()) + K));
  auto engine = engine_for(~seed);
  return make(total, lo + int64_t(data::uniform_below(engine, uint64_t(hi - lo + 1))), seed);
}

std::vector<float> answer_mask(const PasskeyExample& example) {
  const int64_t n = int64_t(example.tokens.size());
  std::vector<float> mask(size_t(n - 1), 0.0f);
  for (int64_t i = example.answer_position(); i < n; ++i) mask[size_t(i - 1)] = 1.0f;  // target i−1 is token i
  return mask;
}

}  // namespace harness::needle
