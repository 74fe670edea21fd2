// Needle in a haystack: the generator puts the needles where it says (parsed back from the text),
// the loss mask covers the answer tokens exactly, greedy decoding with the KV cache equals decoding
// by full recomputation, scoring of hand-made outputs, config identity and the init_from errors,
// and one tiny fine-tune + evaluation end to end.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "analysis/export/export_table.h"
#include "analysis/run_set.h"
#include "attention/attention.h"
#include "harness/config/schema.h"
#include "harness/data/tokenizer.h"
#include "harness/tasks/needle/needle_run.h"
#include "harness/tasks/needle/needle_task.h"
#include "harness/tasks/task.h"
#include "harness/train/trainer.h"
#include "common/errors.h"
#include "models/gpt.h"
#include "results/run_file.h"
#include "sweeps/plan.h"
#include "sweeps/run_status.h"
#include "sweeps/runner.h"
#include "sweeps/sweep_file.h"
#include "test_models.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace harness::needle;

namespace {

std::vector<int32_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<std::string> documents() {
  return {"We hold these truths. All men are equal! Is it so? It is.\nA new line starts here. ",
          "Short one. Another sentence follows, and then another one ends. Done.",
          "No boundary inside this document at all"};
}

struct Parsed {
  size_t offset;
  std::string city, number;
};

std::vector<Parsed> parse_needles(const std::string& prompt) {
  static const std::regex needle(R"(The special magic ([A-Za-z ]+?) number is ([0-9]{7})\. )");
  std::vector<Parsed> out;
  for (auto it = std::sregex_iterator(prompt.begin(), prompt.end(), needle); it != std::sregex_iterator(); ++it)
    out.push_back({size_t(it->position(0)), (*it)[1].str(), (*it)[2].str()});
  return out;
}

}  // namespace

TEST(NeedleGenerator, PutsNeedlesWhereItSays) {
  const Generator gen(documents(), bytes);
  // Bytes: three longest cities (12, 11, 11) in 38-byte sentence frames + separator, the 38-byte
  // question, and "c=1234567;c=1234567;c=1234567\n".
  EXPECT_EQ(gen.min_total_tokens(), 3 * 38 + 34 + 38 + (34 + 3 * 8 + 2 + 1));
  for (const int64_t total : {gen.min_total_tokens(), int64_t(256), int64_t(1024)}) {
    for (uint64_t seed = 0; seed < 40; ++seed) {
      const Example e = gen.make(total, seed);
      ASSERT_EQ(int64_t(e.tokens.size()), total) << "byte tokens: exact length";
      ASSERT_EQ(e.tokens, bytes(e.prompt + e.answer + "\n"));
      ASSERT_EQ(e.prompt_tokens, int64_t(e.prompt.size()));
      const auto parsed = parse_needles(e.prompt);
      ASSERT_EQ(parsed.size(), 3u) << e.prompt;
      std::set<std::string> cities;
      std::string answer, stripped = e.prompt;
      size_t removed = 0;
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(parsed[k].offset, e.needles[k].offset);
        EXPECT_EQ(parsed[k].city, e.needles[k].city);
        EXPECT_EQ(parsed[k].number, e.needles[k].number);
        const int64_t number = std::stoll(parsed[k].number);
        EXPECT_TRUE(number >= 1000000 && number <= 9999999);
        cities.insert(parsed[k].city);
        answer += (k ? ";" : "") + parsed[k].city + "=" + parsed[k].number;
        // In haystack coordinates the needle starts at a sentence boundary.
        const size_t at = parsed[k].offset - removed;
        const auto bounds = sentence_boundaries(e.haystack);
        EXPECT_TRUE(std::find(bounds.begin(), bounds.end(), at) != bounds.end())
            << "needle " << k << " at " << at << " in '" << e.haystack << "'";
        const size_t len = needle_sentence(parsed[k].city, parsed[k].number).size() + 1;
        stripped.erase(parsed[k].offset - removed, len);
        removed += len;
      }
      EXPECT_EQ(cities.size(), 3u) << "three distinct cities";
      EXPECT_EQ(e.answer, answer) << "order of appearance";
      EXPECT_EQ(stripped, e.haystack + kQuestion) << "the haystack is intact around the needles";
      // The haystack is the documents concatenated (joined by newlines) from some document on.
      std::string all;
      for (int r = 0; r < 2000 && all.size() < 4 * e.haystack.size() + 400; ++r)
        for (const auto& d : documents()) all += (all.empty() ? "" : "\n") + d;
      EXPECT_NE(all.find(e.haystack), std::string::npos);
      // Reproducible.
      const Example again = gen.make(total, seed);
      EXPECT_EQ(again.prompt, e.prompt);
      EXPECT_EQ(again.tokens, e.tokens);
    }
  }
  EXPECT_NE(gen.make(512, 1).prompt, gen.make(512, 2).prompt);
  EXPECT_THROW(gen.make(gen.min_total_tokens() - 1, 0), std::invalid_argument);
}

