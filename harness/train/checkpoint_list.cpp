#include "harness/train/checkpoint_list.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "common/atomic_file.h"

namespace harness::train {

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  for (size_t left = size; left > 0;) {  // zlib takes a uInt length
    const uInt n = uInt(std::min<size_t>(left, size_t(1) << 30));
    crc = uint32_t(::crc32(crc, p, n));
    p += n;
    left -= n;
  }
  return crc;
}

std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  return bytes;
}

uint32_t crc32_of(const std::vector<char>& bytes) { return crc32_update(0, bytes.data(), bytes.size()); }

namespace {
constexpr const char* kListName = "checkpoints.tsv";
constexpr const char* kListHeader =
    "# the checkpoints this run keeps, oldest first: CRC-32 as zlib.crc32 computes it, in hex\n"
    "step\tbytes\tcrc32\tfile\n";

// The step of a checkpoint-<step>.pt name, or nullopt.
std::optional<int64_t> step_of_name(const std::string& name) {
  const std::string prefix = "checkpoint-", suffix = ".pt";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

// checkpoint.pt (the one file of runs written before the list), checkpoint-<step>.pt, or a
// temporary file of either: the files that are the list's to keep or remove.
bool is_checkpoint_file(const std::string& name) {
  const std::string base = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0
                               ? name.substr(0, name.size() - 4) : name;
  return base == "checkpoint.pt" || step_of_name(base).has_value();
}
}  // namespace

RunCheckpoints::RunCheckpoints(std::string dir) : dir_(std::move(dir)) {}

std::string RunCheckpoints::path_of(int64_t step) const {
  return (std::filesystem::path(dir_) / fmt::format("checkpoint-{}.pt", step)).string();
}

std::string RunCheckpoints::list_path() const { return (std::filesystem::path(dir_) / kListName).string(); }

std::vector<CheckpointEntry> RunCheckpoints::entries() const {
  namespace fs = std::filesystem;
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (fs::exists(list_path(), ec)) {
    std::ifstream in(list_path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.empty() || line[0] == '#' || line.rfind("step\t", 0) == 0) continue;
      std::istringstream fields(line);
      CheckpointEntry e;
      std::string crc;
      if (!(fields >> e.step >> e.digest.bytes >> crc >> e.file) || crc.size() != 8 ||
          !std::all_of(crc.begin(), crc.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }) ||
          e.file.find('/') != std::string::npos)
        throw std::runtime_error(fmt::format("{}:{}: not a checkpoint line (step, bytes, crc32, file): '{}'",
                                             list_path(), number, line));
      e.digest.crc32 = uint32_t(std::stoul(crc, nullptr, 16));  // 8 hex digits
      out.push_back(e);
    }
    return out;
  }
  // No list: a run written before it (checkpoint.pt), or one cut off between its first
  // checkpoint and its first list. Unverified; oldest first.
  if (!fs::is_directory(dir_, ec)) return out;
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    const std::string name = f.path().filename().string();
    if (name == "checkpoint.pt") out.insert(out.begin(), CheckpointEntry{-1, {}, name});
    else if (const auto step = step_of_name(name)) out.push_back({*step, {}, name});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

void RunCheckpoints::write_list(const std::vector<CheckpointEntry>& entries) const {
  std::string text = kListHeader;
  for (const auto& e : entries)
    text += fmt::format("{}\t{}\t{:08x}\t{}\n", e.step, e.digest.bytes, e.digest.crc32, e.file);
  harness::write_file_atomically(list_path(), text);
}

void RunCheckpoints::add(int64_t step, const FileDigest& digest, int64_t keep) const {
  namespace fs = std::filesystem;
  std::vector<CheckpointEntry> kept;
  for (auto& e : entries())
    if (e.digest.bytes > 0 && e.step != step) kept.push_back(e);  // listed, verified ones
  kept.push_back({step, digest, fs::path(path_of(step)).filename().string()});
  if (int64_t(kept.size()) > keep) kept.erase(kept.begin(), kept.end() - std::max<int64_t>(keep, 1));
  write_list(kept);
  // What the list no longer names: checkpoints beyond `keep`, an older run's checkpoint.pt, and
  // what a crash left (an unlisted checkpoint, a temporary file).
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    const std::string name = f.path().filename().string();
    const bool listed = std::any_of(kept.begin(), kept.end(), [&](const auto& e) { return e.file == name; });
    if (!listed && is_checkpoint_file(name)) fs::remove(f.path(), ec);
  }
}

std::optional<RunCheckpoints::Read> RunCheckpoints::read_newest_good(
    const std::function<void(const std::string&)>& warn) const {
  const auto all = entries();
  if (all.empty()) return std::nullopt;
  std::vector<std::string> bad;
  for (auto e = all.rbegin(); e != all.rend(); ++e) {
    const std::string path = (std::filesystem::path(dir_) / e->file).string();
    std::string problem;
    std::vector<char> bytes;
    try {
      bytes = read_file_bytes(path);
    } catch (const std::exception& error) {
      problem = error.what();
    }
    const bool listed = e->digest.bytes > 0;  // unlisted (older runs): taken as they are
    if (problem.empty() && listed) {
      if (bytes.size() != e->digest.bytes)
        problem = fmt::format("{} bytes where {} were written: truncated or damaged", bytes.size(), e->digest.bytes);
      else if (const uint32_t crc = crc32_of(bytes); crc != e->digest.crc32)
        problem = fmt::format("its CRC-32 is {:08x} where {:08x} was written: damaged", crc, e->digest.crc32);
    }
    if (problem.empty()) return Read{*e, path, std::move(bytes)};
    bad.push_back(fmt::format("{}: {}", path, problem));
    if (std::next(e) != all.rend())
      warn(fmt::format("the checkpoint {} is not usable ({}); falling back on the one before", path, problem));
  }
  throw std::runtime_error(fmt::format("no usable checkpoint in {}: {}", dir_, fmt::join(bad, "; ")));
}

void RunCheckpoints::remove_all() const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove(list_path(), ec);
  if (!fs::is_directory(dir_, ec)) return;
  for (const auto& f : fs::directory_iterator(dir_, ec))
    if (is_checkpoint_file(f.path().filename().string())) fs::remove(f.path(), ec);
}

}  // namespace harness::train
