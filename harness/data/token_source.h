// A read-only sequence of token ids that the training stream cuts windows from: packed text
// documents in memory, or a corpus's token shards memory-mapped from disk.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace harness::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t size() const = 0;
  // Tokens [start, start + n) as int64 into out; 0 <= start, start + n <= size().
  virtual void copy(int64_t start, int64_t n, int64_t* out) const = 0;
};

// A vector held in memory (int32 for tokenized text, uint16 for tests and small shard sets).
template <class T>
class VectorTokenSource final : public TokenSource {
 public:
  explicit VectorTokenSource(std::shared_ptr<const std::vector<T>> tokens) : tokens_(std::move(tokens)) {}
  int64_t size() const override { return static_cast<int64_t>(tokens_->size()); }
  void copy(int64_t start, int64_t n, int64_t* out) const override {
    const T* p = tokens_->data() + start;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(p[i]);
  }

 private:
  std::shared_ptr<const std::vector<T>> tokens_;
};

}  // namespace harness::data
