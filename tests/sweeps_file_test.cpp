// Sweep files: parsing, validation messages (file:line:column, key, did-you-mean), expansion
// counts and run ids.
#include <gtest/gtest.h>

#include <map>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "common/errors.h"
#include "results/run_file.h"
#include "results/run_paths.h"
#include "sweeps/run_status.h"
#include "test_support.h"
#include "sweeps/plan.h"
#include "sweeps/sweep_file.h"

namespace fs = std::filesystem;
using harness::sweeps::load_sweep;
using harness::sweeps::load_sweep_text;

namespace {

const std::string kFixtures = std::string(HARNESS_TEST_DATA) + "/sweeps/";

// The InputError message of loading fixture `name` ("" when it loads).
std::string error_of(const std::string& name) {
  try {
    load_sweep(kFixtures + name);
  } catch (const harness::InputError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

std::vector<std::string> ids(const harness::sweeps::Sweep& sweep) {
  std::vector<std::string> out;
  for (const auto& r : sweep.runs) out.push_back(r.id);
  return out;
}

}  // namespace

TEST(SweepFile, ExpandsGridZipSeedsAndExplicitRuns) {
  const auto sweep = load_sweep(kFixtures + "grid.yaml");
  EXPECT_EQ(sweep.name, "grid-fixture");
  // si+p-rope: 3 τ × 2 zip × 2 seeds; rope reads no τ: 2 zip × 2 seeds; 2 explicit × 2 seeds.
  ASSERT_EQ(sweep.runs.size(), 3u * 2u * 2u + 2u * 2u + 2u * 2u);
  const auto all_ids = ids(sweep);
  const std::set<std::string> unique(all_ids.begin(), all_ids.end());
  EXPECT_EQ(unique.size(), sweep.runs.size());
  // Plan order: first grid key outermost, then zip, seeds innermost; explicit runs last.
  EXPECT_EQ(sweep.runs[0].setting_text("attention.method"), "si+p-rope");
  EXPECT_EQ(sweep.runs[0].setting_text("attention.tau"), "L/40");
  EXPECT_EQ(sweep.runs[0].setting_text("train.context"), "16");
  EXPECT_EQ(sweep.runs[0].setting_text("train.seed"), "0");
  EXPECT_EQ(sweep.runs[1].setting_text("train.seed"), "1");
  EXPECT_EQ(sweep.runs[2].setting_text("train.context"), "32");
  EXPECT_EQ(sweep.runs[2].loaded.config.train.batch_size, 4);
  EXPECT_EQ(sweep.runs[4].setting_text("attention.tau"), "L/400");
  EXPECT_EQ(sweep.runs[12].setting_text("attention.method"), "rope");
  EXPECT_EQ(sweep.runs[12].merged.size(), 2u);  // τ = L/400 and L/4000: the same rope run
  EXPECT_EQ(sweep.runs[16].setting_text("attention.method"), "alibi");
  EXPECT_EQ(sweep.runs[18].setting_text("attention.method"), "nope");  // nested form
  EXPECT_EQ(sweep.runs[18].loaded.config.attention.method, "nope");
  // Relative values resolve per run: tau = L/40 at L = 32.
  EXPECT_DOUBLE_EQ(sweep.runs[2].loaded.config.attention.parameters[attention::Parameter::kTau].resolve(32), 0.8);
  // The base file's values stay, the run dir is <out_dir>/<name>/<id>.
  EXPECT_EQ(sweep.runs[0].loaded.config.model.d_model, 32);
  EXPECT_EQ(sweep.runs[0].loaded.config.model.head_dim, 16);
  EXPECT_EQ(sweep.runs[0].run_dir, "runs/grid-fixture/" + sweep.runs[0].id);
  EXPECT_EQ(sweep.varying_keys,
            (std::vector<std::string>{"attention.method", "attention.tau", "train.context",
                                      "train.batch_size", "train.seed"}));
  // Explicit runs show the base's value as written for keys they do not set, and "–" for keys
  // their method does not read.
  EXPECT_EQ(sweep.value_text(16, "train.context"), "16");
  EXPECT_EQ(sweep.value_text(18, "attention.tau"), "–");  // nope reads no τ
  EXPECT_EQ(sweep.value_text(0, "attention.tau"), "L/40");
}

// A key on an axis that some runs do not read still tells them apart: `nope` is a NoPE preset's own
// positional encoding (not read as an override), p-rope is read; the two arms of each method differ.
TEST(SweepFile, AnAxisValueThatIsNotReadIsStillAnArm) {
  const auto sweep = load_sweep_text(
      "name: arms\nbase: {train: {steps: 5, context: 16}}\ngrid:\n"
      "  attention.method: [kerple, t5]\n  attention.positional: [nope, p-rope]\n",
      "arms.yaml");
  ASSERT_EQ(sweep.runs.size(), 4u);
  EXPECT_EQ(sweep.varying_keys, (std::vector<std::string>{"attention.method", "attention.positional"}));
  EXPECT_EQ(sweep.value_text(0, "attention.positional"), harness::sweeps::kNotRead);
  EXPECT_EQ(sweep.value_text(1, "attention.positional"), "p-rope");
}

TEST(SweepFile, InlineBaseAndNestedAxes) {
  const auto sweep = load_sweep(kFixtures + "inline.yaml");
  ASSERT_EQ(sweep.runs.size(), 2u);
  EXPECT_EQ(sweep.runs[1].setting_text("attention.tau"), "L/40");
  EXPECT_EQ(sweep.runs[1].loaded.config.model.layers, 1);
  EXPECT_EQ(sweep.varying_keys, std::vector<std::string>{"attention.tau"});
}

TEST(SweepFile, NoAxesIsTheBaseAlone) {
  const auto sweep = load_sweep_text("name: one\nbase: {train: {steps: 5}}\n", "one.yaml");
  ASSERT_EQ(sweep.runs.size(), 1u);
  EXPECT_TRUE(sweep.varying_keys.empty());
  const auto runs_only = load_sweep_text(
      "base: {train: {steps: 5}}\nruns:\n  - {attention.method: rope}\n  - {attention.method: alibi}\n",
      "dir/only-runs.yaml");
  EXPECT_EQ(runs_only.name, "only-runs");  // defaults to the file's stem
  EXPECT_EQ(runs_only.runs.size(), 2u);
}

TEST(SweepFile, UnknownKeyNamesLocationAndSuggests) {
  const std::string e = error_of("unknown_key.yaml");
  EXPECT_CONTAINS(e, "unknown_key.yaml:4:3: unknown key 'attention.tua'");
  EXPECT_CONTAINS(e, "did you mean 'attention.tau'?");
  const std::string top = error_of("unknown_top_key.yaml");
  EXPECT_CONTAINS(top, "unknown_top_key.yaml:3:1: unknown key 'gird'");
  EXPECT_CONTAINS(top, "did you mean 'grid'?");
  const std::string base = error_of("bad_base_key.yaml");
  EXPECT_CONTAINS(base, "bad_base.yaml:3:3: unknown key 'model.d_modle'");
  EXPECT_CONTAINS(base, "did you mean 'model.d_model'?");
}

TEST(SweepFile, EachAxisValueGoesThroughTheSchema) {
  EXPECT_CONTAINS(error_of("wrong_type.yaml"), "wrong_type.yaml:4:21: model.layers: expected an integer");
  EXPECT_CONTAINS(error_of("out_of_range.yaml"), "out_of_range.yaml:4:22: optim.beta1: expected a number in [0, 1], got 1.5");
  const std::string method = error_of("bad_method.yaml");
  EXPECT_CONTAINS(method, "bad_method.yaml:4:28: attention.method: 'si+p-ropee' is not valid");
  // Cross-key checks name the combination.
  const std::string combo = error_of("bad_combination.yaml");
  EXPECT_CONTAINS(combo, "bad_combination.yaml:4:20: model.heads");
  EXPECT_CONTAINS(combo, "not divisible");
  EXPECT_CONTAINS(combo, "(in run 1: model.heads=3)");
}

TEST(SweepFile, StructuralErrors) {
  EXPECT_CONTAINS(error_of("empty_axis.yaml"), "empty_axis.yaml:5:18: attention.tau: empty grid axis");
  EXPECT_CONTAINS(error_of("empty_seeds.yaml"), "empty_seeds.yaml:3:8: seeds: empty axis");
  const std::string zip = error_of("zip_mismatch.yaml");
  EXPECT_CONTAINS(zip, "zip_mismatch.yaml:5:3: train.batch_size: zip lists vary together and must be equal in length");
  EXPECT_CONTAINS(zip, "train.batch_size has 2 values, train.context");
  EXPECT_CONTAINS(zip, "has 3");
  EXPECT_CONTAINS(error_of("scalar_axis.yaml"), "scalar_axis.yaml:4:18: attention.tau: grid axis: expected a list of values");
  EXPECT_CONTAINS(error_of("two_axes_one_key.yaml"), "two_axes_one_key.yaml:5:8: train.seed: already varied at");
  EXPECT_CONTAINS(error_of("bad_name.yaml"), "bad_name.yaml:1:7: name: expected a name");
  EXPECT_CONTAINS(error_of("missing_base.yaml"), "missing_base.yaml:2:7: base: config file");
  EXPECT_CONTAINS(error_of("missing_base.yaml"), "not found");
  EXPECT_CONTAINS(error_of("no_such_sweep.yaml"), "no_such_sweep.yaml: sweep file not found");
  try {
    load_sweep_text("grid: [1, 2\n", "syntax.yaml");
    FAIL() << "no error";
  } catch (const harness::InputError& e) {
    EXPECT_CONTAINS(e.what(), "syntax.yaml:");
    EXPECT_CONTAINS(e.what(), "YAML syntax error");
  }
}

TEST(SweepFile, PointsThatResolveToOneRunArePlannedOnce) {
  // L/400 and 0.04 are the same τ at L = 16: one run, with both spellings listed.
  const auto sweep = load_sweep(kFixtures + "duplicate_run.yaml");
  ASSERT_EQ(sweep.runs.size(), 2u);
  EXPECT_EQ(sweep.runs[0].setting_text("attention.tau"), "L/400");
  ASSERT_EQ(sweep.runs[0].merged.size(), 1u);
  EXPECT_EQ(sweep.runs[0].merged[0][0].value.text, "0.04");
  EXPECT_EQ(sweep.runs[1].setting_text("attention.tau"), "L/40");
  EXPECT_EQ(sweep.runs[1].index, 1u);
  const std::string plan = harness::sweeps::format_plan(sweep, harness::sweeps::inspect_runs(sweep));
  EXPECT_CONTAINS(plan, "(2 points, one run: attention.tau=L/400|0.04)");
  EXPECT_CONTAINS(plan, "3 points of the sweep are 2 runs");
  // run.* keys never change results: two points, one run.
  EXPECT_EQ(load_sweep(kFixtures + "duplicate_run_key.yaml").runs.size(), 1u);
}

TEST(SweepFile, KeysARunDoesNotReadDoNotSplitIt) {
  // 4 τ × {si+p-rope, rope}: rope does not read τ, so its four points are one run.
  const auto sweep = load_sweep_text(
      "name: mix\nbase: {train: {context: 64}}\ngrid:\n  attention.tau: [L/4000, L/400, L/40, L/4]\n"
      "  attention.method: [si+p-rope, rope]\n",
      "mix.yaml");
  ASSERT_EQ(sweep.runs.size(), 5u);
  size_t rope = 0;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    if (sweep.runs[i].loaded.config.attention.method != "rope") {
      EXPECT_NE(sweep.value_text(i, "attention.tau"), harness::sweeps::kNotRead);
      continue;
    }
    ++rope;
    EXPECT_EQ(sweep.value_text(i, "attention.tau"), "–");
    EXPECT_EQ(sweep.runs[i].merged.size(), 3u);
    EXPECT_EQ(sweep.runs[i].legacy_ids.size(), 4u);  // four first-scheme ids: τ was in them
  }
  EXPECT_EQ(rope, 1u);
  EXPECT_EQ(sweep.varying_keys, (std::vector<std::string>{"attention.tau", "attention.method"}));
  const std::string plan = harness::sweeps::format_plan(sweep, harness::sweeps::inspect_runs(sweep));
  EXPECT_CONTAINS(plan, "attention.tau=–       attention.method=rope");
  EXPECT_CONTAINS(plan, "(4 points, one run: attention.tau=L/4000|L/400|L/40|L/4)");
}

TEST(SweepIds, StableUnderKeyOrderAndFileForm) {
  const std::string a =
      "name: s\nbase:\n  model: {layers: 1, d_model: 32, heads: 2}\n  train: {context: 16, steps: 40}\n"
      "grid:\n  attention.method: [rope, alibi]\n  attention.tau: [L/400, L/40]\nseeds: [0, 1]\n";
  const std::string reordered =
      "seeds: [0, 1]\ngrid:\n  attention.method: [rope, alibi]\n  attention.tau: [L/400, L/40]\n"
      "base:\n  train: {steps: 40, context: 16}\n  model: {heads: 2, d_model: 32, layers: 1}\nname: s\n";
  const auto ia = ids(load_sweep_text(a, "a.yaml"));
  const auto ib = ids(load_sweep_text(reordered, "b.yaml"));
  EXPECT_EQ(ia, ib);
  // The same runs written with dotted keys in the base and 0.04 for L/400 at L = 16.
  const std::string dotted =
      "name: s\nbase: {model.layers: 1, model.d_model: 32, model.heads: 2, train.context: 16, "
      "train.steps: 40}\ngrid:\n  attention.method: [rope, alibi]\n  attention.tau: [0.04, 0.4]\n"
      "seeds: [0, 1]\n";
  EXPECT_EQ(ids(load_sweep_text(dotted, "c.yaml")), ia);
  // A run.* key (threads, logging, output, checkpoints) never changes a run id...
  const std::string run_keys =
      "name: other\nbase:\n  model: {layers: 1, d_model: 32, heads: 2}\n  train: {context: 16, steps: 40}\n"
      "  run: {threads: 3, log_every: 7, checkpoint_every: 9, out_dir: /tmp/elsewhere}\n"
      "grid:\n  attention.method: [rope, alibi]\n  attention.tau: [L/400, L/40]\nseeds: [0, 1]\n";
  const auto rk = load_sweep_text(run_keys, "d.yaml");
  EXPECT_EQ(ids(rk), ia);
  EXPECT_EQ(rk.sweep_dir, "/tmp/elsewhere/other");
  // ...and any result-affecting key does.
  std::string changed = a;
  changed.replace(changed.find("steps: 40"), 9, "steps: 41");
  const auto ic = ids(load_sweep_text(changed, "e.yaml"));
  for (size_t i = 0; i < ia.size(); ++i) EXPECT_NE(ia[i], ic[i]);
  for (const std::string key : {"model.mlp_ratio: 2", "optim.lr_hidden: 0.01", "eval.windows: 3",
                                 "data.val_fraction: 0.2", "attention.score_scale: 0.5",
                                 "eval.contexts: [L, 2L]", "data.corpus: elsewhere"}) {
    std::string with_key = a;
    with_key.insert(with_key.find("base:\n") + 6, "  " + key + "\n");
    const auto ik = ids(load_sweep_text(with_key, "f.yaml"));
    ASSERT_EQ(ik.size(), ia.size()) << key;
    for (size_t i = 0; i < ia.size(); ++i) EXPECT_NE(ik[i], ia[i]) << key;
  }
}

TEST(SweepIds, SameAsHarnessConfigHash) {
  const auto sweep = load_sweep(kFixtures + "inline.yaml");
  for (const auto& run : sweep.runs) EXPECT_EQ(run.id, harness::config::config_hash(run.loaded.config));
}

TEST(SweepPlan, OneLinePerRunStartingWithItsId) {
  const auto sweep = load_sweep(kFixtures + "inline.yaml");
  const auto text = harness::sweeps::format_plan(sweep, harness::sweeps::inspect_runs(sweep));
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("# sweep inline-fixture", 0), 0u) << line;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    std::getline(in, line);
    EXPECT_EQ(line.rfind(sweep.runs[i].id, 0), 0u) << line;
    EXPECT_CONTAINS(line, "attention.tau=" + sweep.runs[i].setting_text("attention.tau"));
    EXPECT_CONTAINS(line, "pending");
  }
  std::getline(in, line);
  EXPECT_EQ(line, "0 of 2 runs done, 2 pending");
}

