#include "harness/data/windows.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "common/errors.h"

namespace harness::data {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<TokenizedDocument> tokenize(const Tokenizer& tokenizer, const std::vector<Document>& documents) {
  std::vector<TokenizedDocument> out;
  out.reserve(documents.size());
  for (const auto& doc : documents) out.push_back({doc.name, tokenizer.encode(doc.text)});
  return out;
}

std::vector<int32_t> pack_documents(const std::vector<TokenizedDocument>& documents, int32_t separator) {
  size_t total = 0;
  for (const auto& doc : documents) total += doc.tokens.size() + 1;
  std::vector<int32_t> stream;
  stream.reserve(total);
  for (const auto& doc : documents) {
    stream.push_back(separator);
    stream.insert(stream.end(), doc.tokens.begin(), doc.tokens.end());
  }
  return stream;
}

uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  if (bound == 0) throw std::invalid_argument("uniform_below: bound must be >= 1");
  // Reject the lowest (2^64 mod bound) outputs so every residue is equally likely.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = engine();
    if (r >= threshold) return r % bound;
  }
}

void fisher_yates_shuffle(std::vector<uint64_t>& values, std::mt19937_64& engine) {
  for (size_t i = values.size(); i > 1; --i) {
    const uint64_t j = uniform_below(engine, i);
    std::swap(values[i - 1], values[j]);
  }
}

// ---------------------------------------------------------------------------------------------
// TrainStream

TrainStream::TrainStream(const std::vector<TokenizedDocument>& documents, int32_t separator, int64_t context,
                         uint64_t seed)
    : TrainStream(std::make_shared<const std::vector<int32_t>>(pack_documents(documents, separator)), context,
                  seed) {}

TrainStream::TrainStream(std::shared_ptr<const std::vector<int32_t>> stream, int64_t context, uint64_t seed)
    : TrainStream(stream ? std::make_shared<const VectorTokenSource<int32_t>>(std::move(stream)) : nullptr,
                  context, seed) {}

TrainStream::TrainStream(std::shared_ptr<const std::vector<uint16_t>> stream, int64_t context, uint64_t seed)
    : TrainStream(stream ? std::make_shared<const VectorTokenSource<uint16_t>>(std::move(stream)) : nullptr,
                  context, seed) {}

TrainStream::TrainStream(std::shared_ptr<const TokenSource> stream, int64_t context, uint64_t seed)
    : source_(std::move(stream)), context_(context), seed_(seed) {
  init();
}

void TrainStream::init() {
  if (!source_) throw std::invalid_argument("TrainStream: null stream");
  if (context_ < 1) throw InputError("training context must be >= 1, got " + std::to_string(context_));
  num_windows_ = num_tokens() / (context_ + 1);
  if (num_windows_ < 1) {
    throw InputError("training context " + std::to_string(context_) + " is too long: a window needs " +
                     std::to_string(context_ + 1) + " tokens, the whole training stream has " +
                     std::to_string(num_tokens()));
  }
  cursor_ = {};
  order_ = epoch_order(0);
}

int64_t TrainStream::num_tokens() const { return source_->size(); }

std::vector<uint64_t> TrainStream::epoch_order(uint64_t epoch) const {
  std::vector<uint64_t> order(static_cast<size_t>(num_windows_));
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 engine(splitmix64(seed_ ^ splitmix64(epoch)));
  fisher_yates_shuffle(order, engine);
  return order;
}

torch::Tensor TrainStream::next_batch(int64_t batch_size) {
  if (batch_size < 1) throw std::invalid_argument("TrainStream::next_batch: batch_size must be >= 1");
  const int64_t width = context_ + 1;
  auto batch = torch::empty({batch_size, width}, torch::kInt64);  // (B, L + 1)
  int64_t* out = batch.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_size; ++b) {
    if (cursor_.position >= static_cast<uint64_t>(num_windows_)) {
      ++cursor_.epoch;
      cursor_.position = 0;
      order_ = epoch_order(cursor_.epoch);
    }
    const int64_t start = static_cast<int64_t>(order_[cursor_.position++]) * width;
    source_->copy(start, width, out + b * width);
  }
  return batch;
}

void TrainStream::seek(Cursor cursor) {
  if (cursor.position > static_cast<uint64_t>(num_windows_)) {
    throw InputError("cannot resume the training stream: cursor position " + std::to_string(cursor.position) +
                     " exceeds the " + std::to_string(num_windows_) +
                     " windows per epoch (different data or context than the checkpoint?)");
  }
  if (cursor.epoch != cursor_.epoch) order_ = epoch_order(cursor.epoch);
  cursor_ = cursor;
}

torch::Tensor TrainStream::stream() const {
  auto out = torch::empty({num_tokens()}, torch::kInt64);  // (N,)
  source_->copy(0, num_tokens(), out.data_ptr<int64_t>());
  return out;
}

// ---------------------------------------------------------------------------------------------
// EvalWindows

