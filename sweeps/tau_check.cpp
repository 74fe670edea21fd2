#include "sweeps/tau_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "common/errors.h"

namespace harness::sweeps {

namespace fs = std::filesystem;

TauCheckSweep tau_check_sweep(const config::LoadedConfig& loaded, const TauCheckSpec& spec) {
  const auto& c = loaded.config;
  const auto* tau_key = config::find_key("attention.tau");
  if (!tau_key->is_read(c))
    throw InputError(fmt::format("{}: attention.method '{}' has no τ (attention.tau is not read): tau check "
                                 "varies the τ of the scale-invariant transform; use a method with it, "
                                 "e.g. si+p-rope, si+rope or si+nope",
                                 loaded.location_of("attention.method").str(), c.attention.method));
  if (std::find(spec.factors.begin(), spec.factors.end(), 1.0) == spec.factors.end())
    throw InputError("--factors: must hold 1 (the config's own τ, which the verdict is about)");
  for (const double f : spec.factors)
    if (!(f > 0)) throw InputError(fmt::format("--factors: expected numbers > 0, got {}", f));

  TauCheckSweep out;
  out.tau = c.attention.parameters[attention::Parameter::kTau].resolve(c.train.context);
  std::vector<double> factors = spec.factors;
  std::sort(factors.begin(), factors.end());
  factors.erase(std::unique(factors.begin(), factors.end()), factors.end());
  for (const double f : factors) {
    // The config's own τ exactly (its run is the config's run); the others to 6 digits, as a
    // person would write them.
    const std::string text = f == 1.0 ? fmt::format("{}", out.tau) : fmt::format("{:.6g}", out.tau * f);
    out.tau_texts.push_back(text);
    if (f == 1.0) out.own_tau_text = text;
  }
  std::vector<int64_t> seeds = spec.seeds;
  if (seeds.empty())  // three: two leave one degree of freedom for the seed-to-seed variance
    seeds = {int64_t(c.train.seed), int64_t(c.train.seed) + 1, int64_t(c.train.seed) + 2};

  const std::string name = "tau-check-" + config::config_hash(c);
  out.path = (fs::path(c.run.out_dir) / name / "tau-check.yaml").string();
  std::string text = fmt::format(
      "# Written by `harness tau check` (sweeps/tau_check.h): τ = {} tokens of {} × {{{}}}, seeds "
      "{{{}}}.\n# Rerun the same command to resume; or: harness sweep submit {} --slurm\n",
      out.tau, loaded.source, fmt::join(factors, ", "), fmt::join(seeds, ", "), out.path);
  std::string base = fs::absolute(loaded.source).lexically_normal().string();
  for (size_t at = base.find('\''); at != std::string::npos; at = base.find('\'', at + 2)) base.insert(at, 1, '\'');
  text += fmt::format("name: {}\nbase: '{}'\ngrid:\n  attention.tau: [{}]\n", name, base,
                      fmt::join(out.tau_texts, ", "));
  for (const auto& item : spec.overrides) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("--set {}: expected key=value, e.g. --set train.steps=400", item));
    const std::string key = item.substr(0, eq);
    if (key == "attention.tau")
      throw InputError("--set attention.tau: tau check varies τ itself; set it in the config or drop the --set");
    if (key == "train.seed") throw InputError("--set train.seed: use --seeds");
    if (key == "run.out_dir" || key == "name")
      throw InputError(fmt::format("--set {}: set it in the config: it places the whole sweep", key));
    text += fmt::format("  {}: [{}]\n", key, item.substr(eq + 1));
  }
  text += fmt::format("seeds: [{}]\n", fmt::join(seeds, ", "));
  out.text = text;
  return out;
}

}  // namespace harness::sweeps