// `planned:` registers a comparison's arms, correction and α with the sweep; each mistake is named.
TEST(SweepFile, APlannedComparisonIsReadWithItsCriterion) {
  const std::string base = "name: p\nbase: {model: {layers: 1}}\ngrid:\n  attention.method: [rope, alibi]\n";
  const auto sweep = load_sweep_text(base + "planned: {arms: [rope, alibi], correction: holm, alpha: 0.01}\n", "p.yaml");
  ASSERT_TRUE(sweep.planned.has_value());
  EXPECT_EQ(sweep.planned->arms, (std::vector<std::string>{"rope", "alibi"}));
  EXPECT_EQ(sweep.planned->correction, "holm");
  EXPECT_DOUBLE_EQ(sweep.planned->alpha, 0.01);
  const auto defaults = load_sweep_text(base + "planned: {arms: [rope, alibi]}\n", "p.yaml");
  EXPECT_EQ(defaults.planned->correction, "bonferroni");
  EXPECT_DOUBLE_EQ(defaults.planned->alpha, 0.05);
  EXPECT_FALSE(load_sweep_text(base, "p.yaml").planned.has_value());
  auto error = [&](const std::string& planned) {
    try {
      load_sweep_text(base + planned, "p.yaml");
    } catch (const harness::InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_CONTAINS(error("planned: {arms: [rope]}\n"), "p.yaml:5:17: planned.arms: expected a list of two or more");
  EXPECT_CONTAINS(error("planned: {arms: [rope, alibi], correction: sidak}\n"), "planned.correction: expected bonferroni or holm");
  EXPECT_CONTAINS(error("planned: {arms: [rope, alibi], alpha: 5%}\n"), "planned.alpha: expected a number in (0, 1)");
  EXPECT_CONTAINS(error("planned: {arms: [rope, alibi], level: 0.9}\n"), "planned.level: unknown key; valid keys in 'planned': arms, correction, alpha, contexts");
  // contexts: the family's validation contexts as multiples of L (every context when absent).
  EXPECT_TRUE(defaults.planned->multiples.empty());
  EXPECT_EQ(load_sweep_text(base + "planned: {arms: [rope, alibi], contexts: [4L, 16]}\n", "p.yaml").planned->multiples,
            (std::vector<int64_t>{4, 16}));
  EXPECT_CONTAINS(error("planned: {arms: [rope, alibi], contexts: [4L, 1024T]}\n"),
                  "p.yaml:5:47: planned.contexts: expected a context as a multiple of L (1L, 4L, 16L), got");
  EXPECT_CONTAINS(error("planned: {arms: [rope, alibi], contexts: 4L}\n"), "planned.contexts: expected a list");
  EXPECT_CONTAINS(error("planned: {correction: holm}\n"), "planned.arms: missing");
}

TEST(SweepShipped, EveryShippedSweepExpandsAsDocumented) {
  // sweeps/README.md's table of shipped sweeps: "| `file.yaml` | what | runs |", each row's count
  // against the file's expansion, and every .yaml in sweeps/ in the table.
  const std::string dir = std::string(HARNESS_SOURCE_DIR) + "/sweeps/";
  std::ifstream readme(dir + "README.md");
  ASSERT_TRUE(readme) << "sweeps/README.md";
  // A row may name several files (`a.yaml`, `b.yaml`), each with that count.
  std::map<std::string, size_t> documented;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("| `", 0) != 0 || line.find(".yaml`") == std::string::npos) continue;
    const size_t runs = size_t(std::stoul(line.substr(line.rfind('|', line.size() - 2) + 1)));
    const std::string files = line.substr(2, line.find(" |", 2) - 2);
    for (size_t at = files.find('`'); at != std::string::npos; at = files.find('`', files.find('`', at + 1) + 1))
      documented[files.substr(at + 1, files.find('`', at + 1) - at - 1)] = runs;
  }
  // Every sweep file (one with a `base:`) is in the table; critical-scaling.yaml is a theory grid.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string text = test_support::read_text(entry.path());
    if (text.find("\nbase:") != std::string::npos) {
      EXPECT_TRUE(documented.count(entry.path().filename().string())) << entry.path() << " is not in sweeps/README.md";
    }
  }
  EXPECT_GE(documented.size(), 9u);
  for (const auto& [file, runs] : documented) EXPECT_EQ(load_sweep(dir + file).runs.size(), runs) << file;
  for (const std::string file : {"quickstart.yaml", "tau-ablation.yaml", "table1.yaml", "context-lengths.yaml"}) {
    const auto sweep = load_sweep(dir + file);
    for (const auto& run : sweep.runs) {
      EXPECT_EQ(run.loaded.config.data.corpus, "sotu") << file;
      EXPECT_EQ(run.loaded.config.eval_contexts().size(), 3u) << file;
    }
  }
  // The quickstart: τ around L/400 for si+p-rope, plus rope and alibi, validated at L, 4L, 16L.
  const auto quick = load_sweep(dir + "quickstart.yaml");
  std::vector<double> taus;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(quick.runs[i].loaded.config.attention.method, "si+p-rope");
    taus.push_back(quick.runs[i].loaded.config.attention.parameters[attention::Parameter::kTau].resolve(64));
  }
  EXPECT_EQ(taus, (std::vector<double>{64 / 4000.0, 64 / 400.0, 64 / 40.0, 64 / 4.0}));
  EXPECT_EQ(quick.runs[4].loaded.config.attention.method, "rope");
  EXPECT_EQ(quick.runs[5].loaded.config.attention.method, "alibi");
  EXPECT_EQ(quick.runs[0].loaded.config.eval_contexts(), (std::vector<int64_t>{64, 256, 1024}));
  // Appendix H: the paper's τ grid at L = 4096, carried by L/4096.
  const auto tau = load_sweep(dir + "tau-ablation.yaml");
  const std::vector<double> paper = {0.01, 0.1, 1, 10, 100};
  for (size_t g = 0; g < paper.size(); ++g)
    EXPECT_NEAR(tau.runs[g * 3].loaded.config.attention.parameters[attention::Parameter::kTau].resolve(4096), paper[g], 1e-9 * paper[g]);
  // Context lengths: tokens per step fixed.
  const auto ctx = load_sweep(dir + "context-lengths.yaml");
  for (const auto& run : ctx.runs)
    EXPECT_EQ(run.loaded.config.train.context * run.loaded.config.train.batch_size, 2048);
}

