// Passkey retrieval (needle.kind: passkey): the generator puts the key where it says, at the
// distance asked for, in contiguous corpus text; training distances cover their range; the
// teacher-forced scores equal a float64 log-softmax of the plain forward and greedy decoding's
// answer; config identity and errors; one tiny fine-tune + evaluation end to end.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <string>

#include "analysis/export/export_table.h"
#include "analysis/export_curves.h"
#include "attention/attention.h"
#include "common/errors.h"
#include "harness/config/schema.h"
#include "harness/tasks/needle/needle_run.h"
#include "harness/tasks/needle/passkey_eval.h"
#include "harness/tasks/needle/passkey_task.h"
#include "harness/tasks/task.h"
#include "models/gpt.h"
#include "results/run_file.h"
#include "test_models.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace harness::needle;

namespace {

// Token t of document k is 1000·k + position (every text token names where it came from); the
// pieces are bytes (< 256), so the two never mix.
std::vector<std::vector<int32_t>> numbered(const std::vector<int>& lengths) {
  std::vector<std::vector<int32_t>> out;
  for (size_t k = 0; k < lengths.size(); ++k) {
    out.emplace_back();
    for (int i = 0; i < lengths[k]; ++i) out.back().push_back(int32_t(1000 * (k + 1) + i));
  }
  return out;
}

std::vector<int32_t> encode_bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string as_text(const std::vector<int32_t>& tokens, int64_t from, int64_t to) {
  std::string s;
  for (int64_t i = from; i < to; ++i) s += tokens[size_t(i)] < 256 ? char(tokens[size_t(i)]) : '#';
  return s;
}

}  // namespace

TEST(PasskeyGenerator, PutsTheKeyAtTheDistanceAskedInContiguousText) {
  const PasskeyGenerator gen(numbered({300, 50, 700}), encode_bytes);
  const int64_t intro = 16, after = 15, question = 39;  // the pieces' lengths in bytes
  EXPECT_EQ(gen.intro_tokens(), intro);
  EXPECT_EQ(gen.max_key_tokens(), 5);
  EXPECT_EQ(gen.min_distance(), 5 + after + question);
  for (const int64_t d : {int64_t(59), int64_t(60), int64_t(128), int64_t(500)}) {
    for (uint64_t seed = 0; seed < 5; ++seed) {
      const auto e = gen.make_at_distance(d, 256, seed);
      const int64_t N = d + 128 + 1;
      ASSERT_EQ(int64_t(e.tokens.size()), N);
      EXPECT_EQ(e.distance, d);
      EXPECT_EQ(e.answer_position() - e.key_position, d);
      EXPECT_EQ(e.key.size(), 5u);
      EXPECT_GE(std::stoi(e.key), 10000);
      EXPECT_EQ(as_text(e.tokens, e.key_position - intro, e.key_position), kPasskeyIntro);
      EXPECT_EQ(as_text(e.tokens, e.key_position, e.key_position + 5), e.key);
      EXPECT_EQ(as_text(e.tokens, e.key_position + 5, e.key_position + 5 + after), kPasskeyAfter);
      EXPECT_EQ(as_text(e.tokens, e.answer_position() - question, e.answer_position()), kPasskeyQuestion);
      EXPECT_EQ(as_text(e.tokens, e.answer_position(), N), e.key);
      // The text before and after the key is one stretch of the corpus: consecutive positions of
      // the concatenated documents (300, 50, 700 tokens), wrapping at the end.
      std::vector<int32_t> text;
      for (const auto t : e.tokens)
        if (t >= 1000) text.push_back(t);
      EXPECT_EQ(int64_t(text.size()), N - intro - 5 - after - question - 5);
      const auto flat = [](int32_t t) { const int k = t / 1000 - 1; return (k > 0 ? 300 : 0) + (k > 1 ? 50 : 0) + t % 1000; };
      for (size_t i = 1; i < text.size(); ++i) EXPECT_EQ((flat(text[i - 1]) + 1) % 1050, flat(text[i])) << i;
    }
  }
  // The same seed, the same example; other seeds, other keys.
  EXPECT_EQ(gen.make_at_distance(128, 256, 3).tokens, gen.make_at_distance(128, 256, 3).tokens);
  std::set<std::string> keys;
  for (uint64_t seed = 0; seed < 20; ++seed) keys.insert(gen.make_at_distance(128, 256, seed).key);
  EXPECT_GE(keys.size(), 19u);
  EXPECT_THROW(gen.make(200, 58, 0), std::invalid_argument);   // shorter than the pieces
  EXPECT_THROW(gen.make(100, 90, 0), std::invalid_argument);   // no room for the intro
}

