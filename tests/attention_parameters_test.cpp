// The declared attention parameters (attention/parameters.h) are each one row: the schema's key,
// the run-id rule and resolve_method's check all come from it. Which presets read which parameter
// is written out here by hand, from the papers, as the independent expectation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "attention/method.h"
#include "attention/parameters.h"
#include "harness/config/engine_options.h"
#include "harness/config/schema.h"

namespace {

using attention::Parameter;

harness::config::RunConfig config_of(const std::string& yaml) {
  return harness::config::load_run_config_text(yaml, "cfg.yaml").config;
}

bool throws_naming(const attention::MethodOptions& o, const std::string& what) {
  try {
    attention::resolve_method(o);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what()).find(what) != std::string::npos;
  }
  return false;
}

}  // namespace

TEST(AttentionParameters, RowsAreInEnumOrderAndNamedUniquely) {
  std::set<std::string> names;
  for (size_t i = 0; i < attention::parameters().size(); ++i) {
    const auto& p = attention::parameters()[i];
    EXPECT_EQ(size_t(p.id), i) << p.name;
    EXPECT_EQ(&attention::parameter_spec(p.id), &p);
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
  }
  EXPECT_EQ(int(names.size()), attention::kParameterCount);
}

TEST(AttentionParameters, EachRowIsAConfigKeyWithItsHelpAndDefault) {
  const auto defaults = config_of("");
  for (const auto& p : attention::parameters()) {
    const auto* key = harness::config::find_key(std::string("attention.") + p.name);
    ASSERT_NE(key, nullptr) << p.name;
    EXPECT_EQ(key->help, p.help);
    EXPECT_EQ(defaults.attention.parameters[p.id].value, p.default_value) << p.name;
    EXPECT_FALSE(defaults.attention.parameters[p.id].relative) << p.name;
  }
}

// Who reads what, from the papers: τ only the scale-invariant transform; the RoPE base every
// encoding built on RoPE's frequencies (rope, ntk, yarn, and truncated p-RoPE); the respread p-RoPE
// base p-RoPE. The rule, not a list, so a new preset is checked with no edit here.
std::set<std::string> papers_reads(const attention::Method& m, const std::string& variant) {
  using attention::Positional;
  std::set<std::string> r;
  if (m.transform == attention::Transform::kScaleInvariant) r.insert("tau");
  if (m.positional == Positional::kRoPE || m.positional == Positional::kNTK || m.positional == Positional::kYaRN)
    r.insert("rope_base");
  if (m.positional == Positional::kPRoPE) r.insert(variant == "truncate" ? "rope_base" : "p_rope_base");
  return r;
}

TEST(AttentionParameters, ARunReadsExactlyTheParametersOfItsMethod) {
  // Table 1's presets as the papers state them, holding the rule above to them.
  const std::map<std::string, std::set<std::string>> table1 = {
      {"rope", {"rope_base"}},
      {"p-rope", {"p_rope_base"}},
      {"nope", {}},
      {"rope+ntk", {"rope_base"}},
      {"yarn", {"rope_base"}},
      {"logn+rope", {"rope_base"}},
      {"logn+p-rope", {"p_rope_base"}},
      {"logn+ntk", {"rope_base"}},
      {"alibi", {}},
      {"si+p-rope", {"tau", "p_rope_base"}},
      {"si+rope", {"tau", "rope_base"}},
      {"si+nope", {"tau"}},
      {"kerple", {}},
      {"kerple+p-rope", {"p_rope_base"}},
  };
  for (const auto& [preset, want] : table1) {
    const auto c = config_of("attention: {method: " + preset + "}");
    EXPECT_EQ(papers_reads(attention::resolve_method(harness::config::method_options(c)), "respread"), want)
        << preset;
  }
  for (const auto& preset : attention::preset_names()) {
    for (const std::string variant : {"respread", "truncate"}) {
      const auto c = config_of("attention: {method: " + preset + ", p_rope_variant: " + variant + "}");
      const auto m = attention::resolve_method(harness::config::method_options(c));
      const std::set<std::string> reads = papers_reads(m, variant);
      for (const auto& p : attention::parameters()) {
        const bool expected = reads.count(p.name) > 0;
        EXPECT_EQ(p.reads(m), expected) << preset << " " << variant << " " << p.name;
        EXPECT_EQ(harness::config::find_key(std::string("attention.") + p.name)->is_read(c), expected)
            << preset << " " << variant << " " << p.name;
      }
    }
  }
}

