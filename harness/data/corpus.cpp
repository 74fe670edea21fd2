#include "harness/data/corpus.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "common/errors.h"

namespace harness::data {
namespace fs = std::filesystem;

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= kFnv1a64Prime;
  }
  return hash;
}

std::string strip_control_chars(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) continue;
    out.push_back(ch);
  }
  return out;
}

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read corpus file " + path.string() + ": could not open it");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError("cannot read corpus file " + path.string() + ": read error");
  return buffer.str();
}

// The split position as a number in [0, 1): the top 53 bits of the FNV-1a hash, exactly
// representable in a double, so the comparison is the same on every machine.
double split_position(const std::string& name) {
  return static_cast<double>(fnv1a64(name) >> 11) * 0x1.0p-53;
}

void check_val_fraction(double val_fraction) {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
    std::ostringstream msg;
    msg << "data.val_fraction must lie strictly between 0 and 1, got " << val_fraction;
    throw InputError(msg.str());
  }
}

// The first UTF-8 character boundary at or after `pos`: cut points never split a character.
size_t to_char_boundary(const std::string& text, size_t pos) {
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

CorpusSplit split_single_document(Document doc, double val_fraction) {
  const auto target = static_cast<size_t>(static_cast<double>(doc.text.size()) * (1.0 - val_fraction));
  size_t cut = doc.text.find('\n', target);
  cut = cut == std::string::npos ? to_char_boundary(doc.text, target) : cut + 1;
  CorpusSplit split;
  split.train.push_back({doc.name + "#train", doc.text.substr(0, cut)});
  split.validation.push_back({doc.name + "#validation", doc.text.substr(cut)});
  return split;
}

}  // namespace

std::vector<Document> load_text_corpus(const fs::path& dir) {
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (ec || !fs::exists(status)) {
    throw InputError("corpus directory " + dir.string() + " does not exist (expected a directory of .txt files)");
  }
  if (!fs::is_directory(status)) {
    throw InputError("corpus " + dir.string() + " is not a directory (expected a directory of .txt files)");
  }
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  if (ec) throw InputError("cannot list corpus directory " + dir.string() + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw InputError("cannot list corpus directory " + dir.string() + ": " + ec.message());
    const auto& path = it->path();
    if (path.extension() == ".txt" && it->is_regular_file(ec)) files.push_back(path);
  }
  if (ec) throw InputError("cannot list corpus directory " + dir.string() + ": " + ec.message());
  if (files.empty()) {
    throw InputError("corpus directory " + dir.string() + " contains no .txt files (expected one document per .txt file)");
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  std::vector<Document> documents;
  documents.reserve(files.size());
  for (const auto& path : files) {
    documents.push_back({path.filename().string(), strip_control_chars(read_file(path))});
  }
  return documents;
}

bool is_validation_document(const std::string& name, double val_fraction) {
  return split_position(name) < val_fraction;
}

CorpusSplit split_corpus(std::vector<Document> documents, double val_fraction) {
  check_val_fraction(val_fraction);
  if (documents.size() == 1) return split_single_document(std::move(documents.front()), val_fraction);

  std::vector<bool> is_val(documents.size());
  size_t n_val = 0;
  for (size_t i = 0; i < documents.size(); ++i) {
    is_val[i] = is_validation_document(documents[i].name, val_fraction);
    n_val += is_val[i];
  }
  if (documents.size() >= 2 && (n_val == 0 || n_val == documents.size())) {
    // Move the document nearest the threshold; ties (equal positions) go to the first by name.
    size_t pick = 0;
    for (size_t i = 1; i < documents.size(); ++i) {
      const double p = split_position(documents[i].name), best = split_position(documents[pick].name);
      const bool better = n_val == 0 ? p < best : p > best;
      const bool tie_first = p == best && documents[i].name < documents[pick].name;
      if (better || tie_first) pick = i;
    }
    is_val[pick] = n_val == 0;
  }
  CorpusSplit split;
  for (size_t i = 0; i < documents.size(); ++i) {
    (is_val[i] ? split.validation : split.train).push_back(std::move(documents[i]));
  }
  return split;
}

}  // namespace harness::data
