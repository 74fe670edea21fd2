// nanoGPT / modded-nanogpt .bin token shards: round trip and clear errors.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "harness/data/token_shard.h"
#include "harness/data/windows.h"
#include "common/errors.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using namespace harness::data;

namespace {

using test_support::TempDir;

std::vector<uint16_t> sample_tokens(size_t n) {
  std::mt19937_64 engine(42);
  std::vector<uint16_t> tokens(n);
  for (auto& t : tokens) t = static_cast<uint16_t>(engine() % 50257);
  tokens[0] = 50256;
  tokens[1] = 65535;
  tokens[2] = 0;
  return tokens;
}

void overwrite_int32(const fs::path& path, std::streamoff offset, int32_t value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  const unsigned char le[4] = {static_cast<unsigned char>(value), static_cast<unsigned char>(value >> 8),
                               static_cast<unsigned char>(value >> 16), static_cast<unsigned char>(value >> 24)};
  f.write(reinterpret_cast<const char*>(le), 4);
}

std::string error_of(const fs::path& path) {
  try {
    read_token_shard(path);
  } catch (const harness::InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError reading " << path;
  return "";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

// The error of reading a 100-token shard whose header word at byte `offset` is `value`: it names
// the file.
std::string error_with_header_word(std::streamoff offset, int32_t value) {
  TempDir dir;
  const auto path = dir.path / "x_val_000000.bin";
  write_token_shard(path, sample_tokens(100));
  overwrite_int32(path, offset, value);
  const auto message = error_of(path);
  expect_contains(message, path.string());
  return message;
}

}  // namespace

TEST(DataShard, RoundTrip) {
  TempDir dir;
  const auto path = dir.path / "tiny_train_000000.bin";
  const auto tokens = sample_tokens(10000);
  write_token_shard(path, tokens);
  EXPECT_EQ(fs::file_size(path), 1024u + 2 * tokens.size());
  EXPECT_EQ(read_token_shard(path), tokens);

  std::ifstream in(path, std::ios::binary);  // little-endian header: magic, version, count
  unsigned char header[12];
  in.read(reinterpret_cast<char*>(header), 12);
  const auto le = [&](int i) { return header[i] | header[i + 1] << 8 | header[i + 2] << 16 | header[i + 3] << 24; };
  EXPECT_EQ(le(0), 20240520);
  EXPECT_EQ(le(4), 1);
  EXPECT_EQ(le(8), 10000);

  write_token_shard(path, {});
  EXPECT_TRUE(read_token_shard(path).empty());
}

TEST(DataShard, BadMagicIsAClearError) {
  const auto message = error_with_header_word(0, 12345);
  expect_contains(message, "magic");
  expect_contains(message, "expected header[0] = 20240520");
  expect_contains(message, "found 12345");
}

TEST(DataShard, UnsupportedVersionIsAClearError) {
  const auto message = error_with_header_word(4, 2);
  expect_contains(message, "unsupported version");
  expect_contains(message, "found 2");
}

TEST(DataShard, TruncatedFileIsAClearError) {
  TempDir dir;
  const auto path = dir.path / "x_train_000000.bin";
  write_token_shard(path, sample_tokens(100));  // 1024 + 200 bytes
  fs::resize_file(path, 1024 + 150);
  auto message = error_of(path);
  expect_contains(message, path.string());
  expect_contains(message, "truncated");
  expect_contains(message, "100 tokens");
  expect_contains(message, "expected 1224 bytes");
  expect_contains(message, "found 1174 bytes");

  fs::resize_file(path, 10);  // not even a header
  message = error_of(path);
  expect_contains(message, path.string());
  expect_contains(message, "truncated");
  expect_contains(message, "1024 bytes");
  expect_contains(message, "10 bytes");

  write_token_shard(path, sample_tokens(100));
  fs::resize_file(path, 1024 + 202);  // one token too many
  expect_contains(error_of(path), "trailing data");

  expect_contains(error_of(dir.path / "missing.bin"), "cannot open");
}

TEST(DataShard, FindsTrainAndValidationShardsSorted) {
  TempDir dir;
  for (const char* name : {"fineweb_train_000002.bin", "fineweb_train_000001.bin", "fineweb_val_000000.bin",
                           "notes.txt", "other.bin"}) {
    std::ofstream(dir.path / name) << "x";
  }
  const auto files = find_token_shards(dir.path);
  ASSERT_EQ(files.train.size(), 2u);
  EXPECT_EQ(files.train[0].filename(), "fineweb_train_000001.bin");
  EXPECT_EQ(files.train[1].filename(), "fineweb_train_000002.bin");
  ASSERT_EQ(files.validation.size(), 1u);
  EXPECT_EQ(files.validation[0].filename(), "fineweb_val_000000.bin");
  EXPECT_TRUE(find_token_shards(dir.path / "missing").train.empty());
}

TEST(DataShard, MappedShardsAreOneStreamAcrossFileBoundaries) {
  TempDir dir;
  // Three shards, the middle one empty: ranges that span boundaries must stitch correctly.
  const std::vector<std::vector<uint16_t>> parts = {sample_tokens(1000), {}, sample_tokens(777)};
  std::vector<fs::path> files;
  std::vector<int64_t> all;
  for (size_t i = 0; i < parts.size(); ++i) {
    files.push_back(dir.path / ("x_train_00000" + std::to_string(i) + ".bin"));
    write_token_shard(files.back(), parts[i]);
    all.insert(all.end(), parts[i].begin(), parts[i].end());
  }
  const MappedTokenShards mapped(files);
  ASSERT_EQ(mapped.size(), int64_t(all.size()));
  ASSERT_EQ(mapped.shards().size(), 3u);
  EXPECT_EQ(mapped.shards()[2].start, 1000);
  for (const auto& [start, n] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {990, 20}, {999, 2}, {1000, 777}, {0, int64_t(all.size())}, {1776, 1}}) {
    std::vector<int64_t> got(size_t(n), -1);
    mapped.copy(start, n, got.data());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin() + start)) << start << "+" << n;
  }
  // The training stream over the mapping serves the same tokens as over a vector.
  auto shared = std::make_shared<const MappedTokenShards>(files);
  TrainStream a(std::shared_ptr<const TokenSource>(shared), 16, 5);
  TrainStream b(std::make_shared<const std::vector<int32_t>>(all.begin(), all.end()), 16, 5);
  EXPECT_TRUE(torch::equal(a.stream(), b.stream()));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(torch::equal(a.next_batch(7), b.next_batch(7)));
}