TEST(AttentionParameters, ResolveMethodChecksTheRowsRangeOnlyWhereTheMethodReadsIt) {
  attention::MethodOptions o;
  o.train_context = 64;
  o.heads = 2;
  o.head_dim = 8;
  for (const auto& p : attention::parameters()) {
    // A preset that reads p and one that does not.
    std::string reader, other = "alibi";
    for (const auto& preset : attention::preset_names()) {
      attention::MethodOptions probe = o;
      probe.method = preset;
      if (p.reads(attention::resolve_method(probe))) reader = preset;
    }
    ASSERT_FALSE(reader.empty()) << p.name;
    const double below = p.min_inclusive ? p.min - 0.5 : p.min;
    for (const double bad : {below, std::nan(""), std::numeric_limits<double>::infinity()}) {
      attention::MethodOptions r = o, a = o;
      r.method = reader;
      a.method = other;
      r.parameters[p.id] = bad;
      a.parameters[p.id] = bad;
      EXPECT_TRUE(throws_naming(r, std::string(p.name) + " must be")) << reader << " " << p.name << " " << bad;
      EXPECT_NO_THROW(attention::resolve_method(a)) << other << " " << p.name;
    }
    // Relative to L: resolved against train_context; refused without one.
    attention::MethodOptions rel = o;
    rel.method = reader;
    rel.parameters[p.id] = attention::LengthValue::times_l(4.0);
    EXPECT_DOUBLE_EQ(attention::resolve_method(rel).value(p.id), 4.0 * 64) << p.name;
    rel.train_context = 0;
    EXPECT_TRUE(throws_naming(rel, "relative to the training context")) << reader << " " << p.name;
  }
}

TEST(AttentionParameters, LengthValueTextIsWhatAUserWrites) {
  EXPECT_EQ(attention::LengthValue(0.16).text(), "0.16");
  EXPECT_EQ(attention::LengthValue::times_l(1).text(), "L");
  EXPECT_EQ(attention::LengthValue::times_l(4).text(), "4L");
  EXPECT_EQ(attention::LengthValue::times_l(1.0 / 400).text(), "L/400");
  EXPECT_EQ(attention::LengthValue::times_l(0.3).text(), "0.3L");
  // Written out in full, as a config holds them (no exponent: the config grammar has none for L).
  EXPECT_EQ(attention::LengthValue(100000).text(), "100000");
  EXPECT_EQ(attention::LengthValue(0.0001).text(), "0.0001");
  EXPECT_EQ(attention::LengthValue::times_l(1e-5).text(), "L/100000");
  EXPECT_EQ(attention::LengthValue::times_l(1e6).text(), "1000000L");
  EXPECT_DOUBLE_EQ(attention::LengthValue::times_l(1.0 / 400).resolve(4000), 10.0);
}

// p_rope_fraction: auto is the variant's fraction from its paper (respread: modded-nanogpt's half
// of the pairs; truncate: Barbero et al.'s 0.75), the same in the config (`config show`, the run
// id's text, the key's help) as in the resolved method.
TEST(AttentionParameters, AutoPRopeFractionIsTheVariantsInConfigAndMethod) {
  const auto* key = harness::config::find_key("attention.p_rope_fraction");
  ASSERT_NE(key, nullptr);
  const std::map<std::string, std::pair<double, std::string>> papers = {{"respread", {0.5, "0.5"}},
                                                                        {"truncate", {0.75, "0.75"}}};
  for (const auto& [variant, fraction] : papers) {
    const auto c = config_of("attention: {method: p-rope, p_rope_variant: " + variant + "}\n");
    EXPECT_EQ(key->get(c), fraction.second) << variant;
    EXPECT_EQ(attention::resolve_method(harness::config::method_options(c)).p_rope_fraction, fraction.first) << variant;
    EXPECT_NE(key->help.find(variant + " " + fraction.second), std::string::npos) << key->help;
  }
}