TEST(PasskeyGenerator, TrainingDistancesCoverTheirRangeAndTheMaskTheAnswer) {
  const PasskeyGenerator gen(numbered({400}), encode_bytes);
  const int64_t total = 257, lo = gen.min_distance(), hi = total - 16 - 5;
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    const auto e = gen.make_training(total, seed);
    ASSERT_EQ(int64_t(e.tokens.size()), total);
    ASSERT_GE(e.distance, lo);
    ASSERT_LE(e.distance, hi);
    seen.insert(e.distance);
    if (seed < 50) {
      const auto mask = answer_mask(e);
      ASSERT_EQ(int64_t(mask.size()), total - 1);
      for (int64_t i = 0; i < total - 1; ++i) EXPECT_EQ(mask[size_t(i)], i >= total - 1 - 5 ? 1.0f : 0.0f) << i;
    }
  }
  EXPECT_EQ(int64_t(seen.size()), hi - lo + 1);  // every distance that fits, drawn
}

// Exact match and log-probability against an independent path: the plain forward of each example
// alone at the same length, log-softmax in float64, and greedy decoding (the needle's decoder).
TEST(PasskeyScores, EqualAFloat64LogSoftmaxAndGreedyDecoding) {
  const PasskeyGenerator gen(numbered({2000}), encode_bytes);
  for (const std::string method : {"si+p-rope", "rope+ntk"}) {
    torch::manual_seed(5);
    models::GPTOptions o = test_support::small_gpt_options(128);
    o.attention.method = method;
    o.vocab_size = 4096;  // the numbered text's tokens
    models::GPT model(o);
    {
      torch::NoGradGuard ng;
      for (auto& p : model->parameters()) p.normal_(0, 0.3);
    }
    model->eval();
    std::vector<PasskeyExample> examples;
    for (uint64_t n = 0; n < 5; ++n) examples.push_back(gen.make_at_distance(150, 128, n));
    const auto scores = score_passkeys(model, examples, 2);  // batches of 2, 2, 1
    ASSERT_EQ(scores.exact.size(), 5u);
    for (size_t n = 0; n < examples.size(); ++n) {
      const auto& e = examples[n];
      const int64_t N = int64_t(e.tokens.size());
      std::vector<int64_t> wide(e.tokens.begin(), e.tokens.end());
      const auto tokens = torch::tensor(wide, torch::kLong).view({1, N});
      torch::NoGradGuard ng;
      const auto logits = model->forward(tokens.slice(1, 0, N - 1)).to(torch::kFloat64);  // (1, N − 1, V)
      double log_p = 0;
      for (int64_t i = e.answer_position(); i < N; ++i)
        log_p += torch::log_softmax(logits[0][i - 1], -1)[wide[size_t(i)]].item<double>();
      EXPECT_NEAR(scores.log_prob[n], log_p, 1e-9) << method << " example " << n;
      const std::vector<int32_t> prompt(e.tokens.begin(), e.tokens.begin() + e.answer_position());
      const auto decoded = greedy_decode(model, prompt, e.answer_tokens, -1, N - 1, false);
      // The KV-cache decoder at the same tight context (prompt + key − 1 tokens go through the model).
      EXPECT_EQ(greedy_decode(model, prompt, e.answer_tokens, -1, N - 1, true), decoded) << method << " " << n;
      const bool exact = decoded == std::vector<int32_t>(e.tokens.begin() + e.answer_position(), e.tokens.end());
      EXPECT_EQ(scores.exact[n], exact ? 1.0 : 0.0) << method << " example " << n;
      // The same example with greedy decoding's answer as its key: an exact match.
      PasskeyExample own = e;
      std::copy(decoded.begin(), decoded.end(), own.tokens.begin() + e.answer_position());
      EXPECT_EQ(score_passkeys(model, {own}, 1).exact.at(0), 1.0) << method << " example " << n;
    }
    // One token more than the context holds, or nothing to write: refused.
    const std::vector<int32_t> prompt(examples[0].tokens.begin(), examples[0].tokens.begin() + examples[0].answer_position());
    const int64_t N = int64_t(examples[0].tokens.size());
    EXPECT_THROW(greedy_decode(model, prompt, examples[0].answer_tokens, -1, N - 2, true), c10::Error);
    EXPECT_THROW(greedy_decode(model, prompt, 0, -1, N - 1, true), c10::Error);
  }
}

