#include "harness/data/tokenizer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "common/atomic_file.h"
#include "harness/data/sentencepiece_library.h"
#include "common/errors.h"

namespace harness::data {
namespace fs = std::filesystem;

Tokenizer::~Tokenizer() = default;

// ---------------------------------------------------------------------------------------------
// ByteTokenizer

std::vector<int32_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  std::transform(text.begin(), text.end(), ids.begin(), [](char c) { return static_cast<unsigned char>(c); });
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id > 255) throw std::out_of_range("byte tokenizer: id " + std::to_string(id) + " is not in [0, 256)");
    if (id != 0) text.push_back(static_cast<char>(id));
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// SentencePieceTokenizer

namespace {

constexpr size_t kChunkBytes = 4096;                 // training "sentences": text cut before a space
constexpr size_t kMaxTrainingBytes = size_t{64} << 20;  // thin larger training sets evenly
constexpr size_t kMemoMaxWordBytes = 64;
constexpr size_t kMemoMaxEntries = size_t{1} << 20;
constexpr int32_t kMetaPieces = 3;  // <unk>, <s>, </s>

// Every setting passed to SentencePiece besides vocab_size; part of the cache key.
const std::map<std::string, std::string>& trainer_settings() {
  static const std::map<std::string, std::string> settings = {
      {"model_type", "bpe"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"split_by_whitespace", "true"},
      {"split_digits", "false"},
      {"input_sentence_size", "0"},  // we choose the input; SentencePiece's sampler is not seeded
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", "8192"},
      {"num_threads", "1"},
      {"train_extremely_large_corpus", "false"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
  };
  return settings;
}

// Cuts `text` into training sentences: at newlines, and lines longer than kChunkBytes before a
// space (so no word is split; a space-free run is cut at a UTF-8 character boundary).
void append_chunks(const std::string& text, std::vector<std::string>& out) {
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    size_t start = line_start;
    while (start < line_end) {
      size_t end = std::min(line_end, start + kChunkBytes);
      if (end < line_end) {
        const size_t space = text.rfind(' ', end);
        if (space != std::string::npos && space > start) {
          end = space;
        } else {
          while (end > start + 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
        }
      }
      if (end > start) out.emplace_back(text, start, end - start);
      start = end;
    }
    line_start = line_end + 1;
  }
}

std::string read_binary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read SentencePiece model " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_atomically(const fs::path& path, const std::string& bytes) {
  write_file_atomically(path.string(), bytes);  // "cannot write <path>: <cause>"
}

std::string train_model(const std::vector<Document>& train_docs, int64_t vocab_size) {
  std::vector<std::string> sentences;
  size_t total_bytes = 0;
  for (const auto& doc : train_docs) {
    append_chunks(doc.text, sentences);
    total_bytes += doc.text.size();
  }
  if (sentences.empty()) {
    throw InputError("cannot train the SentencePiece tokenizer: the training documents contain no text");
  }
  if (total_bytes > kMaxTrainingBytes) {  // evenly spaced chunks, the same on every run
    const size_t keep = std::max<size_t>(1, sentences.size() * kMaxTrainingBytes / total_bytes);
    std::vector<std::string> thinned;
    thinned.reserve(keep);
    for (size_t i = 0; i < keep; ++i) thinned.push_back(std::move(sentences[i * sentences.size() / keep]));
    sentences = std::move(thinned);
  }
  std::unordered_map<std::string, std::string> kwargs(trainer_settings().begin(), trainer_settings().end());
  kwargs["vocab_size"] = std::to_string(vocab_size);
  kwargs["minloglevel"] = "2";  // errors only
  kwargs["model_prefix"] = "";   // the model comes back serialized, no files are written
  try {
    return spm::train(sentences, kwargs);
  } catch (const std::runtime_error& e) {
    throw InputError("SentencePiece BPE training with data.vocab_size = " + std::to_string(vocab_size) +
                     " failed: " + e.what());
  }
}

}  // namespace

struct SentencePieceTokenizer::Impl {
  explicit Impl(const std::string& serialized_model) : processor(serialized_model) {}
  spm::Processor processor;
};

