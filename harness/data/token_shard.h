// nanoGPT / modded-nanogpt token shards (.bin): a header of 256 little-endian int32
// (header[0] = magic 20240520, header[1] = version 1, header[2] = token count), then `count`
// little-endian uint16 tokens. The tokens are GPT-2 ids; documents are separated by the GPT-2
// end-of-text token 50256 (each document starts with it in the modded-nanogpt/llm.c shards).
//
// A token-shard corpus is a directory holding *train*.bin and *val*.bin files (e.g.
// fineweb_train_000001.bin, fineweb_val_000000.bin).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "harness/data/token_source.h"

namespace harness::data {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderInts = 256;             // 1024 header bytes
constexpr int32_t kGpt2EndOfText = 50256;             // <|endoftext|>, the document separator
constexpr int64_t kGpt2PaddedVocabSize = 50304;       // 50257 rounded up to a multiple of 128

// Reads a whole shard. Throws harness::InputError naming the file and what was expected vs found
// on: unreadable file, file shorter than the header, bad magic, unsupported version (version 2 is
// llm.c's uint32 format), negative count, or a size that is not exactly header + 2 * count bytes
// (truncated or trailing data).
std::vector<uint16_t> read_token_shard(const std::filesystem::path& path);

// Writes `tokens` as a version-1 shard (overwrites `path`). Throws harness::InputError naming the
// file when there are more than INT32_MAX tokens, and std::runtime_error (an I/O failure, exit 1)
// naming the file and the cause when it cannot be written.
void write_token_shard(const std::filesystem::path& path, const std::vector<uint16_t>& tokens);

// Shards memory-mapped read-only, as one token stream (shard i's tokens after shard i−1's).
// Nothing is read into memory: the kernel pages tokens in as windows are drawn and shares the
// pages between processes (the jobs of a sweep), so FineWeb-scale corpora cost no RAM per run.
// Each file's header is checked as read_token_shard does (same errors).
class MappedTokenShards final : public TokenSource {
 public:
  explicit MappedTokenShards(const std::vector<std::filesystem::path>& files);
  ~MappedTokenShards() override;
  MappedTokenShards(const MappedTokenShards&) = delete;
  MappedTokenShards& operator=(const MappedTokenShards&) = delete;

  int64_t size() const override { return total_; }
  void copy(int64_t start, int64_t n, int64_t* out) const override;  // may span shards

  struct Shard {
    std::filesystem::path path;
    const uint16_t* tokens = nullptr;  // little-endian on disk (the host's order on x86/ARM)
    int64_t count = 0;
    int64_t start = 0;  // offset of its first token in the stream
  };
  const std::vector<Shard>& shards() const { return shards_; }

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };
  std::vector<Shard> shards_;
  std::vector<Mapping> mappings_;
  int64_t total_ = 0;
};

struct ShardFiles {
  std::vector<std::filesystem::path> train;       // *train*.bin, sorted by file name
  std::vector<std::filesystem::path> validation;  // *val*.bin, sorted by file name
};

// The shard files directly in `dir` (not recursive). Either list may be empty; a file whose name
// contains both "train" and "val" counts as train. No error for a missing directory (empty lists).
ShardFiles find_token_shards(const std::filesystem::path& dir);

}  // namespace harness::data
