// TrainStream (packed training windows, epoch permutations, exact resume) and evaluation windows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "harness/data/corpus.h"
#include "harness/data/tokenizer.h"
#include "harness/data/windows.h"
#include "common/errors.h"

namespace fs = std::filesystem;
using namespace harness::data;

namespace {

// stream[i] = i: every token names its own position.
std::shared_ptr<const std::vector<int32_t>> iota_stream(int32_t n) {
  auto v = std::make_shared<std::vector<int32_t>>(n);
  std::iota(v->begin(), v->end(), 0);
  return v;
}

std::vector<torch::Tensor> draw(TrainStream& stream, int batches, int64_t batch_size) {
  std::vector<torch::Tensor> out;
  for (int i = 0; i < batches; ++i) out.push_back(stream.next_batch(batch_size));
  return out;
}

void expect_same_batches(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "batch " << i;
}

// Synthetic validation documents: token j of document d is d * 100000 + j.
std::vector<TokenizedDocument> numbered_docs(const std::vector<int>& lengths) {
  std::vector<TokenizedDocument> docs;
  for (size_t d = 0; d < lengths.size(); ++d) {
    TokenizedDocument doc{"d" + std::to_string(d), {}};
    for (int j = 0; j < lengths[d]; ++j) doc.tokens.push_back(static_cast<int32_t>(d * 100000 + j));
    docs.push_back(doc);
  }
  return docs;
}

}  // namespace

TEST(DataTrainStream, PacksDocumentsWithALeadingSeparator) {
  const std::vector<TokenizedDocument> docs = {{"a", {5, 6}}, {"b", {7}}, {"c", {}}};
  EXPECT_EQ(pack_documents(docs, 0), (std::vector<int32_t>{0, 5, 6, 0, 7, 0}));
  TrainStream stream(docs, 0, 2, 1);
  EXPECT_EQ(stream.num_tokens(), 6);
  EXPECT_EQ(stream.num_windows(), 2);
}

TEST(DataTrainStream, BatchesAreShiftedWindowsOfTheStream) {
  const int64_t L = 7;
  TrainStream stream(iota_stream(405), L, 1234);  // 50 windows of 8, 5 tail tokens
  ASSERT_EQ(stream.num_windows(), 50);
  const auto all = stream.stream();
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{405}));
  const auto batch = stream.next_batch(6);
  EXPECT_EQ(batch.sizes(), (std::vector<int64_t>{6, L + 1}));
  EXPECT_EQ(batch.dtype(), torch::kInt64);
  const auto order = stream.epoch_order(0);
  for (int64_t b = 0; b < 6; ++b) {
    const int64_t start = batch[b][0].item<int64_t>();
    EXPECT_EQ(start % (L + 1), 0);  // non-overlapping, aligned windows
    EXPECT_EQ(static_cast<uint64_t>(start / (L + 1)), order[b]);
    EXPECT_TRUE(torch::equal(batch[b], all.slice(0, start, start + L + 1)));
  }
  // Targets are the inputs shifted by one.
  const auto inputs = batch.slice(1, 0, L), targets = batch.slice(1, 1, L + 1);
  EXPECT_TRUE(torch::equal(targets.slice(1, 0, L - 1), inputs.slice(1, 1, L)));
}

TEST(DataTrainStream, EachEpochCoversEveryWindowOnce) {
  const int64_t L = 7;
  TrainStream stream(iota_stream(405), L, 99);
  std::vector<int64_t> starts;
  for (int i = 0; i < 5; ++i) {
    const auto batch = stream.next_batch(10);
    for (int64_t b = 0; b < 10; ++b) starts.push_back(batch[b][0].item<int64_t>());
  }
  EXPECT_EQ(stream.cursor(), (TrainStream::Cursor{0, 50}));
  std::vector<int64_t> sorted = starts;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t w = 0; w < 50; ++w) EXPECT_EQ(sorted[w], w * (L + 1));
  EXPECT_NE(sorted, starts);  // shuffled, not in stream order

  // The next batch starts epoch 1, in a different order that again covers everything.
  const auto next = stream.next_batch(50);
  EXPECT_EQ(stream.cursor(), (TrainStream::Cursor{1, 50}));
  std::vector<int64_t> epoch1;
  for (int64_t b = 0; b < 50; ++b) epoch1.push_back(next[b][0].item<int64_t>());
  EXPECT_NE(epoch1, starts);
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch1, sorted);
}

