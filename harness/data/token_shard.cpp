#include "harness/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>

#include "common/errors.h"

namespace harness::data {
namespace fs = std::filesystem;

namespace {

// The format is little-endian; decode explicitly so a big-endian host reads it right too.
int32_t le_int32(const unsigned char* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
}

void put_le_int32(unsigned char* p, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(u >> (8 * i));
}

constexpr int64_t kHeaderBytes = kShardHeaderInts * 4;

std::string shard_error(const fs::path& path, const std::string& what) {
  return "token shard " + path.string() + ": " + what;
}

// Opens `path`, checks its header and size; returns the token count, `in` positioned after the
// header.
int64_t open_token_shard(const fs::path& path, std::ifstream& in) {
  in.open(path, std::ios::binary);
  if (!in) throw InputError(shard_error(path, "cannot open the file"));
  std::error_code ec;
  const auto file_size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) throw InputError(shard_error(path, "cannot read the file size: " + ec.message()));
  if (file_size < kHeaderBytes) {
    throw InputError(shard_error(path, "truncated: expected a header of " + std::to_string(kHeaderBytes) +
                                           " bytes (256 int32), found a file of " + std::to_string(file_size) +
                                           " bytes"));
  }
  std::array<unsigned char, kHeaderBytes> header{};
  if (!in.read(reinterpret_cast<char*>(header.data()), kHeaderBytes)) {
    throw InputError(shard_error(path, "read error in the header"));
  }
  const int32_t magic = le_int32(&header[0]);
  const int32_t version = le_int32(&header[4]);
  const int32_t count = le_int32(&header[8]);
  if (magic != kShardMagic) {
    throw InputError(shard_error(path, "bad magic number: expected header[0] = " + std::to_string(kShardMagic) +
                                           " (nanoGPT/modded-nanogpt .bin shard), found " + std::to_string(magic)));
  }
  if (version != kShardVersion) {
    throw InputError(shard_error(path, "unsupported version: expected header[1] = " +
                                           std::to_string(kShardVersion) + " (uint16 tokens), found " +
                                           std::to_string(version) +
                                           (version == 2 ? " (llm.c uint32 tokens, not supported)" : "")));
  }
  if (count < 0) {
    throw InputError(shard_error(path, "bad token count: header[2] = " + std::to_string(count) + " is negative"));
  }
  const int64_t expected = kHeaderBytes + 2 * static_cast<int64_t>(count);
  if (file_size != expected) {
    const int64_t found_tokens = (file_size - kHeaderBytes) / 2;
    throw InputError(shard_error(
        path, std::string(file_size < expected ? "truncated" : "trailing data") + ": header says " +
                  std::to_string(count) + " tokens, so expected " + std::to_string(expected) +
                  " bytes, found " + std::to_string(file_size) + " bytes (" + std::to_string(found_tokens) +
                  " tokens)"));
  }
  return count;
}

}  // namespace

std::vector<uint16_t> read_token_shard(const fs::path& path) {
  std::ifstream in;
  const int64_t count = open_token_shard(path, in);
  std::vector<unsigned char> raw(static_cast<size_t>(count) * 2);
  if (count > 0 && !in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()))) {
    throw InputError(shard_error(path, "read error after the header (expected " + std::to_string(count) +
                                           " tokens)"));
  }
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint16_t>(raw[2 * i] | raw[2 * i + 1] << 8);
  }
  return tokens;
}

// The mapped tokens are used in the host's byte order; the format is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "MappedTokenShards reads uint16 tokens in place: little-endian hosts only");

MappedTokenShards::MappedTokenShards(const std::vector<fs::path>& files) {
  try {
    for (const auto& path : files) {
      int64_t count = 0;
      {
        std::ifstream in;
        count = open_token_shard(path, in);  // header and size checks, as read_token_shard
      }
      Shard shard{path, nullptr, count, total_};
      if (count > 0) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw InputError(shard_error(path, "cannot open the file"));
        const size_t bytes = static_cast<size_t>(kHeaderBytes + 2 * count);
        void* base = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
        ::close(fd);  // the mapping keeps the file
        if (base == MAP_FAILED)
          throw InputError(shard_error(path, std::string("cannot map the file: ") + std::strerror(errno)));
        mappings_.push_back({base, bytes});
        shard.tokens = reinterpret_cast<const uint16_t*>(static_cast<const char*>(base) + kHeaderBytes);
      }
      total_ += count;
      shards_.push_back(std::move(shard));
    }
  } catch (...) {
    for (const auto& m : mappings_) ::munmap(m.base, m.bytes);
    throw;
  }
}

MappedTokenShards::~MappedTokenShards() {
  for (const auto& m : mappings_) ::munmap(m.base, m.bytes);
}

void MappedTokenShards::copy(int64_t start, int64_t n, int64_t* out) const {
  // The shard holding `start`: the last one starting at or before it (empty shards skipped).
  auto it = std::upper_bound(shards_.begin(), shards_.end(), start,
                             [](int64_t s, const Shard& shard) { return s < shard.start; });
  size_t i = static_cast<size_t>(it - shards_.begin()) - 1;
  while (n > 0) {
    const Shard& shard = shards_[i++];
    const int64_t from = start - shard.start;
    const int64_t take = std::min(n, shard.count - from);
    for (int64_t k = 0; k < take; ++k) out[k] = shard.tokens[from + k];
    out += take;
    start += take;
    n -= take;
  }
}

void write_token_shard(const fs::path& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw InputError(shard_error(path, "too many tokens for one shard: " + std::to_string(tokens.size()) +
                                           " (at most 2147483647)"));
  }
  std::array<unsigned char, kHeaderBytes> header{};
  put_le_int32(&header[0], kShardMagic);
  put_le_int32(&header[4], kShardVersion);
  put_le_int32(&header[8], static_cast<int32_t>(tokens.size()));
  std::vector<unsigned char> raw(tokens.size() * 2);
  for (size_t i = 0; i < tokens.size(); ++i) {
    raw[2 * i] = static_cast<unsigned char>(tokens[i] & 0xFF);
    raw[2 * i + 1] = static_cast<unsigned char>(tokens[i] >> 8);
  }
  // An I/O failure (a full disk, a quota, no such folder) is not the user's input: std::runtime_error
  // (exit 1), with the system's word for it.
  const auto fail = [&](int error) {
    throw std::runtime_error(shard_error(path, std::string("cannot write: ") + std::strerror(error)));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno);
  int error = 0;
  for (const auto& [data, size] : {std::pair{header.data(), header.size()}, std::pair{raw.data(), raw.size()}})
    for (size_t done = 0; done < size && error == 0;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n > 0) done += size_t(n);
      else if (n == 0) error = EIO;  // no progress on a regular file: do not loop for ever
      else if (errno != EINTR) error = errno;
    }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) fail(error);
}

ShardFiles find_token_shards(const fs::path& dir) {
  ShardFiles files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& path = it->path();
    if (path.extension() != ".bin" || !it->is_regular_file(ec)) continue;
    const std::string name = path.filename().string();
    if (name.find("train") != std::string::npos) {
      files.train.push_back(path);
    } else if (name.find("val") != std::string::npos) {
      files.validation.push_back(path);
    }
  }
  const auto by_name = [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  };
  std::sort(files.train.begin(), files.train.end(), by_name);
  std::sort(files.validation.begin(), files.validation.end(), by_name);
  return files;
}

}  // namespace harness::data