TEST(NeedleGenerator, PositionsAreUniformOverSentenceBoundaries) {
  // One long document of equal sentences: boundary b has index b; each needle's index should be
  // uniform on [0, n): mean (n − 1)/2, variance (n² − 1)/12.
  std::string doc;
  for (int i = 0; i < 200; ++i) doc += "Abc def. ";
  const Generator gen({doc}, bytes);
  const int64_t total = 600;
  double sum = 0, sum2 = 0;
  int count = 0;
  double n_bounds = 0;
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    const Example e = gen.make(total, seed);
    const auto bounds = sentence_boundaries(e.haystack);
    n_bounds = double(bounds.size());
    size_t removed = 0;
    for (const auto& needle : e.needles) {
      const size_t at = needle.offset - removed;
      removed += needle_sentence(needle.city, needle.number).size() + 1;
      const double index = double(std::find(bounds.begin(), bounds.end(), at) - bounds.begin());
      sum += index;
      sum2 += index * index;
      ++count;
    }
  }
  const double mean = sum / count, var = sum2 / count - mean * mean;
  const double want_mean = (n_bounds - 1) / 2, want_var = (n_bounds * n_bounds - 1) / 12;
  EXPECT_NEAR(mean, want_mean, 4 * std::sqrt(want_var / count)) << "boundaries: " << n_bounds;
  EXPECT_NEAR(var / want_var, 1.0, 0.08);
}

TEST(NeedleMask, CoversTheAnswerTokensExactly) {
  const Generator gen(documents(), bytes);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const Example e = gen.make(300, seed);
    const auto mask = target_mask(e);
    ASSERT_EQ(mask.size(), e.tokens.size() - 1);
    std::string covered;
    for (size_t i = 0; i < mask.size(); ++i) {
      ASSERT_TRUE(mask[i] == 0.0f || mask[i] == 1.0f);
      if (mask[i] == 1.0f) covered += char(e.tokens[i + 1]);  // target i is token i + 1
    }
    EXPECT_EQ(covered, e.answer + "\n");
    // The covered targets are the last ones, contiguous.
    for (size_t i = 0; i < mask.size(); ++i)
      EXPECT_EQ(mask[i], i + 1 >= e.prompt.size() ? 1.0f : 0.0f);
  }
}

namespace {

models::GPT random_gpt(const std::string& method, int64_t L, uint64_t seed) {
  torch::manual_seed(seed);
  models::GPTOptions o = test_support::small_gpt_options(L);
  o.attention.method = method;
  o.attention.parameters[attention::Parameter::kTau] = L / 400.0 * 10;
  o.attention.parameters[attention::Parameter::kPRopeBase] = L / 4.0;
  models::GPT model(o);
  torch::NoGradGuard ng;
  for (auto& p : model->parameters()) p.normal_(0, 0.3);  // no zero-initialised head: real argmaxes
  model->eval();
  return model;
}

}  // namespace