TEST(DataTrainStream, SeekResumesExactly) {
  auto data = iota_stream(1000);
  TrainStream uninterrupted(data, 15, 7);  // 62 windows
  const auto reference = draw(uninterrupted, 23, 7);  // crosses two epoch boundaries

  TrainStream first(data, 15, 7);
  const auto head = draw(first, 9, 7);
  const TrainStream::Cursor saved = first.cursor();
  EXPECT_EQ(saved, (TrainStream::Cursor{1, 1}));  // 63 windows served

  TrainStream resumed(data, 15, 7);  // a new process: fresh object, then seek
  resumed.seek(saved);
  const auto tail = draw(resumed, 14, 7);
  expect_same_batches(head, std::vector<torch::Tensor>(reference.begin(), reference.begin() + 9));
  expect_same_batches(tail, std::vector<torch::Tensor>(reference.begin() + 9, reference.end()));

  // Seeking back on the same object replays too; a cursor at the end of an epoch is valid.
  first.seek({0, 0});
  expect_same_batches(draw(first, 23, 7), reference);
  first.seek({0, 62});
  EXPECT_TRUE(torch::equal(first.next_batch(1)[0], reference[8][6]));  // window 0 of epoch 1
  EXPECT_THROW(first.seek({0, 63}), harness::InputError);
}

TEST(DataTrainStream, SeedsGiveDifferentOrdersAndFixedGoldenOrder) {
  auto data = iota_stream(1000);
  TrainStream a(data, 15, 1), b(data, 15, 2), a2(data, 15, 1);
  EXPECT_FALSE(torch::equal(a.next_batch(8), b.next_batch(8)));
  EXPECT_EQ(a2.epoch_order(0), TrainStream(data, 15, 1).epoch_order(0));

  // Pinned across standard libraries and versions: mt19937_64 is specified by the standard and
  // the bounded draw and shuffle are ours.
  std::mt19937_64 engine;
  engine.discard(9999);
  EXPECT_EQ(engine(), 9981545732273789042ull);  // the standard's required 10000th output
  std::mt19937_64 e2(2024);
  std::vector<uint64_t> v(10);
  std::iota(v.begin(), v.end(), 0);
  fisher_yates_shuffle(v, e2);
  EXPECT_EQ(v, (std::vector<uint64_t>{1, 3, 6, 0, 2, 8, 7, 5, 9, 4}));
}

TEST(DataTrainStream, UniformBelowIsUnbiasedEnough) {
  std::mt19937_64 engine(5);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) ++counts[uniform_below(engine, 6)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
  EXPECT_EQ(uniform_below(engine, 1), 0u);
}

TEST(DataTrainStream, Uint16StreamBehavesLikeInt32) {
  auto narrow = std::make_shared<std::vector<uint16_t>>(500);
  std::iota(narrow->begin(), narrow->end(), uint16_t{0});
  (*narrow)[17] = 50256;
  auto wide = std::make_shared<std::vector<int32_t>>(narrow->begin(), narrow->end());
  TrainStream a(std::shared_ptr<const std::vector<uint16_t>>(narrow), 9, 3);
  TrainStream b(std::shared_ptr<const std::vector<int32_t>>(wide), 9, 3);
  expect_same_batches(draw(a, 8, 9), draw(b, 8, 9));
  EXPECT_TRUE(torch::equal(a.stream(), b.stream()));
}

TEST(DataTrainStream, ContextLongerThanStreamIsAnInputError) {
  try {
    TrainStream(iota_stream(100), 100, 1);
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("training context 100 is too long"), std::string::npos) << e.what();
  }
}