EvalWindows make_eval_windows(const std::vector<TokenizedDocument>& validation, int64_t context, int64_t count,
                              uint64_t seed) {
  if (context < 1) throw InputError("evaluation context must be >= 1, got " + std::to_string(context));
  if (count < 1) throw InputError("number of evaluation windows must be >= 1, got " + std::to_string(count));
  const auto width = static_cast<uint64_t>(context) + 1;

  // cumulative[i] = number of candidate windows in documents [0, i).
  std::vector<uint64_t> cumulative(validation.size() + 1, 0);
  size_t longest = 0;
  for (size_t i = 0; i < validation.size(); ++i) {
    const uint64_t n = validation[i].tokens.size();
    cumulative[i + 1] = cumulative[i] + n / width;
    if (n > validation[longest].tokens.size()) longest = i;
  }
  const uint64_t total = cumulative.back();
  if (total == 0) {
    if (validation.empty()) throw InputError("no validation documents to cut evaluation windows from");
    throw InputError("evaluation context " + std::to_string(context) + " is too long: a window needs " +
                     std::to_string(width) + " tokens inside one validation document, and the longest validation "
                     "document (" + validation[longest].name + ") has " +
                     std::to_string(validation[longest].tokens.size()) +
                     " tokens; use a shorter context or a corpus with longer documents");
  }

  std::vector<uint64_t> chosen;
  if (total <= static_cast<uint64_t>(count)) {
    chosen.resize(total);
    for (uint64_t i = 0; i < total; ++i) chosen[i] = i;
    if (total < static_cast<uint64_t>(count)) {
      spdlog::warn("evaluation at context {}: only {} distinct windows fit in the validation documents, {} requested",
                   context, total, count);
    }
  } else {  // Floyd's algorithm: `count` distinct indices of [0, total), uniformly.
    std::mt19937_64 engine(seed);
    std::set<uint64_t> picked;
    for (uint64_t j = total - static_cast<uint64_t>(count); j < total; ++j) {
      const uint64_t t = uniform_below(engine, j + 1);
      if (!picked.insert(t).second) picked.insert(j);
    }
    chosen.assign(picked.begin(), picked.end());
  }

  EvalWindows windows;
  windows.context = context;
  windows.requested = count;
  const auto rows = static_cast<int64_t>(chosen.size());
  windows.tokens = torch::empty({rows, context + 1}, torch::kInt64);  // (N, T + 1)
  int64_t* out = windows.tokens.data_ptr<int64_t>();
  windows.sources.reserve(chosen.size());
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t index = chosen[static_cast<size_t>(r)];
    const auto doc = static_cast<size_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), index) - cumulative.begin() - 1);
    const uint64_t offset = (index - cumulative[doc]) * width;
    const auto& tokens = validation[doc].tokens;
    std::copy(tokens.begin() + static_cast<int64_t>(offset), tokens.begin() + static_cast<int64_t>(offset + width),
              out + r * static_cast<int64_t>(width));
    windows.sources.push_back(validation[doc].name + "@" + std::to_string(offset));
  }
  return windows;
}

EvalWindows cut_eval_windows(const EvalWindows& longest, int64_t context) {
  const int64_t T_l = longest.context;
  if (context < 1 || T_l % context != 0)
    throw InputError(fmt::format("context {} cannot be cut from windows of {} tokens: it must divide {}",
                                 context, T_l, T_l));
  const int64_t chunks = T_l / context, rows = longest.tokens.size(0);
  EvalWindows out;
  out.context = context;
  out.requested = longest.requested * chunks;
  // (N, T_l + 1) → (N, chunks, T + 1): chunk c starts at cT and overlaps the next by one token.
  out.tokens = longest.tokens.as_strided({rows, chunks, context + 1}, {T_l + 1, context, 1})
                   .reshape({rows * chunks, context + 1})
                   .contiguous();
  out.sources.reserve(static_cast<size_t>(rows * chunks));
  for (const auto& source : longest.sources) {
    const auto at = source.rfind('@');
    const std::string document = source.substr(0, at);
    const int64_t offset = std::stoll(source.substr(at + 1));
    for (int64_t c = 0; c < chunks; ++c) out.sources.push_back(fmt::format("{}@{}", document, offset + c * context));
  }
  return out;
}

std::map<int64_t, EvalWindows> make_validation_windows(const std::vector<TokenizedDocument>& validation,
                                                       const std::vector<int64_t>& contexts,
                                                       const std::function<int64_t(int64_t)>& count,
                                                       uint64_t seed, bool same_text) {
  std::map<int64_t, EvalWindows> out;
  const auto draw = [&](int64_t T) {
    try {
      out.emplace(T, make_eval_windows(validation, T, count(T), seed));
    } catch (const InputError& e) {
      throw InputError(fmt::format("context {}: {}", T, e.what()));
    }
  };
  if (!same_text) {
    for (const int64_t T : contexts)
      if (!out.count(T)) draw(T);
    return out;
  }
  if (contexts.empty()) return out;
  const int64_t longest = *std::max_element(contexts.begin(), contexts.end());
  draw(longest);
  for (const int64_t T : contexts)
    if (!out.count(T)) out.emplace(T, cut_eval_windows(out.at(longest), T));
  return out;
}

std::vector<int64_t> window_documents(const EvalWindows& windows) {
  std::vector<int64_t> out;
  std::map<std::string, int64_t> index;
  for (const auto& source : windows.sources) {
    const std::string document = source.substr(0, source.rfind('@'));
    out.push_back(index.emplace(document, int64_t(index.size())).first->second);
  }
  return out;
}

std::string window_fingerprint(const EvalWindows& windows) {
  const torch::Tensor t = windows.tokens.to(torch::kCPU, torch::kLong).contiguous();
  const auto* bytes = reinterpret_cast<const unsigned char*>(t.data_ptr<int64_t>());
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (size_t i = 0; i < size_t(t.numel()) * sizeof(int64_t); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  char text[32];
  std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace harness::data