TEST(SweepIds, StableUnderKeyOrderOfTheBaseFile) {
  const fs::path dir = fs::temp_directory_path() / ("harness-sweep-ids-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a.yaml") << "model:\n  layers: 1\n  d_model: 32\n  heads: 2\ntrain:\n  context: 16\n  steps: 40\n";
  std::ofstream(dir / "b.yaml") << "train: {steps: 40, context: 16}\nmodel: {heads: 2, layers: 1, d_model: 32}\nrun: {threads: 7}\n";
  std::ofstream(dir / "sa.yaml") << "name: s\nbase: a.yaml\ngrid: {attention.method: [rope, alibi]}\n";
  std::ofstream(dir / "sb.yaml") << "grid:\n  attention:\n    method: [rope, alibi]\nbase: b.yaml\nname: s\n";
  const auto a = load_sweep((dir / "sa.yaml").string());
  const auto b = load_sweep((dir / "sb.yaml").string());
  EXPECT_EQ(ids(a), ids(b));
  EXPECT_EQ(a.base_path, (dir / "a.yaml").string());
  const auto inline_base = load_sweep_text(
      "name: s\nbase: {model: {layers: 1, d_model: 32, heads: 2}, train: {context: 16, steps: 40}}\n"
      "grid: {attention.method: [rope, alibi]}\n", "inline.yaml");
  EXPECT_EQ(ids(inline_base), ids(a));
  fs::remove_all(dir);
}

