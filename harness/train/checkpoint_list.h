// The checkpoints a run directory keeps: the newest few (run.keep_checkpoints) as
// checkpoint-<step>.pt, and checkpoints.tsv beside them listing each with its size and CRC-32
// (zlib's), so that a resume can tell a truncated or bit-flipped file and fall back on the one
// before. The list is replaced atomically after its checkpoint is in place, so a crash at any
// moment leaves a list whose files are whole. No LibTorch here: sweeps ask whether a run has a
// checkpoint without it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace harness::train {

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

std::vector<char> read_file_bytes(const std::string& path);  // std::runtime_error naming it
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);
uint32_t crc32_of(const std::vector<char>& bytes);

// One line of checkpoints.tsv: the checkpoint of `step` in `file` (a name in the run directory).
struct CheckpointEntry {
  int64_t step = 0;
  FileDigest digest;
  std::string file;
};

// The checkpoints of one run directory.
class RunCheckpoints {
 public:
  explicit RunCheckpoints(std::string dir);
  std::string path_of(int64_t step) const;  // <dir>/checkpoint-<step>.pt
  std::string list_path() const;            // <dir>/checkpoints.tsv
  // The listed checkpoints, oldest first; without a list, the unverified files a run written
  // before the list (checkpoint.pt) or cut off before its first list has.
  std::vector<CheckpointEntry> entries() const;
  bool empty() const { return entries().empty(); }
  // Lists the checkpoint just written for `step` (at path_of(step)), then removes every
  // checkpoint but the newest `keep` (and any file a crash left unlisted).
  void add(int64_t step, const FileDigest& digest, int64_t keep) const;
  // The newest checkpoint whose bytes match its listed size and CRC-32 (or, unlisted, that can
  // be read), with its bytes. Each one skipped is reported to `warn` with its file and what is
  // wrong with it. nullopt when there is none; std::runtime_error naming each when none is good.
  struct Read {
    CheckpointEntry entry;
    std::string path;
    std::vector<char> bytes;
  };
  std::optional<Read> read_newest_good(const std::function<void(const std::string&)>& warn) const;
  void remove_all() const;
  const std::string& dir() const { return dir_; }

 private:
  void write_list(const std::vector<CheckpointEntry>& entries) const;
  std::string dir_;
};

}  // namespace harness::train
