// The config schema: errors name file:line:column, the key and what was expected; relative
// values resolve against L; the run id depends on exactly the result-affecting keys.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/config/engine_options.h"
#include "harness/config/schema.h"
#include "common/did_you_mean.h"
#include "common/errors.h"

using harness::InputError;
using harness::config::config_hash;
using harness::config::load_run_config_text;

namespace {

std::string error_of(const std::string& yaml) {
  try {
    load_run_config_text(yaml, "cfg.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(Config, DefaultsLoadFromAnEmptyDocument) {
  const auto loaded = load_run_config_text("", "cfg.yaml", "empty");
  EXPECT_EQ(loaded.config.name, "empty");
  EXPECT_EQ(loaded.config.model.head_dim, 128 / 4);  // d_model / heads
  EXPECT_EQ(loaded.config.eval_contexts(), (std::vector<int64_t>{64, 256, 1024}));
}

TEST(Config, UnknownKeyNamesPositionAndSuggests) {
  const std::string msg = error_of("model:\n  layers: 2\n  d_modle: 64\n");
  EXPECT_NE(msg.find("cfg.yaml:3:3: unknown key 'model.d_modle'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'model.d_model'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("valid keys in 'model': layers, d_model"), std::string::npos) << msg;
}

TEST(Config, UnknownSectionListsTopLevelKeys) {
  const std::string msg = error_of("trian:\n  steps: 3\n");
  EXPECT_NE(msg.find("cfg.yaml:1:1: unknown key 'trian'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train"), std::string::npos) << msg;
}

TEST(Config, WrongTypeAndRangeNameExpectation) {
  std::string msg = error_of("model:\n  heads: four\n");
  EXPECT_NE(msg.find("cfg.yaml:2:10: model.heads: expected an integer in [1, 1024], got 'four'"),
            std::string::npos) << msg;
  msg = error_of("train:\n  context: 0\n");
  EXPECT_NE(msg.find("cfg.yaml:2:12: train.context: expected an integer in [1, 1048576], got 0"),
            std::string::npos) << msg;
  msg = error_of("attention:\n  method: rotary\n");
  EXPECT_NE(msg.find("attention.method: 'rotary' is not valid; expected one of: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("si+p-rope"), std::string::npos) << msg;
  msg = error_of("attention:\n  tau: -1\n");
  // The range is tau's row (attention/parameters.h): > 0.
  EXPECT_NE(msg.find("attention.tau: expected a number > 0, or a multiple of the training context"),
            std::string::npos) << msg;
  // rope_base's row: > 1 (a base of 1 or less does not spread the frequencies), located here.
  msg = error_of("attention:\n  rope_base: 0.5\n");
  EXPECT_NE(msg.find("cfg.yaml:2:14: attention.rope_base: expected a number > 1,"), std::string::npos) << msg;
  msg = error_of("attention:\n  p_rope_fraction: 1.5\n");
  EXPECT_NE(msg.find("attention.p_rope_fraction"), std::string::npos) << msg;
  msg = error_of("model: 3\n");
  EXPECT_NE(msg.find("model: expected a mapping"), std::string::npos) << msg;
}

TEST(Config, SyntaxErrorsAndDuplicatesHavePositions) {
  std::string msg = error_of("model:\n  layers: [1, 2\n");
  EXPECT_NE(msg.find("cfg.yaml:"), std::string::npos);
  EXPECT_NE(msg.find("YAML syntax error"), std::string::npos) << msg;
  msg = error_of("train:\n  steps: 3\n  steps: 4\n");
  EXPECT_NE(msg.find("cfg.yaml:3:3: duplicate key 'train.steps'"), std::string::npos) << msg;
}

TEST(Config, CrossKeyChecksPointAtTheKey) {
  std::string msg = error_of("model:\n  d_model: 100\n  heads: 3\n");
  EXPECT_NE(msg.find("cfg.yaml:3:10: model.heads: model.d_model (100) is not divisible by model.heads (3)"),
            std::string::npos) << msg;
  msg = error_of("train:\n  batch_size: 10\n  grad_accum: 3\n");
  EXPECT_NE(msg.find("train.grad_accum: must divide train.batch_size (10)"), std::string::npos) << msg;
  msg = error_of("train:\n  context: 64\neval:\n  contexts: [L, L/3]\n");
  EXPECT_NE(msg.find("eval.contexts: context 'L/3' resolves to"), std::string::npos) << msg;
  // eval.same_text cuts the shorter contexts from the longest: each must divide it.
  msg = error_of("train:\n  context: 64\neval:\n  contexts: [L, 3L, 16L]\n  same_text: true\n");
  EXPECT_NE(msg.find("cfg.yaml:5:14: eval.same_text: the same text is cut from windows of the longest context "
                     "(1024) into chunks, so every context must divide it; eval.contexts holds 192"),
            std::string::npos) << msg;
  EXPECT_EQ(error_of("train:\n  context: 64\neval:\n  contexts: [L, 4L, 16L]\n  same_text: true\n"), "<no error>");
}

TEST(Config, RelativeValuesResolveAgainstTrainingContext) {
  const auto loaded = load_run_config_text(
      "train: {context: 4000}\nattention: {tau: L/400, p_rope_base: 0.25*L, rope_base: 2L}\n"
      "eval: {contexts: [L, 4L, 8000]}\n",
      "cfg.yaml");
  // resolve_method resolves every declared parameter, read or not (rope_base: si+p-rope does not).
  const auto m = attention::resolve_method(harness::config::method_options(loaded.config));
  EXPECT_DOUBLE_EQ(m.value(attention::Parameter::kTau), 10.0);
  EXPECT_DOUBLE_EQ(m.value(attention::Parameter::kPRopeBase), 1000.0);
  EXPECT_DOUBLE_EQ(m.value(attention::Parameter::kRopeBase), 8000.0);
  EXPECT_EQ(loaded.config.eval_contexts(), (std::vector<int64_t>{4000, 16000, 8000}));
  EXPECT_EQ(loaded.config.attention.parameters[attention::Parameter::kTau].text(), "L/400");
}

TEST(Config, RunIdIgnoresKeyOrderAndRunKeysButNotResultKeys) {
  const std::string a = "model: {layers: 2, d_model: 64}\ntrain: {steps: 10, seed: 1}\n";
  const std::string b = "train: {seed: 1, steps: 10}\nmodel: {d_model: 64, layers: 2}\n";
  const std::string runs_elsewhere =
      a + "run: {out_dir: /tmp/x, threads: 3, log_every: 7}\nname: other\n";
  const auto h = config_hash(load_run_config_text(a, "a.yaml").config);
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(h, config_hash(load_run_config_text(b, "b.yaml").config));
  EXPECT_EQ(h, config_hash(load_run_config_text(runs_elsewhere, "c.yaml").config));
  // Absolute and relative spellings of the same value are the same experiment.
  EXPECT_EQ(config_hash(load_run_config_text("attention: {tau: 0.16}", "x").config),
            config_hash(load_run_config_text("attention: {tau: L/400}", "x").config));
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"train.seed", "2"}, {"attention.tau", "3"}, {"model.layers", "3"},
      {"eval.contexts", "[L]"}, {"optim.lr_hidden", "0.01"}, {"attention.method", "rope"}};
  for (const auto& [key, value] : changes) {
    auto changed = load_run_config_text(a, "a.yaml");
    harness::config::apply_override(changed, key, YAML::Load(value), {"test", 0, 0});
    harness::config::resolve_and_validate(changed);
    EXPECT_NE(config_hash(changed.config), h) << key;
  }
}

TEST(Config, HiddenLearningRateDefaultsPerOptimizer) {
  EXPECT_DOUBLE_EQ(load_run_config_text("optim: {name: muon}", "x").config.optim.lr_hidden, 0.02);
  EXPECT_DOUBLE_EQ(load_run_config_text("optim: {name: adamw}", "x").config.optim.lr_hidden, 0.003);
  EXPECT_DOUBLE_EQ(
      load_run_config_text("optim: {name: adamw, lr_hidden: 0.01}", "x").config.optim.lr_hidden, 0.01);
}

TEST(Config, MissingFileIsAnInputError) {
  try {
    harness::config::load_run_config("/nonexistent/run.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/run.yaml: config file not found"), std::string::npos);
  }
}

namespace {
std::string id_of(const std::string& yaml) {
  return config_hash(load_run_config_text(yaml, "x.yaml").config);
}
}  // namespace

TEST(Config, KeysTheMethodDoesNotReadAreNotPartOfTheRunId) {
  const std::string L64 = "train: {context: 64}\n";
  // RoPE does not read τ; the scale-invariant transform does.
  EXPECT_EQ(id_of(L64 + "attention: {method: rope, tau: L/400}"),
            id_of(L64 + "attention: {method: rope, tau: L/40}"));
  EXPECT_NE(id_of(L64 + "attention: {method: si+p-rope, tau: L/400}"),
            id_of(L64 + "attention: {method: si+p-rope, tau: L/40}"));
  // p-RoPE keys without p-RoPE, RoPE's base without a RoPE-family encoding.
  EXPECT_EQ(id_of("attention: {method: rope, p_rope_base: 16, p_rope_variant: truncate}"),
            id_of("attention: {method: rope}"));
  EXPECT_EQ(id_of("attention: {method: alibi, rope_base: 500}"), id_of("attention: {method: alibi}"));
  EXPECT_NE(id_of("attention: {method: rope, rope_base: 500}"), id_of("attention: {method: rope}"));
  EXPECT_EQ(id_of("attention: {method: si+p-rope, rope_base: 500}"), id_of("attention: {method: si+p-rope}"));
  EXPECT_NE(id_of("attention: {method: si+p-rope, p_rope_variant: truncate, rope_base: 500}"),
            id_of("attention: {method: si+p-rope, p_rope_variant: truncate}"));
  // An override equal to the preset's own choice changes nothing.
  EXPECT_EQ(id_of("attention: {method: si+p-rope, positional: p-rope}"), id_of("attention: {method: si+p-rope}"));
  EXPECT_NE(id_of("attention: {method: si+p-rope, positional: rope}"), id_of("attention: {method: si+p-rope}"));
  // Optimiser and schedule keys of the other optimiser / schedule; the vocabulary of byte-level.
  EXPECT_EQ(id_of("optim: {name: adamw, momentum: 0.5}"), id_of("optim: {name: adamw}"));
  EXPECT_NE(id_of("optim: {name: muon, momentum: 0.5}"), id_of("optim: {name: muon}"));
  EXPECT_EQ(id_of("schedule: {kind: cosine, cooldown_fraction: 0.2}"), id_of("schedule: {kind: cosine}"));
  // eval.same_text while false: earlier ids hold.
  EXPECT_EQ(id_of("eval: {same_text: false}"), id_of("eval: {}"));
  EXPECT_NE(id_of("eval: {same_text: true}"), id_of("eval: {}"));
  // The full canonical text keeps every key, marking the unread ones.
  const auto rope = load_run_config_text(L64 + "attention: {method: rope}", "x.yaml").config;
  EXPECT_NE(harness::config::canonical_text(rope, false).find("attention.tau: 10  # not read by this run"),
            std::string::npos);
  EXPECT_EQ(harness::config::canonical_text(rope, true).find("attention.tau"), std::string::npos);
}

TEST(Config, FirstSchemeIdsAreUnchanged) {
  // Printed by `harness config show` before unread keys left the identity (revision f12df99):
  // results written then are found by these ids.
  const auto legacy = [](const std::string& yaml) {
    return harness::config::legacy_config_hash(load_run_config_text(yaml, "x.yaml").config);
  };
  EXPECT_EQ(legacy("attention: {method: rope, tau: L/400, p_rope_base: L/4}\ntrain: {context: 64}\n"),
            "0dd4a8ea76a8a457");
  EXPECT_EQ(legacy("attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\ntrain: {context: 64}\n"),
            "d71df2fa68eb0773");
}

TEST(Config, NumbersTooLargeForADoubleAreLocatedErrors) {
  for (const auto& key : harness::config::schema()) {
    if (key.expected.find("number") == std::string::npos) continue;
    harness::config::LoadedConfig loaded;
    loaded.source = "big.yaml";
    try {
      harness::config::apply_override(loaded, key.path, YAML::Load("1e400"), {"big.yaml", 3, 7});
      ADD_FAILURE() << key.path << " accepted 1e400";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("big.yaml:3:7: " + key.path + ": expected"), std::string::npos)
          << e.what();
    }
  }
  try {
    load_run_config_text("attention:\n  tau: 4000000000000000000000000000000000000000000000000000000000"
                         "00000000000000000000000000000000000000000000000000000000000000000000000000000"
                         "00000000000000000000000000000000000000000000000000000000000000000000000000000"
                         "00000000000000000000000000000000000000000000000000000000000000000000000000000"
                         "000000000000000000000000000000000000000000000000000L/400\n", "big.yaml");
    ADD_FAILURE() << "an overflowing coefficient of L was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("big.yaml:2:8: attention.tau: expected"), std::string::npos) << e.what();
  }
}

TEST(Config, CudaKernelHeadDimensionIsCheckedWhereItIsWritten) {
  // d_model 96 / heads 2 = 48: not a head dimension the CUDA kernel has.
  std::string msg = error_of("model:\n  d_model: 96\n  heads: 2\nattention:\n  kernel: cuda\n");
  EXPECT_NE(msg.find("cfg.yaml:5:11: attention.kernel:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supports model.head_dim 64 or 128; this run has head_dim 48 (d_model 96 / heads 2)"),
            std::string::npos) << msg;
  msg = error_of("model:\n  head_dim: 96\nrun:\n  device: cuda\n");  // fused on CUDA runs the CUDA kernel
  EXPECT_NE(msg.find("cfg.yaml:2:13: model.head_dim:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("attention.kernel: fused on run.device: cuda"), std::string::npos) << msg;
  // Supported dimensions, and any dimension with the reference kernel or on the CPU, load.
  EXPECT_EQ(error_of("model: {d_model: 256, heads: 2}\nattention: {kernel: cuda}\n"), "<no error>");
  EXPECT_EQ(error_of("model: {d_model: 96, heads: 2}\nattention: {kernel: reference}\nrun: {device: cuda}\n"),
            "<no error>");
  EXPECT_EQ(error_of("model: {d_model: 96, heads: 2}\n"), "<no error>");
}

TEST(Config, PrecisionAndMemoryKeys) {
  const auto bf16 = load_run_config_text(
      "train: {precision: bf16, activation_checkpointing: true}\neval: {max_batch_tokens: 4096}\nrun: {tf32: true}\n",
      "cfg.yaml");
  EXPECT_EQ(bf16.config.train.precision, "bf16");
  EXPECT_TRUE(bf16.config.train.activation_checkpointing);
  EXPECT_EQ(bf16.config.eval.max_batch_tokens, 4096);
  EXPECT_TRUE(bf16.config.run.tf32);
  EXPECT_EQ(harness::config::gpt_options(bf16.config, 256).compute_dtype, torch::kBFloat16);
  // Precision is part of the run id; how memory is spent and TF32 are not (the run's identity is
  // its maths; TF32 is a device setting like run.threads).
  const auto plain = load_run_config_text("", "cfg.yaml");
  const auto memory = load_run_config_text(
      "train: {activation_checkpointing: true}\neval: {max_batch_tokens: 4096}\nrun: {tf32: true}\n", "cfg.yaml");
  EXPECT_NE(config_hash(bf16.config), config_hash(plain.config));
  EXPECT_EQ(config_hash(memory.config), config_hash(plain.config));
  EXPECT_EQ(config_hash(load_run_config_text("train: {precision: fp32}\n", "cfg.yaml").config),
            config_hash(plain.config));
  std::string msg = error_of("train:\n  precision: fp16\n");
  EXPECT_NE(msg.find("cfg.yaml:2:14: train.precision: 'fp16' is not valid; expected one of: fp32, bf16"),
            std::string::npos) << msg;
  msg = error_of("train:\n  activation_checkpointing: maybe\n");
  EXPECT_NE(msg.find("train.activation_checkpointing: expected true or false, got 'maybe'"), std::string::npos) << msg;
}

// A run's name is a directory under run.out_dir: one path component, or the run would write
// outside it (name: ../victim trained into a sibling of run.out_dir).
TEST(Config, NamesAreSinglePathComponents) {
  for (const std::string bad : {"../victim", "a/b", "/abs", "-rf", "..", ".hidden", "a b", "''"}) {
    const std::string msg = error_of("name: " + bad + "\n");
    EXPECT_EQ(msg.rfind("cfg.yaml:1:7: name: expected a name of letters, digits, '.', '_' or '-'", 0), 0u)
        << bad << ": " << msg;
  }
  // A sweep names its runs <sweep>/<run id>, and their stored configs are read back.
  EXPECT_EQ(load_run_config_text("name: ns/fb0ab7779f9cefd5\n", "cfg.yaml").config.name, "ns/fb0ab7779f9cefd5");
  for (const std::string bad : {"ns/fb0ab7779f9cefd", "../fb0ab7779f9cefd5", "ns/../b7779f9cefd5", "a/b/fb0ab7779f9cefd5"})
    EXPECT_NE(error_of("name: " + bad + "\n"), "<no error>") << bad;
  for (const std::string good : {"tiny", "run-1.b_2", "0x"})
    EXPECT_EQ(load_run_config_text("name: " + good + "\n", "cfg.yaml").config.name, good);
  // Named after its file (load_run_config passes the stem): a file name that is no name is refused
  // unless the config names the run.
  try {
    load_run_config_text("", "-rf.yaml", "-rf");
    ADD_FAILURE() << "a run named '-rf' after its file was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("-rf.yaml: name: the run would be named '-rf' after its file", 0), 0u) << e.what();
  }
  EXPECT_EQ(load_run_config_text("name: ok\n", "-rf.yaml", "-rf").config.name, "ok");
}

// One rule for every "did you mean": a misspelt name within max(2, n/3) edits of its last
// component, or the right last component in another section; closest first.
TEST(DidYouMean, OneRuleForEveryName) {
  const std::vector<std::string> keys = {"train.steps", "train.seed", "eval.every", "model.layers"};
  EXPECT_EQ(harness::did_you_mean("train.stpes", keys), (std::vector<std::string>{"train.steps"}));
  EXPECT_EQ(harness::did_you_mean("steps", keys), (std::vector<std::string>{"train.steps"}));  // wrong section
  EXPECT_EQ(harness::did_you_mean("eval.steps", keys), (std::vector<std::string>{"train.steps"}));
  EXPECT_EQ(harness::did_you_mean("train.sed", keys), (std::vector<std::string>{"train.seed"}));
  EXPECT_TRUE(harness::did_you_mean("optimiser", keys).empty());
  EXPECT_EQ(harness::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(harness::did_you_mean("grdi", {"base", "grid", "zip", "seeds", "runs", "name"}),
            (std::vector<std::string>{"grid"}));
}

// An error quotes at most 64 characters of a value, and says how long it was.
TEST(ConfigSchema, AHugeValueIsQuotedShort) {
  const std::string huge(1 << 20, 'x');
  for (const std::string key : {"attention.method", "run.tf32", "name"}) {
    try {
      harness::config::load_run_config_text(key.substr(0, key.find('.')) == key
                                                ? key + ": " + huge + "\n"
                                                : "{" + key.substr(0, key.find('.')) + ": {" + key.substr(key.find('.') + 1) + ": " + huge + "}}\n",
                                            "huge.yaml", "huge");
      ADD_FAILURE() << key << " accepted a megabyte of x";
    } catch (const harness::InputError& e) {
      const std::string what = e.what();
      EXPECT_LT(what.size(), 2000u) << key;
      EXPECT_NE(what.find("(1048576 characters)"), std::string::npos) << key << ": " << what.substr(0, 300);
    }
  }
}