TEST(SweepIds, RunsWrittenUnderFirstSchemeIdsAreFound) {
  test_support::TempDir tmp;
  const std::string sweep_text = "name: old\nbase: {train: {context: 64}, run: {out_dir: '" +
                                 tmp.path.string() +
                                 "'}}\ngrid:\n  attention.tau: [L/400, L/40]\n"
                                 "  attention.method: [rope, si+p-rope]\n";
  auto sweep = load_sweep_text(sweep_text, "old.yaml");
  ASSERT_EQ(sweep.runs.size(), 3u);  // rope once, si+p-rope twice
  const auto& rope = sweep.runs[0];
  ASSERT_EQ(rope.loaded.config.attention.method, "rope");
  // A done rope run written under the second point's first-scheme id (τ = L/40 was part of it).
  const std::string old_dir = (tmp.path / "old" / rope.legacy_ids.at(1)).string();
  results::RunRecord record;
  record.config["hash"] = rope.legacy_ids.at(1);
  record.state = results::RunState::kDone;
  record.eval[64].step = {10};
  record.eval[64].loss = {1.5};
  results::publish(record, results::RunPaths(old_dir).results);

  sweep = load_sweep_text(sweep_text, "old.yaml");
  EXPECT_EQ(sweep.runs[0].run_dir, old_dir);
  const auto status = harness::sweeps::inspect_run(sweep.runs[0]);
  EXPECT_EQ(status.state, harness::sweeps::RunState::kDone);
  EXPECT_EQ(status.eval_loss.at(64), 1.5);
  // Runs with no earlier directory go where their id says.
  EXPECT_EQ(sweep.runs[1].run_dir, (tmp.path / "old" / sweep.runs[1].id).string());
}