TEST(NeedleMask, MaskedLossIsTheMeanNllOfTheMaskedTargets) {
  auto model = random_gpt("si+p-rope", 32, 1);
  torch::manual_seed(7);
  const auto tokens = torch::randint(0, 256, {3, 25}, torch::kLong);
  const auto inputs = tokens.slice(1, 0, 24), targets = tokens.slice(1, 1, 25);
  auto mask = torch::zeros({3, 24});
  mask.slice(1, 17, 24).fill_(1.0f);
  mask[1].slice(0, 20, 24).fill_(0.0f);  // a padded row
  const double loss = masked_loss(model, inputs, targets, mask).item<double>();
  // Naively: −log softmax of each masked target, averaged.
  torch::NoGradGuard ng;
  const auto logp = torch::log_softmax(model->forward(inputs).to(torch::kDouble), -1);
  double sum = 0;
  int n = 0;
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 24; ++t)
      if (mask[b][t].item<float>() == 1.0f) {
        sum -= logp[b][t][targets[b][t].item<int64_t>()].item<double>();
        ++n;
      }
  EXPECT_EQ(n, 7 + 3 + 7);
  EXPECT_NEAR(loss, sum / n, 1e-5);
}

class NeedleDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(NeedleDecode, KvCacheEqualsFullRecomputation) {
  const int64_t L = 16;
  auto model = random_gpt(GetParam(), L, 3);
  torch::manual_seed(11);
  const auto p = torch::randint(1, 256, {21}, torch::kLong);
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < p.size(0); ++i) prompt.push_back(int32_t(p[i].item<int64_t>()));
  for (const int64_t context : {int64_t(21 + 13), int64_t(96)}) {  // beyond L: NTK, YaRN change
    const auto cached = greedy_decode(model, prompt, 13, -1, context, true);
    const auto full = greedy_decode(model, prompt, 13, -1, context, false);
    EXPECT_EQ(cached, full) << "context " << context;
    EXPECT_EQ(cached.size(), 13u);
    // Logits row by row: the cached step against the whole sequence recomputed.
    std::vector<int64_t> all(prompt.begin(), prompt.end());
    all.insert(all.end(), cached.begin(), cached.end());
    const auto tokens = torch::tensor(all, torch::kLong).view({1, -1});
    torch::NoGradGuard ng;
    const auto reference = context == int64_t(all.size())
                               ? model->forward(tokens)            // no context override at all
                               : model->forward(tokens, context);  // (1, 34, V)
    models::KVCache cache(context);
    auto got = model->forward_cached(tokens.slice(1, 0, 21), cache);  // prefill
    EXPECT_TRUE(torch::allclose(got, reference.slice(1, 0, 21), 1e-4, 1e-4));
    for (int64_t i = 21; i < int64_t(all.size()); ++i) {
      got = model->forward_cached(tokens.slice(1, i, i + 1), cache);
      EXPECT_LT((got - reference.slice(1, i, i + 1)).abs().max().item<double>(), 1e-4)
          << "position " << i << ", context " << context;
    }
    EXPECT_EQ(cache.length(), int64_t(all.size()));
  }
  // The stop token ends decoding after it is produced.
  const auto free_run = greedy_decode(model, prompt, 13, -1, 96, true);
  const auto stopped = greedy_decode(model, prompt, 13, free_run[4], 96, true);
  const size_t first = size_t(std::find(free_run.begin(), free_run.end(), free_run[4]) - free_run.begin());
  EXPECT_EQ(stopped, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
}