TEST(DataEvalWindows, DeterministicAndInsideSingleDocuments) {
  const auto docs = numbered_docs({10, 40, 100, 33});  // T = 15: 0 + 2 + 6 + 2 = 10 candidates
  const auto a = make_eval_windows(docs, 15, 4, 7);
  const auto b = make_eval_windows(numbered_docs({10, 40, 100, 33}), 15, 4, 7);
  EXPECT_EQ(a.context, 15);
  EXPECT_EQ(a.requested, 4);
  ASSERT_EQ(a.tokens.sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(a.tokens.dtype(), torch::kInt64);
  EXPECT_TRUE(torch::equal(a.tokens, b.tokens));
  EXPECT_EQ(a.sources, b.sources);

  std::set<std::string> distinct(a.sources.begin(), a.sources.end());
  EXPECT_EQ(distinct.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t first = a.tokens[r][0].item<int64_t>();
    const int64_t doc = first / 100000, offset = first % 100000;
    EXPECT_EQ(a.sources[r], "d" + std::to_string(doc) + "@" + std::to_string(offset));
    EXPECT_EQ(offset % 16, 0);
    const int64_t length = static_cast<int64_t>(docs[doc].tokens.size());
    EXPECT_LE(offset + 16, length);  // inside the document
    EXPECT_TRUE(torch::equal(a.tokens[r], torch::arange(first, first + 16, torch::kInt64)));
  }

  // Other seeds choose other windows (at least one of several differs).
  bool differs = false;
  for (uint64_t seed = 8; seed < 12; ++seed) differs |= make_eval_windows(docs, 15, 4, seed).sources != a.sources;
  EXPECT_TRUE(differs);
}

TEST(DataEvalWindows, FewerWindowsThanRequestedReturnsAll) {
  const auto docs = numbered_docs({10, 40, 100, 33});
  const auto w = make_eval_windows(docs, 15, 100, 1);
  EXPECT_EQ(w.requested, 100);
  ASSERT_EQ(w.tokens.size(0), 10);
  EXPECT_EQ(w.sources.front(), "d1@0");
  EXPECT_EQ(w.sources.back(), "d3@16");
  EXPECT_EQ(make_eval_windows(docs, 99, 5, 1).tokens.size(0), 1);  // only d2 has 100 tokens
}

TEST(DataEvalWindows, ContextTooLongNamesContextAndLongestDocument) {
  const auto docs = numbered_docs({10, 40, 100, 33});
  try {
    make_eval_windows(docs, 100, 4, 1);
    FAIL();
  } catch (const harness::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("evaluation context 100 is too long"), std::string::npos) << m;
    EXPECT_NE(m.find("longest validation document (d2) has 100 tokens"), std::string::npos) << m;
  }
  EXPECT_THROW(make_eval_windows(docs, 0, 4, 1), harness::InputError);
  EXPECT_THROW(make_eval_windows(docs, 8, 0, 1), harness::InputError);
}