SentencePieceTokenizer::SentencePieceTokenizer(const fs::path& model_file) : model_file_(model_file) {
  const std::string proto = read_binary(model_file);
  try {
    impl_ = std::make_unique<Impl>(proto);
  } catch (const std::runtime_error& e) {
    throw InputError("cannot load SentencePiece model " + model_file.string() + ": " + e.what());
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::string sentencepiece_cache_key(const std::vector<Document>& train_docs, int64_t vocab_size) {
  uint64_t h = fnv1a64("harness.sentencepiece.v1");
  const auto mix = [&h](std::string_view bytes) {
    h = fnv1a64(bytes, h);
    h = fnv1a64(std::string_view("\x1f", 1), h);  // field separator
  };
  for (const auto& [key, value] : trainer_settings()) {
    mix(key);
    mix(value);
  }
  mix("vocab_size=" + std::to_string(vocab_size));
  mix("chunk=" + std::to_string(kChunkBytes) + ",max_bytes=" + std::to_string(kMaxTrainingBytes));
  for (const auto& doc : train_docs) {
    mix(doc.name);
    mix(std::to_string(doc.text.size()));
    mix(std::to_string(fnv1a64(doc.text)));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::train_or_load(const std::vector<Document>& train_docs,
                                                                              int64_t vocab_size,
                                                                              const fs::path& cache_dir) {
  if (vocab_size <= kMetaPieces + 256) {
    throw InputError("data.vocab_size = " + std::to_string(vocab_size) +
                     " is too small for sentencepiece: 3 special + 256 byte-fallback pieces are always present, "
                     "and the corpus' characters come on top (use e.g. 512 or more)");
  }
  if (vocab_size > std::numeric_limits<int32_t>::max()) {
    throw InputError("data.vocab_size = " + std::to_string(vocab_size) + " is too large");
  }
  const fs::path dir = cache_dir / "tokenizers";
  const fs::path model_file = dir / (sentencepiece_cache_key(train_docs, vocab_size) + ".model");
  std::error_code ec;
  if (fs::exists(model_file, ec)) {
    try {
      auto tokenizer = std::make_unique<SentencePieceTokenizer>(model_file);
      if (tokenizer->vocab_size() == vocab_size) {
        tokenizer->loaded_from_cache_ = true;
        spdlog::debug("sentencepiece: reusing {}", model_file.string());
        return tokenizer;
      }
    } catch (const InputError& e) {
      spdlog::warn("sentencepiece: ignoring unreadable cache file ({}), retraining", e.what());
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw InputError("cannot create tokenizer cache directory " + dir.string() + ": " + ec.message());
  spdlog::info("sentencepiece: training BPE, vocab {}, on {} documents", vocab_size, train_docs.size());
  write_atomically(model_file, train_model(train_docs, vocab_size));
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

std::vector<int32_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  std::vector<int> ids;
  const auto encode_piece = [this, &ids](std::string_view piece) { ids = impl_->processor.encode(piece); };
  std::lock_guard<std::mutex> lock(memo_mutex_);
  if (memo_.size() > kMemoMaxEntries) memo_.clear();
  // A piece never spans a space boundary (split_by_whitespace, no whitespace-only merges), so
  // encoding word by word, each word starting at a space, equals encoding the whole text.
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start + 1);
    if (end == std::string::npos) end = text.size();
    const std::string_view word(text.data() + start, end - start);
    if (word.size() <= kMemoMaxWordBytes) {
      std::string key(word);
      auto it = memo_.find(key);
      if (it == memo_.end()) {
        encode_piece(word);
        it = memo_.emplace(std::move(key), std::vector<int32_t>(ids.begin(), ids.end())).first;
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    } else {
      encode_piece(word);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    start = end;
  }
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  const int n = impl_->processor.piece_size();
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= n) {
      throw std::out_of_range("sentencepiece tokenizer: id " + std::to_string(id) + " is not in [0, " +
                              std::to_string(n) + ")");
    }
    pieces.push_back(id);
  }
  return impl_->processor.decode(pieces);
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->processor.piece_size(); }

std::string SentencePieceTokenizer::name() const { return "sentencepiece-bpe-" + std::to_string(vocab_size()); }

int32_t SentencePieceTokenizer::separator_id() const { return impl_->processor.eos_id(); }

// ---------------------------------------------------------------------------------------------
// PretokenizedTokenizer

std::vector<int32_t> PretokenizedTokenizer::encode(const std::string&) const {
  throw InputError("this corpus is pretokenized (GPT-2 token shards): there is no text tokenizer to encode text");
}

std::string PretokenizedTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) text += "<" + std::to_string(id) + ">";
  return text;
}

// ---------------------------------------------------------------------------------------------

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options, const std::vector<Document>& train_docs,
                                          const fs::path& cache_dir) {
  if (options.kind == "byte") {
    if (options.vocab_size != 256) {
      spdlog::warn("data.vocab_size = {} is ignored by the byte tokenizer (vocab 256)", options.vocab_size);
    }
    return std::make_unique<ByteTokenizer>();
  }
  if (options.kind == "sentencepiece") {
    return SentencePieceTokenizer::train_or_load(train_docs, options.vocab_size, cache_dir);
  }
  if (options.kind == "pretokenized") return std::make_unique<PretokenizedTokenizer>();
  throw InputError("data.tokenizer: unknown tokenizer '" + options.kind +
                   "' (valid kinds: byte, sentencepiece, pretokenized)");
}

}  // namespace harness::data