INSTANTIATE_TEST_SUITE_P(AllMethods, NeedleDecode, ::testing::ValuesIn(attention::preset_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(NeedleDecode, ContextOverrideOfTheWholeLengthIsThePlainForward) {
  for (const auto& method : attention::preset_names()) {
    auto model = random_gpt(method, 16, 5);
    const auto tokens = torch::randint(0, 256, {2, 40}, torch::kLong);
    torch::NoGradGuard ng;
    EXPECT_TRUE(torch::equal(model->forward(tokens), model->forward(tokens, 40))) << method;
  }
}

TEST(NeedleScore, HandMadeOutputs) {
  const std::vector<Needle> needles = {{"Paris", "1234567", 0}, {"Lima", "7654321", 50}, {"Oslo", "1111111", 90}};
  const auto check = [&](const std::string& out, std::vector<bool> retrieved, std::vector<bool> city,
                         std::vector<bool> number) {
    const Score s = score_answer(out, needles);
    EXPECT_EQ(s.retrieved, retrieved) << "'" << out << "'";
    EXPECT_EQ(s.city, city) << "'" << out << "'";
    EXPECT_EQ(s.number, number) << "'" << out << "'";
    EXPECT_EQ(s.correct(), int(std::count(retrieved.begin(), retrieved.end(), true)));
  };
  const bool T = true, F = false;
  check("Paris=1234567;Lima=7654321;Oslo=1111111", {T, T, T}, {T, T, T}, {T, T, T});
  check("Paris=1234567;Lima=7654321;Oslo=1111111\nThe special", {T, T, T}, {T, T, T}, {T, T, T});
  check("Paris=1234567;Lima=7654321;Oslo=1111111;Rome=2222222", {T, T, T}, {T, T, T}, {T, T, T});
  check(" Paris = 1234567 ;Lima=7654321;Oslo=1111111", {T, T, T}, {T, T, T}, {T, T, T});
  check("Paris=1234567;Lima=7654320;Oslo=1111111", {T, F, T}, {T, T, T}, {T, F, T});      // one digit
  check("Paris=1234567;Lama=7654321;Oslo=1111111", {T, F, T}, {T, F, T}, {T, T, T});      // one city
  check("Lima=7654321;Paris=1234567;Oslo=1111111", {F, F, T}, {F, F, T}, {F, F, T});      // order
  check("Paris=1234567;Lima=7654321", {T, T, F}, {T, T, F}, {T, T, F});                   // missing
  check("Paris=1234567;Lima=7654321;Oslo=1111111 and so on", {T, T, F}, {T, T, T}, {T, T, F});
  check("Paris1234567;Lima=7654321;Oslo=", {F, T, F}, {F, T, T}, {F, T, F});
  check("", {F, F, F}, {F, F, F}, {F, F, F});
  check("\nParis=1234567;Lima=7654321;Oslo=1111111", {F, F, F}, {F, F, F}, {F, F, F});  // first line only
}

TEST(NeedleConfig, RunsWithoutTheTaskKeepTheirIds) {
  using harness::config::config_hash;
  using harness::config::load_run_config_text;
  // Frozen: the ids these configs had before task, init_from and needle.* existed.
  EXPECT_EQ(config_hash(load_run_config_text("name: x\n", "a.yaml").config), "af89f945b51470e2");
  const std::string alibi = "attention: {method: alibi}\ntrain: {context: 128}\noptim: {name: adamw}\n";
  EXPECT_EQ(config_hash(load_run_config_text(alibi, "b.yaml").config), "ee0e89d3af814619");
  EXPECT_EQ(config_hash(load_run_config_text("task: lm\nneedle: {steps: 7, examples: 3}\n", "c.yaml").config),
            "af89f945b51470e2");
  // A needle config's pretraining run is the same config with task: lm.
  const auto needle = load_run_config_text(alibi + "task: needle\ninit_from: runs/x\n", "d.yaml");
  EXPECT_NE(config_hash(needle.config), "ee0e89d3af814619");
  EXPECT_EQ(config_hash(pretraining_config(needle.config)), "ee0e89d3af814619");
  // The canonical text of a needle run loads back to the same run.
  const auto text = harness::config::canonical_text(needle.config, false);
  EXPECT_EQ(config_hash(load_run_config_text(text, "canonical").config), config_hash(needle.config));
  const auto lm_text = harness::config::canonical_text(load_run_config_text("", "e").config, false);
  EXPECT_EQ(config_hash(load_run_config_text(lm_text, "canonical").config), "af89f945b51470e2");
}

TEST(NeedleConfig, ErrorsAreLocated) {
  using harness::config::load_run_config_text;
  const auto message = [](const std::string& yaml) {
    try {
      load_run_config_text(yaml, "n.yaml");
    } catch (const harness::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("name: a\ntask: needle\n"),
            "n.yaml:2:7: task: task: needle fine-tunes a pretrained run: set init_from to its run "
            "directory, or to the directory of runs that holds it (a sweep's)");
  EXPECT_EQ(message("task: nedle\n"), "n.yaml:1:7: task: 'nedle' is not valid; expected one of: lm, needle");
  EXPECT_EQ(message("task: needle\ninit_from: r\nneedle: {steps: 10, warmup_steps: 6, cooldown_steps: 5}\n"),
            "n.yaml:3:54: needle.cooldown_steps: needle.warmup_steps + needle.cooldown_steps (6 + 5) "
            "must not exceed needle.steps (10)");
  EXPECT_EQ(message("init_from: r\n"),
            "n.yaml:1:12: init_from: init_from is read only with task: needle (this run trains from scratch)");
  EXPECT_NE(message("needle: {contexts: [L, 2.5]}\n").find("n.yaml:1:24: needle.contexts"), std::string::npos);
}

namespace {

// Drops the digit 7: a vocabulary that cannot write every needle number.
struct NoSevens final : harness::data::Tokenizer {
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> out;
    for (const char ch : text)
      if (ch != '7') out.push_back(static_cast<unsigned char>(ch));
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return {ids.begin(), ids.end()}; }
  int64_t vocab_size() const override { return 256; }
  std::string name() const override { return "no-sevens"; }
  int32_t separator_id() const override { return 0; }
};

std::string tiny_yaml(const fs::path& cache, int64_t L) {
  return std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" + cache.string() +
         "'}\nmodel: {layers: 1, d_model: 32, heads: 2}\n"
         "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
         "train: {context: " + std::to_string(L) + ", batch_size: 4, steps: 4, seed: 1}\n"
         "eval: {contexts: [L], windows: 2}\nrun: {threads: 2, checkpoint_every: 2}\n";
}

harness::train::TrainOutcome run(const std::string& yaml, const fs::path& dir, int64_t stop_after = 0) {
  harness::train::TrainOptions o;
  o.run_dir = dir.string();
  o.progress_bar = 0;
  o.stop_after_steps = stop_after;
  return harness::run_task(harness::config::load_run_config_text(yaml, "t.yaml", "t"), o);
}

std::string error_of(const std::string& yaml, const fs::path& dir) {
  try {
    run(yaml, dir);
  } catch (const harness::InputError& e) {
    EXPECT_FALSE(fs::exists(dir)) << "nothing written before the error";
    return e.what();
  }
  return "no error";
}

const char* kNeedleKeys =
    "task: needle\nneedle: {steps: 4, warmup_steps: 1, cooldown_steps: 1, batch_size: 2, "
    "examples: 3, contexts: [L, 2L]}\n";

}  // namespace

TEST(NeedleRun, BadInitFromIsAnErrorBeforeAnyWork) {
  EXPECT_NE(vocabulary_problem(NoSevens()).find("cannot express the needle text"), std::string::npos);
  EXPECT_EQ(vocabulary_problem(harness::data::ByteTokenizer()), "");
  EXPECT_NE(vocabulary_problem(harness::data::PretokenizedTokenizer()).find("pretokenized"), std::string::npos);

  test_support::TempDir tmp;
  const std::string base = tiny_yaml(tmp.path / "cache", 256);
  const std::string needle = base + kNeedleKeys;
  auto e = error_of(needle + "init_from: '" + (tmp.path / "nothing").string() + "'\n", tmp.path / "n1");
  EXPECT_NE(e.find("init_from: '"), std::string::npos) << e;
  EXPECT_NE(e.find("is not a directory"), std::string::npos) << e;
  fs::create_directories(tmp.path / "runs");
  e = error_of(needle + "init_from: '" + (tmp.path / "runs").string() + "'\n", tmp.path / "n2");
  const std::string id = harness::config::config_hash(harness::config::load_run_config_text(base, "b").config);
  EXPECT_NE(e.find("holds no run " + id), std::string::npos) << e;
  // An unfinished pretraining run.
  ASSERT_EQ(run(base, tmp.path / "runs" / id, 2).state, results::RunState::kInterrupted);
  e = error_of(needle + "init_from: '" + (tmp.path / "runs").string() + "'\n", tmp.path / "n3");
  EXPECT_NE(e.find("the run is interrupted at step 2"), std::string::npos) << e;
  EXPECT_NE(e.find("t.yaml:"), std::string::npos) << e;
  // A finished run of another config, named by its directory.
  const std::string other = tiny_yaml(tmp.path / "cache", 64);
  ASSERT_EQ(run(other, tmp.path / "short").state, results::RunState::kDone);
  e = error_of(needle + "init_from: '" + (tmp.path / "short").string() + "'\n", tmp.path / "n4");
  EXPECT_NE(e.find("train.context: 256 (pretrained: 64)"), std::string::npos) << e;
  // The same config at L = 64: the prompt does not fit.
  e = error_of(other + kNeedleKeys + "init_from: '" + (tmp.path / "short").string() + "'\n", tmp.path / "n5");
  EXPECT_NE(e.find("train.context: a needle example needs at least"), std::string::npos) << e;
}

TEST(NeedleRun, FineTunesEvaluatesAndExports) {
  test_support::TempDir tmp;
  const std::string base = tiny_yaml(tmp.path / "cache", 256);
  const std::string id = harness::config::config_hash(harness::config::load_run_config_text(base, "b").config);
  ASSERT_EQ(run(base, tmp.path / "runs" / id).state, results::RunState::kDone);
  const std::string needle = base + kNeedleKeys + "init_from: '" + (tmp.path / "runs").string() + "'\n";
  const auto outcome = run(needle, tmp.path / "needle" / "n");
  ASSERT_EQ(outcome.state, results::RunState::kDone);
  const auto r = results::read_run_file((tmp.path / "needle" / "n" / "run.h5").string());
  EXPECT_EQ(r.train.step.size(), 4u);
  EXPECT_EQ(r.config.at("init_from_id"), id);
  ASSERT_EQ(r.needle.size(), 2u);
  std::map<int64_t, double> accuracy;
  for (const int64_t T : {256, 512}) {
    const auto& g = r.needle.at(T);
    const auto& retrieved = g.arrays.at("retrieved");
    EXPECT_EQ(retrieved.shape, (std::vector<int64_t>{3, 3}));
    double sum = 0;
    for (double x : retrieved.values) {
      EXPECT_TRUE(x == 0 || x == 1);
      sum += x;
    }
    EXPECT_DOUBLE_EQ(g.arrays.at("accuracy").values.at(0), sum / 9);
    EXPECT_EQ(std::get<int64_t>(g.attributes.at("examples")), 3);  // a number, not "3"
    const auto value = analysis::metric_value(r, analysis::parse_metric("needle/accuracy"), T);
    ASSERT_TRUE(value.has_value());
    EXPECT_DOUBLE_EQ(*value, sum / 9);
    accuracy[T] = sum / 9;
  }
  // What `sweep status` and the sweep's "done" line show: fine-tuning steps and accuracy.
  harness::sweeps::PlannedRun planned;
  planned.loaded = harness::config::load_run_config_text(needle, "t.yaml", "t");
  planned.run_dir = (tmp.path / "needle" / "n").string();
  const auto status = harness::sweeps::inspect_run(planned);
  EXPECT_EQ(status.state, harness::sweeps::RunState::kDone);
  EXPECT_EQ(status.total, 4);
  EXPECT_EQ(status.needle_accuracy, accuracy);
  // Running it again without --resume is refused (as a training run's), naming the state.
  try {
    run(needle, tmp.path / "needle" / "n");
    ADD_FAILURE() << "a done needle run was overwritten silently";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("already holds a run (state: done)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.config.at("hash"), harness::config::config_hash(
                                     harness::config::load_run_config_text(needle, "t").config));
  // Resuming a done needle run does nothing.
  harness::train::TrainOptions o;
  o.run_dir = (tmp.path / "needle" / "n").string();
  o.resume = true;
  o.progress_bar = 0;
  EXPECT_EQ(harness::run_task(harness::config::load_run_config_text(needle, "t.yaml", "t"), o).state,
            results::RunState::kDone);
  // Resuming it under a changed config is refused, naming both run ids (as a training run's).
  std::string changed = needle;
  changed.replace(changed.find("examples: 3"), 11, "examples: 4");
  try {
    harness::run_task(harness::config::load_run_config_text(changed, "t.yaml", "t"), o);
    ADD_FAILURE() << "a needle run was resumed under another config";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the config changed since this run started (run id " +
                                         r.config.at("hash") + " → "),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(analysis::parse_metric("needle/entropy"), harness::InputError);
}

namespace {

// A sweep of one needle run (and, with `with_base`, its pretraining run first) on tiny_yaml's
// model; results under <dir>/runs/ns.
std::string needle_sweep_text(const fs::path& dir, const std::string& init_from, bool with_base) {
  std::string base;
  std::stringstream in(tiny_yaml(dir / "cache", 256));
  for (std::string line; std::getline(in, line);) base += "  " + line + "\n";
  base.replace(base.find("run: {"), 6, "run: {out_dir: '" + (dir / "runs").string() + "', ");
  // The needle keys in the base: a task: lm run does not read them (its id is unchanged).
  base += "  needle: {steps: 4, warmup_steps: 1, cooldown_steps: 1, batch_size: 2, examples: 3, contexts: [L]}\n";
  return "name: ns\nbase:\n" + base + "runs:\n" + (with_base ? "  - {task: lm}\n" : "") +
         "  - {task: needle, init_from: '" + init_from + "'}\n";
}

}  // namespace

TEST(NeedleSweep, RefusedWithoutItsPretrainingRunAndOrderedAfterItInTheSameSweep) {
  test_support::TempDir tmp;
  // Pretraining run missing: `plan` says what the run waits on; `run` refuses, writing nothing.
  fs::create_directories(tmp.path / "base");
  const auto file = tmp.path / "ns.yaml";  // workers read the sweep file
  std::ofstream(file) << needle_sweep_text(tmp.path, (tmp.path / "base").string(), false);
  const auto missing = harness::sweeps::load_sweep(file.string());
  const auto plan = harness::sweeps::format_plan(missing, harness::sweeps::inspect_runs(missing));
  EXPECT_NE(plan.find("waiting on pretraining run"), std::string::npos) << plan;
  harness::sweeps::LocalRunOptions o;
  o.executable = HARNESS_BINARY;
  o.live_display = 0;
  o.threads_per_job = 1;
  try {
    harness::sweeps::run_sweep(missing, o);
    ADD_FAILURE() << "a needle sweep started without its pretraining run";
  } catch (const harness::InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1 needle run cannot start"), std::string::npos) << what;
    EXPECT_NE(what.find("ns.yaml:"), std::string::npos) << what;  // located
    EXPECT_NE(what.find("missing"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(missing.sweep_dir)) << "nothing written";

  // The pretraining run in the same sweep: trained first, then the needle run, with 2 jobs.
  std::ofstream(file) << needle_sweep_text(tmp.path, (tmp.path / "runs" / "ns").string(), true);
  const auto both = harness::sweeps::load_sweep(file.string());
  ASSERT_EQ(both.runs.size(), 2u);
  o.jobs = 2;
  ASSERT_EQ(harness::sweeps::run_sweep(both, o), 0);
  for (const auto& run : both.runs)
    EXPECT_EQ(results::read_run_file(run.run_dir + "/run.h5").state, results::RunState::kDone) << run.run_dir;
  EXPECT_EQ(results::read_run_file(both.runs[1].run_dir + "/run.h5").config.at("init_from_id"), both.runs[0].id);
}
