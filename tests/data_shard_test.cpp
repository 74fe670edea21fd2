// nanoGPT / modded-nanogpt .bin token shards: round trip and clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "harness/data/token_shard.h"
#include "harness/util/errors.h"
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
  TempDir dir;
  const auto path = dir.path / "x_val_000000.bin";
  write_token_shard(path, sample_tokens(100));
  overwrite_int32(path, 0, 12345);
  const auto message = error_of(path);
  expect_contains(message, path.string());
  expect_contains(message, "magic");
  expect_contains(message, "expected header[0] = 20240520");
  expect_contains(message, "found 12345");
}

TEST(DataShard, UnsupportedVersionIsAClearError) {
  TempDir dir;
  const auto path = dir.path / "x_val_000000.bin";
  write_token_shard(path, sample_tokens(100));
  overwrite_int32(path, 4, 2);
  const auto message = error_of(path);
  expect_contains(message, path.string());
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
