// libFuzzer target: the input is the bytes of a token shard (.bin, harness/data/token_shard.h),
// written to a scratch folder in /dev/shm (one per process, reused by every input) as
// fuzz_train_000000.bin, and read as a token-shard corpus is read (harness/data/dataset.cpp):
//   find_token_shards(dir)            the folder's listing (the file counts as a train shard)
//   read_token_shard(file)            the whole shard into memory (validation shards)
//   MappedTokenShards({file, file})   the training shards, memory-mapped, twice in a row: every
//                                     token copied out in windows that span the two shards,
//                                     and compared with read_token_shard's
//
// Expected: the tokens, or harness::InputError whose message names the file (the one error type
// token_shard.h documents). A finding is any crash or sanitizer report (a read past the mapping
// or the buffer), any other exception type, an InputError without the path, the two readers
// disagreeing (one accepts what the other refuses, or other tokens), a hang or a huge allocation.
// docs/fuzzing.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "fuzz_scratch.h"
#include "common/errors.h"
#include "harness/data/token_shard.h"

namespace fs = std::filesystem;
using harness::data::MappedTokenShards;

namespace {

std::string g_dir, g_file;

[[noreturn]] void finding(const char* reader, const std::string& what) { fuzz::finding("fuzz_shard", reader, what); }

// Runs `f`; returns its error's message, or nullopt when it succeeded.
template <class F>
std::optional<std::string> read(const char* reader, F&& f) {
  try {
    f();
    return std::nullopt;
  } catch (const harness::InputError& e) {
    const std::string message = e.what();
    if (message.find(g_file) == std::string::npos)
      finding(reader, "an InputError that does not name the file: " + message);
    return message;
  } catch (const std::exception& e) {
    finding(reader, std::string("uncaught ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding(reader, "uncaught exception of a non-std type");
  }
}

}  // namespace

// HARNESS_FUZZ_SHARD_SEEDS=<dir>: writes the seed shards there with the harness's own writer
// (write_token_shard) and exits (scripts/fuzz.sh): empty, one token, documents separated by
// GPT-2's end-of-text, every id up to the padded vocabulary (ids past it too: the reader takes
// any uint16; dataset.cpp checks the range), and a shard long enough to span many windows.
void write_seeds(const fs::path& dir) {
  using harness::data::write_token_shard;
  fs::create_directories(dir);
  write_token_shard(dir / "empty.bin", {});
  write_token_shard(dir / "one.bin", {harness::data::kGpt2EndOfText});
  std::vector<uint16_t> docs;
  for (int d = 0; d < 8; ++d) {
    docs.push_back(uint16_t(harness::data::kGpt2EndOfText));
    for (int i = 0; i < 5 + 3 * d; ++i) docs.push_back(uint16_t((d * 7919 + i * 104729) % 50257));
  }
  write_token_shard(dir / "documents.bin", docs);
  std::vector<uint16_t> all;
  for (int i = 0; i < 65536; i += 97) all.push_back(uint16_t(i));
  all.push_back(65535);
  write_token_shard(dir / "ids.bin", all);
  std::vector<uint16_t> many(4000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = uint16_t(i % 977 == 0 ? 50256 : (i * 31) % 50257);
  write_token_shard(dir / "many.bin", many);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seeds = std::getenv("HARNESS_FUZZ_SHARD_SEEDS")) {
    write_seeds(seeds);
    std::exit(0);
  }
  // Folders of earlier processes that crashed (before atexit).
  g_dir = fuzz::scratch_dir("harness-fuzz-shard-");
  g_file = g_dir + "/fuzz_train_000000.bin";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(g_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) finding("setup", "cannot write " + g_file);
  }
  const auto listed = harness::data::find_token_shards(g_dir);
  if (listed.train.size() != 1 || !listed.validation.empty())
    finding("find_token_shards", "the scratch shard is not listed as the one train shard");

  std::vector<uint16_t> tokens;
  const auto read_error = read("read_token_shard", [&] { tokens = harness::data::read_token_shard(g_file); });
  const auto map_error = read("MappedTokenShards", [&] {
    const MappedTokenShards mapped({fs::path(g_file), fs::path(g_file)});
    const int64_t n = int64_t(tokens.size());
    if (mapped.size() != 2 * n)
      finding("MappedTokenShards", "maps " + std::to_string(mapped.size()) + " tokens where read_token_shard read 2 x " +
                                       std::to_string(n));
    // Windows of a few lengths, over the whole stream (across the boundary between the two).
    std::vector<int64_t> out;
    for (const int64_t w : {int64_t(1), int64_t(7), n + 1}) {
      for (int64_t start = 0; start + w <= 2 * n; start += std::max<int64_t>(1, w)) {
        out.assign(size_t(w), -1);
        mapped.copy(start, w, out.data());
        for (int64_t k = 0; k < w; ++k)
          if (out[size_t(k)] != tokens[size_t((start + k) % n)])
            finding("MappedTokenShards::copy", "token " + std::to_string(start + k) + " differs from read_token_shard's");
      }
    }
  });
  if (read_error.has_value() != map_error.has_value())
    finding("readers", std::string("read_token_shard ") + (read_error ? "refuses" : "accepts") +
                           " what MappedTokenShards " + (map_error ? "refuses" : "accepts") + ": " +
                           read_error.value_or(map_error.value_or("")));
  if (read_error && *read_error != *map_error)
    finding("readers", "different errors: '" + *read_error + "' and '" + *map_error + "'");
  return 0;
}