// eval.same_text: the shorter contexts' windows are chunks of the longest's, so their targets are
// the long windows' targets, each exactly once.
TEST(DataEvalWindows, CutWindowsScoreTheLongWindowsTargetsEachOnce) {
  const auto docs = numbered_docs({10, 40, 100, 33, 70});  // token = document · 100000 + position
  const auto longest = make_eval_windows(docs, 32, 3, 5);
  ASSERT_EQ(longest.tokens.size(0), 3);
  for (const int64_t T : {1, 4, 8, 32}) {
    const auto cut = cut_eval_windows(longest, T);
    const int64_t chunks = 32 / T;
    EXPECT_EQ(cut.context, T);
    EXPECT_EQ(cut.requested, 3 * chunks);
    ASSERT_EQ(cut.tokens.sizes(), (std::vector<int64_t>{3 * chunks, T + 1}));
    ASSERT_EQ(cut.sources.size(), static_cast<size_t>(3 * chunks));
    for (int64_t w = 0; w < 3; ++w) {
      const int64_t first = longest.tokens[w][0].item<int64_t>();
      std::vector<int64_t> targets;  // every chunk's targets, in row order
      for (int64_t c = 0; c < chunks; ++c) {
        const auto row = cut.tokens[w * chunks + c];
        EXPECT_TRUE(torch::equal(row, torch::arange(first + c * T, first + c * T + T + 1, torch::kInt64)));
        const int64_t doc = first / 100000, offset = first % 100000;
        EXPECT_EQ(cut.sources[w * chunks + c], "d" + std::to_string(doc) + "@" + std::to_string(offset + c * T));
        for (int64_t i = 1; i <= T; ++i) targets.push_back(row[i].item<int64_t>());
      }
      std::vector<int64_t> long_targets;
      for (int64_t i = 1; i <= 32; ++i) long_targets.push_back(longest.tokens[w][i].item<int64_t>());
      EXPECT_EQ(targets, long_targets) << "window " << w << ", T = " << T;
    }
    EXPECT_EQ(window_documents(cut).size(), static_cast<size_t>(3 * chunks));
  }
  try {
    cut_eval_windows(longest, 12);
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("context 12 cannot be cut from windows of 32 tokens"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cut_eval_windows(longest, 0), harness::InputError);
}

TEST(DataEvalWindows, ValidationWindowsDrawEachContextOrCutTheLongest) {
  const auto docs = numbered_docs({10, 40, 100, 33, 70});
  const auto count = [](int64_t T) { return T == 32 ? 2 : 5; };
  const auto independent = make_validation_windows(docs, {8, 32, 16}, count, 9, false);
  ASSERT_EQ(independent.size(), 3u);
  for (const int64_t T : {8, 16, 32}) {
    const auto expected = make_eval_windows(docs, T, count(T), 9);
    EXPECT_TRUE(torch::equal(independent.at(T).tokens, expected.tokens)) << T;
    EXPECT_EQ(independent.at(T).sources, expected.sources) << T;
  }
  const auto same = make_validation_windows(docs, {8, 32, 16}, count, 9, true);
  ASSERT_EQ(same.size(), 3u);
  EXPECT_TRUE(torch::equal(same.at(32).tokens, make_eval_windows(docs, 32, 2, 9).tokens));
  for (const int64_t T : {8, 16}) {
    EXPECT_TRUE(torch::equal(same.at(T).tokens, cut_eval_windows(same.at(32), T).tokens)) << T;
    EXPECT_EQ(same.at(T).tokens.size(0), 2 * 32 / T);
  }
  // A context the documents cannot hold is named.
  try {
    make_validation_windows(docs, {8, 128}, count, 9, true);
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("context 128: evaluation context 128 is too long", 0), 0u) << e.what();
  }
}

TEST(DataEvalWindows, FixtureWindowsDecodeToDocumentText) {
  const auto split = split_corpus(load_text_corpus(fs::path(HARNESS_TEST_DATA) / "sotu"), 0.5);
  ByteTokenizer tok;
  const auto validation = tokenize(tok, split.validation);
  for (int64_t T : {256, 1024, 4096}) {
    const auto w = make_eval_windows(validation, T, 16, 1);
    ASSERT_EQ(w.tokens.size(0), 16);
    for (int64_t r = 0; r < 16; ++r) {
      const auto at = w.sources[r].rfind('@');
      const std::string name = w.sources[r].substr(0, at);
      const size_t offset = std::stoul(w.sources[r].substr(at + 1));
      const auto it = std::find_if(split.validation.begin(), split.validation.end(),
                                   [&](const Document& d) { return d.name == name; });
      ASSERT_NE(it, split.validation.end()) << w.sources[r];
      const auto row = w.tokens[r];
      std::vector<int32_t> ids(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + T + 1);
      EXPECT_EQ(tok.decode(ids), it->text.substr(offset, T + 1));
    }
  }
}

TEST(EvalWindows, EachWindowsDocumentIsNumberedInOrderOfFirstAppearance) {
  harness::data::EvalWindows w;
  w.sources = {"1790_washington.txt@0", "1790_washington.txt@65", "1861_lincoln.txt@0", "a@b.txt@130"};
  EXPECT_EQ(harness::data::window_documents(w), (std::vector<int64_t>{0, 0, 1, 2}));
}
