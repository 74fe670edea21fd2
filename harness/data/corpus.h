// Text corpora: a directory of .txt files, one document per file, and the train/validation split.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace harness::data {

struct Document {
  std::string name;  // file name, e.g. "1790_george_washington_n.txt" (the split is keyed by it)
  std::string text;  // control characters stripped (see strip_control_chars)
};

// 64-bit FNV-1a: hash = 14695981039346656037; for each byte: hash ^= byte; hash *= 1099511628211
// (mod 2^64). Byte-wise and endian-free, so the same on every machine and standard library.
// Pass a previous result as `hash` to continue hashing.
constexpr uint64_t kFnv1a64Offset = 14695981039346656037ull;
constexpr uint64_t kFnv1a64Prime = 1099511628211ull;
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64Offset);

// Drops every C0 control byte (0x00-0x1F) except '\t' and '\n', and DEL (0x7F); '\r' is dropped, so
// CRLF becomes LF. Bytes >= 0x80 (UTF-8) are kept as they are. The same rule as
// scripts/fetch-corpus.sh, so any user directory is as clean as the default corpus; in particular
// byte 0 never occurs in a loaded document (the byte tokenizer uses it as the document separator).
std::string strip_control_chars(std::string_view text);

// Every regular file named *.txt directly in `dir` (not recursive), sorted by file name (byte
// order), read whole and stripped of control characters. Empty files give empty documents.
// Throws harness::InputError naming the directory when it is missing, not a directory, unreadable
// or holds no .txt file, and naming the file when one cannot be read.
std::vector<Document> load_text_corpus(const std::filesystem::path& dir);

// Stable split: u = (fnv1a64(name) >> 11) * 2^-53, a number in [0, 1) that depends only on the
// name's bytes; the document is a validation document when u < val_fraction. About val_fraction of
// the documents are validation documents, and adding or removing a file never moves another one.
bool is_validation_document(const std::string& name, double val_fraction);

struct CorpusSplit {
  std::vector<Document> train, validation;  // each in the input order
};

// Splits by is_validation_document. Guarantees, deterministically, >= 1 document on each side
// when there are >= 2 documents: if the hash rule put none in validation, the document with the
// smallest u moves there; if it put none in train, the one with the largest u moves to train.
// A corpus of exactly one document (e.g. one big text file) is cut inside the text instead: the
// first (1 - val_fraction) of its bytes, extended to the end of that line (or to a UTF-8 character
// boundary where the rest has no newline), become "<name>#train", the rest "<name>#validation".
// val_fraction must lie in (0, 1) (harness::InputError otherwise, naming data.val_fraction).
CorpusSplit split_corpus(std::vector<Document> documents, double val_fraction);

}  // namespace harness::data
