#include "harness/data/dataset.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <system_error>

#include "harness/data/token_shard.h"
#include "common/errors.h"

namespace harness::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kExpectedCorpus =
    "expected \"sotu\", a directory of .txt files, or a directory of *train*.bin and *val*.bin token shards";

std::string default_corpus_hint(const fs::path& path) {
  return "the default corpus (data.corpus: sotu) is not installed at " + path.string() +
         ": run scripts/fetch-corpus.sh or make quickstart, or set data.corpus to a directory of .txt files";
}

void check_token_range(const uint16_t* tokens, int64_t count, const fs::path& file, int64_t vocab) {
  for (int64_t i = 0; i < count; ++i) {
    if (tokens[i] >= vocab) {
      throw InputError("token shard " + file.string() + ": token " + std::to_string(tokens[i]) + " at index " +
                       std::to_string(i) + " is not a GPT-2 id (expected < " + std::to_string(vocab) + ")");
    }
  }
}

std::string millions(int64_t n) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << static_cast<double>(n) / 1e6 << " M";
  return out.str();
}

}  // namespace

fs::path resolve_corpus_path(const DataOptions& options) {
  if (options.corpus == "sotu") return fs::path(options.data_dir) / "sotu";
  return fs::path(options.corpus);
}

void check_corpus_directory(const DataOptions& options) {
  const fs::path path = resolve_corpus_path(options);
  std::error_code ec;
  if (fs::is_directory(path, ec)) return;
  if (options.corpus == "sotu") throw InputError(default_corpus_hint(path));
  if (fs::exists(path, ec))
    throw InputError("data.corpus: " + path.string() + " is not a directory (" + kExpectedCorpus + ")");
  throw InputError("data.corpus: " + path.string() + " does not exist (" + kExpectedCorpus + ")");
}

Dataset::Dataset(const DataOptions& options) {
  check_corpus_directory(options);
  corpus_path_ = resolve_corpus_path(options);
  const bool is_default = options.corpus == "sotu";
  const ShardFiles shards = find_token_shards(corpus_path_);
  if (!shards.train.empty() || !shards.validation.empty()) {
    load_shards(options);
  } else {
    try {
      load_text(options);
    } catch (const InputError& e) {
      if (!is_default) throw;
      throw InputError(std::string(e.what()) + "; " + default_corpus_hint(corpus_path_));
    }
  }
  spdlog::info("data: {}", describe());
}

void Dataset::load_text(const DataOptions& options) {
  format_ = CorpusFormat::kText;
  if (options.tokenizer.kind == "pretokenized") {
    throw InputError("data.tokenizer: pretokenized is only for token-shard corpora, and " +
                     corpus_path_.string() + " is a text corpus (use byte or sentencepiece)");
  }
  CorpusSplit split = split_corpus(load_text_corpus(corpus_path_), options.val_fraction);
  const fs::path cache_dir = options.cache_dir.empty() ? fs::path(options.data_dir) / "cache" : options.cache_dir;
  tokenizer_ = make_tokenizer(options.tokenizer, split.train, cache_dir);
  train_ = tokenize(*tokenizer_, split.train);
  validation_ = tokenize(*tokenizer_, split.validation);
  train_stream_wide_ = std::make_shared<const std::vector<int32_t>>(pack_documents(train_, tokenizer_->separator_id()));

  stats_.train_documents = static_cast<int64_t>(train_.size());
  stats_.validation_documents = static_cast<int64_t>(validation_.size());
  for (const auto& doc : split.train) stats_.train_bytes += static_cast<int64_t>(doc.text.size());
  for (size_t i = 0; i < validation_.size(); ++i) {
    const auto bytes = static_cast<int64_t>(split.validation[i].text.size());
    const auto tokens = static_cast<int64_t>(validation_[i].tokens.size());
    stats_.validation_bytes += bytes;
    stats_.validation_tokens += tokens;
    if (tokens > stats_.longest_validation_tokens || stats_.longest_validation_document.empty()) {
      stats_.longest_validation_tokens = tokens;
      stats_.longest_validation_bytes = bytes;
      stats_.longest_validation_document = validation_[i].name;
    }
  }
  for (const auto& doc : train_) stats_.train_tokens += static_cast<int64_t>(doc.tokens.size());
}

