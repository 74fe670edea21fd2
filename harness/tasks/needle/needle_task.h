// Needle in a haystack (arXiv 2505.17083, Appendix G.2), the text side: no torch here.
//
// An example of `total` tokens is
//
//   <haystack with 3 needles at sentence boundaries> <question> | <answer>\n
//   \______________________ prompt ______________________________/ \_ target _/
//
//   needle   "The special magic <city> number is <7 digits>. "   (a sentence of its own)
//   question "\nThe special magic numbers, in order: "
//   answer   "city1=number1;city2=number2;city3=number3"           (order of appearance)
//
// The haystack is corpus documents (training documents for fine-tuning, validation documents for
// evaluation) concatenated from a random document on, cut so that prompt + target is exactly
// `total` tokens (byte tokenizer; with a subword tokenizer at most `total`). Each needle goes at a
// sentence boundary drawn uniformly (independently, so two may share one: they then follow each
// other); cities are drawn without replacement from needle_cities(), numbers uniformly from
// [1000000, 9999999]. Everything follows from the seed: make(total, seed) is reproducible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace harness::needle {

constexpr int kNeedles = 3;
extern const char* const kQuestion;  // "\nThe special magic numbers, in order: "

// The shipped list of world cities (ASCII names, at most 12 characters, no '=' or ';').
const std::vector<std::string>& needle_cities();

std::string needle_sentence(const std::string& city, const std::string& number);
std::string answer_text(const std::vector<std::string>& cities, const std::vector<std::string>& numbers);

struct Needle {
  std::string city, number;  // number: 7 digits
  size_t offset = 0;         // where its sentence starts in the prompt text (bytes)
};

struct Example {
  std::string haystack;            // the cut haystack, without needles
  std::string prompt;              // haystack with needles, then the question
  std::string answer;              // without the final newline
  std::vector<Needle> needles;     // in order of appearance
  std::vector<int32_t> tokens;     // encode(prompt) ++ encode(answer + "\n")
  int64_t prompt_tokens = 0;       // tokens[0, prompt_tokens) is the prompt
  int64_t target_tokens() const { return int64_t(tokens.size()) - prompt_tokens; }
};

// Sentence boundaries of `text`: 0, and every position p whose preceding byte is whitespace
// (' ' or '\n') and the byte before that '.', '!' or '?'.
std::vector<size_t> sentence_boundaries(const std::string& text);

using Encode = std::function<std::vector<int32_t>(const std::string&)>;

class Generator {
 public:
  // documents: the haystack source texts (non-empty in total); encode: the run's tokenizer.
  Generator(std::vector<std::string> documents, Encode encode);

  // Tokens an example needs besides its haystack, at most (the three longest cities).
  int64_t min_total_tokens() const;
  // Throws std::invalid_argument when total < min_total_tokens().
  Example make(int64_t total, uint64_t seed) const;

 private:
  std::string haystack_text(size_t first_document, size_t chars) const;
  std::vector<std::string> documents_;
  Encode encode_;
  size_t total_chars_ = 0;
};

// The loss mask of an example as a training sequence: input tokens[0, n−1), targets tokens[1, n);
// mask[i] = 1 when target i (= token i + 1) belongs to the target (answer + newline), else 0.
std::vector<float> target_mask(const Example& example);

// Scoring a generated answer (the text after the prompt). Only the first line counts; it is split
// at ';' into segments, and segment k (trimmed of spaces) must be "<city k>=<number k>" of the
// k-th needle in order of appearance: a needle is retrieved when both parts of its segment are
// exactly right. Segments after the third are ignored; a missing segment retrieves nothing.
struct Score {
  std::vector<bool> retrieved, city, number;  // per needle
  int correct() const;
};
Score score_answer(const std::string& output, const std::vector<Needle>& needles);

}  // namespace harness::needle
