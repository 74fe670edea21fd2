// Text corpus loading, control-character stripping and the stable train/validation split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/data/corpus.h"
#include "common/errors.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using namespace harness::data;
using namespace std::string_literals;

namespace {

using test_support::TempDir;

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Independent FNV-1a 64 and split position, written from the published definition.
double independent_position(const std::string& name) {
  unsigned long long h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < name.size(); ++i) {
    h = (h ^ static_cast<unsigned char>(name[i])) * 0x100000001b3ull;
  }
  return static_cast<double>(h >> 11) / 9007199254740992.0;  // 2^53
}

std::vector<std::string> names_of(const std::vector<Document>& docs) {
  std::vector<std::string> names;
  for (const auto& d : docs) names.push_back(d.name);
  return names;
}

std::vector<Document> docs_named(const std::vector<std::string>& names) {
  std::vector<Document> docs;
  for (const auto& n : names) docs.push_back({n, "text of " + n});
  return docs;
}

const fs::path kFixture = fs::path(HARNESS_TEST_DATA) / "sotu";

}  // namespace

TEST(DataCorpus, Fnv1aReferenceValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
}

TEST(DataCorpus, SplitRuleIsStableAndMatchesIndependentFnv) {
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "doc%03d.txt", i);
    names.push_back(buf);
  }
  for (double f : {0.1, 0.3, 0.5}) {
    for (const auto& n : names) EXPECT_EQ(is_validation_document(n, f), independent_position(n) < f) << n << " " << f;
  }
  // Hard-coded: the split must never change between versions or machines.
  const auto split_names = [&](double f) {
    std::vector<std::string> val;
    for (const auto& n : names) {
      if (is_validation_document(n, f)) val.push_back(n);
    }
    return val;
  };
  EXPECT_EQ(split_names(0.1), (std::vector<std::string>{"doc000.txt", "doc002.txt"}));
  EXPECT_EQ(split_names(0.3), (std::vector<std::string>{"doc000.txt", "doc002.txt", "doc009.txt", "doc014.txt",
                                                        "doc016.txt", "doc017.txt"}));
  EXPECT_EQ(split_names(0.5),
            (std::vector<std::string>{"doc000.txt", "doc001.txt", "doc002.txt", "doc005.txt", "doc006.txt",
                                      "doc009.txt", "doc012.txt", "doc014.txt", "doc015.txt", "doc016.txt",
                                      "doc017.txt"}));
}

TEST(DataCorpus, FixtureLoadsSortedAndSplitsStably) {
  const auto docs = load_text_corpus(kFixture);
  const std::vector<std::string> expected = {
      "1790_george_washington_n.txt", "1850_millard_fillmore_w.txt", "1864_abraham_lincoln_r.txt",
      "1906_theodore_roosevelt_r.txt", "1932_herbert_hoover_r.txt",  "1973_richard_nixon_r.txt",
      "1975_gerald_r_ford_r.txt",     "2020_donald_j_trump_r.txt"};
  EXPECT_EQ(names_of(docs), expected);  // README.md is not a .txt file
  for (const auto& d : docs) EXPECT_GT(d.text.size(), 5000u) << d.name;

  auto split = split_corpus(docs, 0.1);
  EXPECT_EQ(names_of(split.validation), (std::vector<std::string>{"1864_abraham_lincoln_r.txt"}));
  EXPECT_EQ(split.train.size(), 7u);
  split = split_corpus(docs, 0.5);
  EXPECT_EQ(names_of(split.validation), (std::vector<std::string>{"1864_abraham_lincoln_r.txt",
                                                                  "1973_richard_nixon_r.txt",
                                                                  "2020_donald_j_trump_r.txt"}));
  EXPECT_EQ(split.train.size(), 5u);
}

TEST(DataCorpus, SplitGuaranteesOneDocumentOnEachSide) {
  // Positions: doc001 0.364, doc003 0.709, doc004 0.874.
  auto split = split_corpus(docs_named({"doc003.txt", "doc004.txt"}), 0.1);  // hash rule: none validation
  EXPECT_EQ(names_of(split.validation), (std::vector<std::string>{"doc003.txt"}));
  EXPECT_EQ(names_of(split.train), (std::vector<std::string>{"doc004.txt"}));
  split = split_corpus(docs_named({"doc001.txt", "doc003.txt"}), 0.9);  // hash rule: all validation
  EXPECT_EQ(names_of(split.validation), (std::vector<std::string>{"doc001.txt"}));
  EXPECT_EQ(names_of(split.train), (std::vector<std::string>{"doc003.txt"}));
}

TEST(DataCorpus, SingleDocumentIsCutAtALineBoundary) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + " of the only document\n";
  const auto split = split_corpus({{"book.txt", text}}, 0.1);
  ASSERT_EQ(split.train.size(), 1u);
  ASSERT_EQ(split.validation.size(), 1u);
  EXPECT_EQ(split.train[0].name, "book.txt#train");
  EXPECT_EQ(split.validation[0].name, "book.txt#validation");
  EXPECT_EQ(split.train[0].text + split.validation[0].text, text);
  EXPECT_EQ(split.train[0].text.back(), '\n');
  EXPECT_NEAR(static_cast<double>(split.validation[0].text.size()) / text.size(), 0.1, 0.02);
}

TEST(DataCorpus, ValFractionMustBeInsideUnitInterval) {
  for (double f : {0.0, 1.0, -0.5, 2.0}) {
    try {
      split_corpus(docs_named({"a.txt", "b.txt"}), f);
      FAIL() << "no error for val_fraction " << f;
    } catch (const harness::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("data.val_fraction"), std::string::npos) << e.what();
    }
  }
}

TEST(DataCorpus, ControlCharactersAreStrippedAtLoad) {
  EXPECT_EQ(strip_control_chars("a\r\nb\x01" "c\td\x7f\xc3\xa9\x1b[0m"s), "a\nbc\td\xc3\xa9[0m");
  EXPECT_EQ(strip_control_chars("x\0y"s), "xy");

  TempDir dir;
  write_file(dir.path / "b.txt", "line one\r\nline\x0b two\x0c\x00\ttab\x7f \xe2\x80\x94 end\n"s);
  write_file(dir.path / "a.txt", "plain");
  write_file(dir.path / "notes.md", "not a document");
  fs::create_directories(dir.path / "sub.txt");  // a directory, not a document
  const auto docs = load_text_corpus(dir.path);
  ASSERT_EQ(names_of(docs), (std::vector<std::string>{"a.txt", "b.txt"}));
  EXPECT_EQ(docs[1].text, "line one\nline two\ttab \xe2\x80\x94 end\n");
  for (const auto& d : docs) {
    for (char c : d.text) {
      const auto u = static_cast<unsigned char>(c);
      EXPECT_TRUE(u >= 0x20 || u == '\n' || u == '\t') << int(u);
      EXPECT_NE(u, 0x7F);
    }
  }
}

TEST(DataCorpus, MissingOrEmptyDirectoryErrorNamesIt) {
  TempDir dir;
  const fs::path missing = dir.path / "nope";
  try {
    load_text_corpus(missing);
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  write_file(dir.path / "readme.md", "x");
  try {
    load_text_corpus(dir.path);
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no .txt files"), std::string::npos) << e.what();
  }
  try {
    load_text_corpus(dir.path / "readme.md");
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
}
