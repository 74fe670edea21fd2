// Byte, SentencePiece (trained on the fixture) and pretokenized tokenizers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/data/corpus.h"
#include "harness/data/sentencepiece_library.h"
#include "harness/data/tokenizer.h"
#include "common/errors.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using namespace harness::data;

namespace {

using test_support::TempDir;

const fs::path kFixture = fs::path(HARNESS_TEST_DATA) / "sotu";

}  // namespace

TEST(DataTokenizer, ByteRoundTrip) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.separator_id(), 0);
  std::string text = "Fellow-Citizens \xe2\x80\x94 \xe2\x80\x9cquoted\xe2\x80\x9d\n\ttab";
  for (int b = 0x20; b < 256; ++b) text.push_back(static_cast<char>(b));
  const auto ids = tok.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<unsigned char>(text[i]));
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.decode({0, 'h', 'i', 0}), "hi");  // separators vanish
  EXPECT_THROW(tok.decode({256}), std::out_of_range);
  EXPECT_THROW(tok.decode({-1}), std::out_of_range);
}

TEST(DataTokenizer, SentencePieceRoundTripCacheAndDeterminism) {
  const auto split = split_corpus(load_text_corpus(kFixture), 0.1);
  TempDir cache;
  auto tok = SentencePieceTokenizer::train_or_load(split.train, 400, cache.path);
  EXPECT_FALSE(tok->loaded_from_cache());
  EXPECT_EQ(tok->vocab_size(), 400);
  EXPECT_EQ(tok->name(), "sentencepiece-bpe-400");
  EXPECT_EQ(tok->separator_id(), 2);
  EXPECT_EQ(tok->model_file(),
            cache.path / "tokenizers" / (sentencepiece_cache_key(split.train, 400) + ".model"));
  ASSERT_TRUE(fs::exists(tok->model_file()));

  // Lossless on every document, train and validation; ids in range; no separator produced; the
  // memoized word-by-word encoding equals SentencePiece's own encoding of the whole text.
  const spm::Processor reference(test_support::read_text(tok->model_file()));
  size_t bytes = 0, tokens = 0;
  for (const auto* docs : {&split.train, &split.validation}) {
    for (const auto& doc : *docs) {
      const auto ids = tok->encode(doc.text);
      EXPECT_EQ(tok->decode(ids), doc.text) << doc.name;
      for (int32_t id : ids) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, 400);
        ASSERT_NE(id, tok->separator_id());
      }
      const std::vector<int> whole = reference.encode(doc.text);
      EXPECT_EQ(std::vector<int32_t>(whole.begin(), whole.end()), ids) << doc.name;
      bytes += doc.text.size();
      tokens += ids.size();
    }
  }
  EXPECT_LT(tokens, bytes * 7 / 10);  // BPE compresses
  const std::string odd = "tab\there, new\nline, \xc3\xa9t\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87 (byte fallback)  x";
  EXPECT_EQ(tok->decode(tok->encode(odd)), odd);
  EXPECT_EQ(tok->decode({2}), "");

  // Second call: the cached model is reused.
  auto again = SentencePieceTokenizer::train_or_load(split.train, 400, cache.path);
  EXPECT_TRUE(again->loaded_from_cache());
  EXPECT_EQ(again->model_file(), tok->model_file());
  EXPECT_EQ(again->encode(split.validation[0].text), tok->encode(split.validation[0].text));

  // Training is deterministic: a fresh cache gets a byte-identical model.
  TempDir other;
  auto fresh = make_tokenizer({"sentencepiece", 400}, split.train, other.path);
  const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(fresh.get());
  ASSERT_NE(sp, nullptr);
  EXPECT_FALSE(sp->loaded_from_cache());
  EXPECT_EQ(test_support::read_text(sp->model_file()), test_support::read_text(tok->model_file()));
}

TEST(DataTokenizer, CacheKeyTracksDataAndSettings) {
  const std::vector<Document> docs = {{"a.txt", "hello world"}, {"b.txt", "another text"}};
  const auto key = sentencepiece_cache_key(docs, 512);
  EXPECT_EQ(key.size(), 16u);
  EXPECT_EQ(sentencepiece_cache_key(docs, 512), key);
  EXPECT_NE(sentencepiece_cache_key(docs, 1024), key);
  auto edited = docs;
  edited[1].text = "anothex text";  // same size, different content
  EXPECT_NE(sentencepiece_cache_key(edited, 512), key);
  auto renamed = docs;
  renamed[0].name = "c.txt";
  EXPECT_NE(sentencepiece_cache_key(renamed, 512), key);
  EXPECT_NE(sentencepiece_cache_key({docs[0]}, 512), key);
}

TEST(DataTokenizer, BadOptionsAreInputErrors) {
  TempDir cache;
  try {
    make_tokenizer({"wordpiece", 256}, {}, cache.path);
    FAIL();
  } catch (const harness::InputError& e) {
    const std::string m = e.what();
    for (const char* part : {"wordpiece", "byte", "sentencepiece", "pretokenized"}) {
      EXPECT_NE(m.find(part), std::string::npos) << m;
    }
  }
  try {
    make_tokenizer({"sentencepiece", 256}, {{"a.txt", "some text"}}, cache.path);
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data.vocab_size = 256"), std::string::npos) << e.what();
  }
  EXPECT_EQ(make_tokenizer({"byte", 256}, {}, cache.path)->name(), "byte");
}

TEST(DataTokenizer, PretokenizedVocabulary) {
  auto tok = make_tokenizer({"pretokenized", 0}, {}, {});
  EXPECT_TRUE(tok->pretokenized());
  EXPECT_EQ(tok->vocab_size(), 50304);
  EXPECT_EQ(tok->separator_id(), 50256);
  EXPECT_EQ(tok->decode({50256, 464}), "<50256><464>");
  EXPECT_THROW(tok->encode("text"), harness::InputError);
  EXPECT_FALSE(ByteTokenizer().pretokenized());
}