namespace {

std::string tiny_yaml(const fs::path& cache) {
  return std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" + cache.string() +
         "'}\nmodel: {layers: 1, d_model: 32, heads: 2}\n"
         "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
         "train: {context: 128, batch_size: 4, steps: 4, seed: 1}\n"
         "eval: {contexts: [L], windows: 2}\nrun: {threads: 2, checkpoint_every: 2}\n";
}

harness::train::TrainOutcome run(const std::string& yaml, const fs::path& dir) {
  harness::train::TrainOptions o;
  o.run_dir = dir.string();
  o.progress_bar = 0;
  return harness::run_task(harness::config::load_run_config_text(yaml, "t.yaml", "t"), o);
}

std::string id_of(const std::string& yaml) {
  return harness::config::config_hash(harness::config::load_run_config_text(yaml, "t.yaml", "t").config);
}

}  // namespace

TEST(PasskeyConfig, KindKeepsNeedleIdsAndReadsItsOwnKeys) {
  const std::string needle = tiny_yaml("/tmp/c") + "task: needle\ninit_from: runs\n";
  EXPECT_EQ(id_of(needle + "needle: {kind: needle}\n"), id_of(needle));
  EXPECT_EQ(id_of(needle + "needle: {distances: [L]}\n"), id_of(needle));  // unread by the needle
  const std::string passkey = needle + "needle: {kind: passkey, ";
  EXPECT_NE(id_of(passkey + "distances: [L]}\n"), id_of(passkey + "distances: [2L]}\n"));
  EXPECT_EQ(id_of(passkey + "contexts: [L]}\n"), id_of(passkey + "contexts: [2L]}\n"));  // unread by the passkey
  try {
    harness::config::load_run_config_text(passkey + "distances: [L/3]}\n", "t.yaml", "t");
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needle.distances: distance 'L/3' resolves to"), std::string::npos) << e.what();
  }
}

TEST(PasskeyRun, FineTunesEvaluatesAtEachDistanceAndExports) {
  test_support::TempDir tmp;
  const std::string base = tiny_yaml(tmp.path / "cache");
  ASSERT_EQ(run(base, tmp.path / "runs" / id_of(base)).state, results::RunState::kDone);
  const std::string passkey = base + "task: needle\ninit_from: '" + (tmp.path / "runs").string() + "'\n" +
                              "needle: {kind: passkey, steps: 4, warmup_steps: 1, cooldown_steps: 1, batch_size: 2, "
                              "examples: 3, distances: [L/2, 2L]}\n";
  ASSERT_EQ(run(passkey, tmp.path / "p").state, results::RunState::kDone);
  const auto r = results::read_run_file((tmp.path / "p" / "run.h5").string());
  EXPECT_EQ(r.train.step.size(), 4u);
  ASSERT_EQ(r.needle.size(), 2u);
  for (const int64_t d : {64, 256}) {
    const auto& g = r.needle.at(d);
    EXPECT_EQ(std::get<int64_t>(g.attributes.at("distance")), d);
    EXPECT_EQ(std::get<int64_t>(g.attributes.at("example_tokens")), d + 64 + 1);
    const auto& exact = g.arrays.at("exact").values;
    ASSERT_EQ(exact.size(), 3u);
    EXPECT_DOUBLE_EQ(g.arrays.at("accuracy").values.at(0), (exact[0] + exact[1] + exact[2]) / 3);
    const auto& log_prob = g.arrays.at("log_prob").values;
    for (const double x : log_prob) EXPECT_LT(x, 0.0);
    const auto value = analysis::metric_value(r, analysis::parse_metric("needle/mean_log_prob"), d);
    ASSERT_TRUE(value.has_value());
    EXPECT_NEAR(*value, (log_prob[0] + log_prob[1] + log_prob[2]) / 3, 1e-12);
  }
  // The figure's CSV: accuracy at d / L = 0.5 and 2, as the run file holds it.
  analysis::CurvesOptions curves;
  curves.out_dir = (tmp.path / "figures").string();
  analysis::export_curves((tmp.path / "p").string(), curves);
  const std::string csv = test_support::read_text(tmp.path / "figures" / "passkey_vs_distance.csv");
  EXPECT_EQ(csv.rfind("distance_over_L,", 0), 0u) << csv;
  for (const auto& [x, d] : std::vector<std::pair<std::string, int64_t>>{{"0.5", 64}, {"2", 256}})
    EXPECT_NE(csv.find(fmt::format("\n{},{:.9g}", x, r.needle.at(d).arrays.at("accuracy").values.at(0))), std::string::npos)
        << x << "\n" << csv;
  EXPECT_TRUE(fs::exists(tmp.path / "figures" / "passkey_log_prob_vs_distance.csv"));
  // A distance shorter than the key, its sentence and the question: an error at the key, before any work.
  std::string short_distance = passkey;
  short_distance.replace(short_distance.find("[L/2, 2L]"), 9, "[10]");
  try {
    run(short_distance, tmp.path / "p2");
    FAIL();
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needle.distances: distance 10 is shorter than"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.path / "p2" / "run.h5"));
}