TEST(DataShard, MappedShardsCheckHeadersLikeTheReader) {
  TempDir dir;
  const auto good = dir.path / "a_train_000000.bin", bad = dir.path / "a_train_000001.bin";
  write_token_shard(good, sample_tokens(50));
  write_token_shard(bad, sample_tokens(50));
  overwrite_int32(bad, 0, 12345);
  try {
    MappedTokenShards mapped({good, bad});
    ADD_FAILURE() << "no InputError for a bad magic number";
  } catch (const harness::InputError& e) {
    EXPECT_EQ(std::string(e.what()), error_of(bad));  // the same message as read_token_shard
  }
}

// A shard that cannot be written is an I/O failure (exit 1), not the user's input (exit 2): a
// full disk (/dev/full fails every write with ENOSPC) and a missing folder, each named with the
// file and the system's cause.
TEST(DataShard, AWriteFailureIsAnIoErrorNamingTheFileAndTheCause) {
  TempDir dir;
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {"/dev/full", "No space left on device"}, {dir.path / "missing" / "x_train.bin", "No such file or directory"}};
  for (const auto& [path, cause] : cases) {
    try {
      write_token_shard(path, sample_tokens(1000));
      ADD_FAILURE() << "wrote " << path;
    } catch (const harness::InputError& e) {
      ADD_FAILURE() << "a user error (exit 2): " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "token shard " + path.string() + ": cannot write: " + cause);
    }
  }
}
