// SentencePiece, loaded privately from the harness_sentencepiece module on first use (see
// harness/data/spm_module/sentencepiece_module.cpp for why it cannot be linked directly).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace harness::data::spm {

// Trains a model on in-memory sentences with SentencePiece trainer flags (without leading --);
// returns the serialized model. Throws std::runtime_error with SentencePiece's status.
std::string train(const std::vector<std::string>& sentences,
                  const std::unordered_map<std::string, std::string>& kwargs);

class Processor {
 public:
  explicit Processor(const std::string& serialized_model);  // throws std::runtime_error
  ~Processor();
  Processor(const Processor&) = delete;
  Processor& operator=(const Processor&) = delete;

  std::vector<int> encode(std::string_view text) const;
  std::string decode(const std::vector<int>& ids) const;
  int piece_size() const;
  int eos_id() const;

 private:
  void* handle_;
};

}  // namespace harness::data::spm
