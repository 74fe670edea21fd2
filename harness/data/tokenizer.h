// Tokenizers: bytes (vocab 256), SentencePiece BPE trained on the training split, and the
// pass-through "pretokenized" vocabulary of GPT-2 token shards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/data/corpus.h"
#include "harness/data/data_options.h"

namespace harness::data {

class Tokenizer {
 public:
  virtual ~Tokenizer();
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;  // every id is in [0, vocab_size)
  virtual std::string name() const = 0;    // e.g. "byte", "sentencepiece-bpe-4096"
  // The id placed before every document in the packed training stream (TrainStream). encode()
  // never produces it for stripped text, and decode() renders it as nothing (byte 0 for the byte
  // tokenizer, which stripped text never contains).
  virtual int32_t separator_id() const = 0;
  // True when the corpus came as token ids (shards): encode() throws, decode() prints ids.
  virtual bool pretokenized() const { return false; }
};

// One token per byte: id = byte value, vocab 256. Separator: id 0 (the NUL byte; control-character
// stripping guarantees loaded text never contains it). decode() of 0 gives "" (separators vanish);
// ids outside [0, 256) throw std::out_of_range.
class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string name() const override { return "byte"; }
  int32_t separator_id() const override { return 0; }
};

// SentencePiece BPE, lossless for control-stripped UTF-8 text: identity normalization, no dummy
// prefix, whitespace kept as is, byte fallback (any byte encodes, never <unk>). Ids: 0 <unk>,
// 1 <s>, 2 </s> (= separator_id), 3..258 the byte pieces <0x00>..<0xFF>, then merges/characters.
// Known limits: U+2581 ("▁", SentencePiece's space marker) in the text decodes as a space, and
// invalid UTF-8 is replaced by U+FFFD. encode() memoizes per space-delimited word (a BPE piece
// never spans a space boundary here, so this equals encoding the whole text, ~30x faster);
// it is thread-safe. SentencePiece itself runs inside the privately loaded harness_sentencepiece
// module (sentencepiece_library.h: its embedded protobuf must not meet LibTorch's).
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads a trained model file; throws harness::InputError naming the file if it cannot.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
  ~SentencePieceTokenizer() override;

  // Trains on `train_docs` (deterministic: no sampling inside SentencePiece; corpora over 64 MiB
  // are thinned by taking evenly spaced chunks) or reuses <cache_dir>/tokenizers/<key>.model, key =
  // sentencepiece_cache_key(train_docs, vocab_size). Training is quiet (minloglevel 2).
  // vocab_size must be > 259 and large enough for the corpus' characters; SentencePiece's own
  // complaint is passed on in a harness::InputError naming data.vocab_size.
  static std::unique_ptr<SentencePieceTokenizer> train_or_load(const std::vector<Document>& train_docs,
                                                              int64_t vocab_size,
                                                              const std::filesystem::path& cache_dir);

  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string name() const override;
  int32_t separator_id() const override;

  const std::filesystem::path& model_file() const { return model_file_; }
  bool loaded_from_cache() const { return loaded_from_cache_; }  // set by train_or_load

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path model_file_;
  bool loaded_from_cache_ = false;
  mutable std::mutex memo_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> memo_;
};

// 16 hex digits: FNV-1a 64 over the trainer settings (incl. vocab_size and a format version) and,
// for every training document in order, its name, byte size and FNV-1a of its text.
std::string sentencepiece_cache_key(const std::vector<Document>& train_docs, int64_t vocab_size);

// GPT-2 ids read from token shards: vocab 50304 (50257 padded), separator 50256. encode() throws
// harness::InputError (there is no text tokenizer for a shard corpus); decode() prints the ids as
// "<id>" tokens separated by nothing, for logging only.
class PretokenizedTokenizer final : public Tokenizer {
 public:
  explicit PretokenizedTokenizer(int64_t vocab_size = 50304) : vocab_size_(vocab_size) {}
  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string name() const override { return "pretokenized-gpt2"; }
  int32_t separator_id() const override { return 50256; }
  bool pretokenized() const override { return true; }

 private:
  int64_t vocab_size_;
};

// kind "byte" → ByteTokenizer (vocab_size other than 256 is ignored with a warning);
// "sentencepiece" → SentencePieceTokenizer::train_or_load(train_docs, vocab_size, cache_dir);
// "pretokenized" → PretokenizedTokenizer (for token-shard corpora; train_docs unused).
// Any other kind → harness::InputError listing the valid kinds.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options, const std::vector<Document>& train_docs,
                                          const std::filesystem::path& cache_dir);

}  // namespace harness::data
