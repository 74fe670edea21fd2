#include "harness/data/sentencepiece_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace harness::data::spm {

namespace {

struct Module {
  int (*train)(const char* const*, const size_t*, size_t, const char* const*, const char* const*,
               size_t, char**, size_t*, char**);
  void* (*processor_new)(const char*, size_t, char**);
  void (*processor_delete)(void*);
  int (*encode)(void*, const char*, size_t, int**, size_t*, char**);
  int (*decode)(void*, const int*, size_t, char**, size_t*, char**);
  int (*piece_size)(void*);
  int (*eos_id)(void*);
  void (*free)(void*);
};

// Where to look: $HARNESS_SPM_MODULE, beside the executable, then where the build put it.
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("HARNESS_SPM_MODULE")) out.emplace_back(env);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / "libharness_sentencepiece.so").string());
  out.emplace_back(HARNESS_SPM_MODULE);
  return out;
}

const Module& module() {
  static const Module m = [] {
    void* lib = nullptr;
    std::string errors;
    for (const auto& path : candidates()) {
      if (!std::filesystem::exists(path)) continue;
      // Private symbol scope: the module's protobuf must not meet LibTorch's.
      lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (lib) break;
      errors += std::string(" ") + ::dlerror();
    }
    if (!lib)
      throw std::runtime_error("cannot load the SentencePiece module libharness_sentencepiece.so "
                               "(set HARNESS_SPM_MODULE to its path)" + errors);
    const auto sym = [lib](const char* name) {
      void* p = ::dlsym(lib, name);
      if (!p) throw std::runtime_error(std::string("SentencePiece module lacks ") + name);
      return p;
    };
    Module r;
    r.train = reinterpret_cast<decltype(r.train)>(sym("hspm_train"));
    r.processor_new = reinterpret_cast<decltype(r.processor_new)>(sym("hspm_processor_new"));
    r.processor_delete = reinterpret_cast<decltype(r.processor_delete)>(sym("hspm_processor_delete"));
    r.encode = reinterpret_cast<decltype(r.encode)>(sym("hspm_encode"));
    r.decode = reinterpret_cast<decltype(r.decode)>(sym("hspm_decode"));
    r.piece_size = reinterpret_cast<decltype(r.piece_size)>(sym("hspm_piece_size"));
    r.eos_id = reinterpret_cast<decltype(r.eos_id)>(sym("hspm_eos_id"));
    r.free = reinterpret_cast<decltype(r.free)>(sym("hspm_free"));
    return r;
  }();
  return m;
}

[[noreturn]] void raise(const char* what, char* error) {
  std::string message = std::string(what) + ": " + (error ? error : "unknown error");
  module().free(error);
  throw std::runtime_error(message);
}

}  // namespace

std::string train(const std::vector<std::string>& sentences,
                  const std::unordered_map<std::string, std::string>& kwargs) {
  std::vector<const char*> data;
  std::vector<size_t> lengths;
  for (const auto& s : sentences) {
    data.push_back(s.data());
    lengths.push_back(s.size());
  }
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : kwargs) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  char* model = nullptr;
  size_t model_len = 0;
  char* error = nullptr;
  if (module().train(data.data(), lengths.data(), data.size(), keys.data(), values.data(),
                     keys.size(), &model, &model_len, &error))
    raise("SentencePiece training failed", error);
  std::string out(model, model_len);
  module().free(model);
  return out;
}

Processor::Processor(const std::string& serialized_model) {
  char* error = nullptr;
  handle_ = module().processor_new(serialized_model.data(), serialized_model.size(), &error);
  if (!handle_) raise("cannot load the SentencePiece model", error);
}

Processor::~Processor() { module().processor_delete(handle_); }

std::vector<int> Processor::encode(std::string_view text) const {
  int* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  if (module().encode(handle_, text.data(), text.size(), &ids, &n, &error))
    raise("SentencePiece encode failed", error);
  std::vector<int> out(ids, ids + n);
  module().free(ids);
  return out;
}

std::string Processor::decode(const std::vector<int>& ids) const {
  char* text = nullptr;
  size_t len = 0;
  char* error = nullptr;
  if (module().decode(handle_, ids.data(), ids.size(), &text, &len, &error))
    raise("SentencePiece decode failed", error);
  std::string out(text, len);
  module().free(text);
  return out;
}

int Processor::piece_size() const { return module().piece_size(handle_); }
int Processor::eos_id() const { return module().eos_id(handle_); }

}  // namespace harness::data::spm