void Dataset::load_shards(const DataOptions& options) {
  format_ = CorpusFormat::kTokenShards;
  const ShardFiles files = find_token_shards(corpus_path_);
  if (files.train.empty() || files.validation.empty()) {
    throw InputError("token-shard corpus " + corpus_path_.string() + " has no " +
                     (files.train.empty() ? "*train*.bin" : "*val*.bin") +
                     " file (expected both *train*.bin and *val*.bin shards)");
  }
  const std::string& kind = options.tokenizer.kind;
  if (kind == "sentencepiece") {
    throw InputError("data.corpus " + corpus_path_.string() +
                     " holds token shards (GPT-2 ids), which cannot be re-tokenized: set data.tokenizer to "
                     "pretokenized (or leave the default, byte, which is then ignored)");
  }
  if (kind != "byte" && kind != "pretokenized") make_tokenizer(options.tokenizer, {}, {});  // throws: unknown kind
  tokenizer_ = std::make_unique<PretokenizedTokenizer>(kGpt2PaddedVocabSize);
  const int64_t vocab = tokenizer_->vocab_size();
  const auto separator = static_cast<uint16_t>(tokenizer_->separator_id());

  // Training shards are mapped, not read (token_shard.h); one pass checks the ids and counts the
  // documents, reading each page once.
  auto train = std::make_shared<const MappedTokenShards>(files.train);
  for (const auto& shard : train->shards()) {
    check_token_range(shard.tokens, shard.count, shard.path, vocab);
    stats_.train_documents += std::count(shard.tokens, shard.tokens + shard.count, separator);
  }
  stats_.train_tokens = train->size() - stats_.train_documents;
  train_shards_ = std::move(train);

  for (const auto& file : files.validation) {
    const std::vector<uint16_t> tokens = read_token_shard(file);
    check_token_range(tokens.data(), static_cast<int64_t>(tokens.size()), file, vocab);
    int64_t index = 0;
    size_t start = 0;
    while (start <= tokens.size()) {
      size_t end = static_cast<size_t>(std::find(tokens.begin() + static_cast<int64_t>(start), tokens.end(), separator) -
                                       tokens.begin());
      if (end > start) {
        validation_.push_back({file.filename().string() + "#" + std::to_string(index++),
                               std::vector<int32_t>(tokens.begin() + static_cast<int64_t>(start),
                                                    tokens.begin() + static_cast<int64_t>(end))});
      }
      start = end + 1;
    }
  }
  stats_.validation_documents = static_cast<int64_t>(validation_.size());
  for (const auto& doc : validation_) {
    const auto tokens = static_cast<int64_t>(doc.tokens.size());
    stats_.validation_tokens += tokens;
    if (tokens > stats_.longest_validation_tokens) {
      stats_.longest_validation_tokens = tokens;
      stats_.longest_validation_document = doc.name;
    }
  }
}

std::string Dataset::describe() const {
  std::ostringstream out;
  out << corpus_path_.string() << " (" << (format_ == CorpusFormat::kText ? "text" : "token shards") << "): "
      << stats_.train_documents << " train / " << stats_.validation_documents << " validation documents";
  if (format_ == CorpusFormat::kText) {
    out << " (" << millions(stats_.train_bytes) << " / " << millions(stats_.validation_bytes) << " bytes)";
  }
  out << ", " << millions(stats_.train_tokens) << " / " << millions(stats_.validation_tokens) << " tokens, tokenizer "
      << tokenizer_->name() << " (vocab " << tokenizer_->vocab_size() << "), longest validation document "
      << stats_.longest_validation_document << " (" << stats_.longest_validation_tokens << " tokens)";
  return out.str();
}

TrainStream Dataset::train_stream(int64_t context, uint64_t seed) const {
  if (train_shards_) return TrainStream(std::shared_ptr<const TokenSource>(train_shards_), context, seed);
  return TrainStream(train_stream_wide_, context, seed);
}

EvalWindows Dataset::eval_windows(int64_t context, int64_t count, uint64_t seed) const {
  return make_eval_windows(validation_, context, count, seed);
}

}  // namespace harness::data
