// SentencePiece behind a C interface, built as a separate module and loaded with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND) by harness/data/sentencepiece_library.cpp.
//
// Why: Debian's libsentencepiece embeds protobuf 3.14 and exports its symbols; LibTorch loads the
// system libprotobuf 3.21. Linked into one process they interpose on each other and the program
// crashes before main(). Loaded privately, each keeps its own protobuf.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

char* copy_out(const std::string& s, size_t* len = nullptr) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  if (len) *len = s.size();
  return out;
}

int fail(const sentencepiece::util::Status& status, char** error) {
  *error = copy_out(status.ToString());
  return 1;
}

class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(std::vector<std::string> sentences) : sentences_(std::move(sentences)) {}
  bool done() const override { return index_ >= sentences_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return sentences_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> sentences_;
  size_t index_ = 0;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void hspm_free(void* p) { std::free(p); }

__attribute__((visibility("default"))) int hspm_train(const char* const* sentences,
                                                      const size_t* lengths, size_t n,
                                                      const char* const* keys,
                                                      const char* const* values, size_t n_kwargs,
                                                      char** model, size_t* model_len,
                                                      char** error) {
  std::vector<std::string> input;
  input.reserve(n);
  for (size_t i = 0; i < n; ++i) input.emplace_back(sentences[i], lengths[i]);
  std::unordered_map<std::string, std::string> kwargs;
  for (size_t i = 0; i < n_kwargs; ++i) kwargs[keys[i]] = values[i];
  VectorSentenceIterator iterator(std::move(input));
  std::string proto;
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &iterator, &proto);
  if (!status.ok()) return fail(status, error);
  *model = copy_out(proto, model_len);
  return 0;
}

__attribute__((visibility("default"))) void* hspm_processor_new(const char* proto, size_t len,
                                                                char** error) {
  auto* p = new sentencepiece::SentencePieceProcessor();
  const auto status = p->LoadFromSerializedProto(std::string(proto, len));
  if (!status.ok()) {
    fail(status, error);
    delete p;
    return nullptr;
  }
  return p;
}

__attribute__((visibility("default"))) void hspm_processor_delete(void* p) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(p);
}

__attribute__((visibility("default"))) int hspm_encode(void* p, const char* text, size_t len,
                                                       int** ids, size_t* n, char** error) {
  std::vector<int> out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(p)->Encode(
      std::string(text, len), &out);
  if (!status.ok()) return fail(status, error);
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.size() + 1)));
  std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  *n = out.size();
  return 0;
}

__attribute__((visibility("default"))) int hspm_decode(void* p, const int* ids, size_t n,
                                                       char** text, size_t* len, char** error) {
  std::string out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(p)->Decode(
      std::vector<int>(ids, ids + n), &out);
  if (!status.ok()) return fail(status, error);
  *text = copy_out(out, len);
  return 0;
}

__attribute__((visibility("default"))) int hspm_piece_size(void* p) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(p)->GetPieceSize();
}

__attribute__((visibility("default"))) int hspm_eos_id(void* p) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(p)->eos_id();
}

}  // extern "C"
