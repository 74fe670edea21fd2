#include "harness/train/run_directory.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/build_info.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "harness/train/checkpoint.h"

namespace fs = std::filesystem;

namespace harness::train {

void refuse_existing_run(const results::RunPaths& paths, const TrainOptions& options) {
  const bool has_results = fs::exists(paths.results);
  if (!(has_results || !RunCheckpoints(paths.dir).empty()) || options.resume || options.overwrite) return;
  const std::string state =
      has_results ? results::to_string(results::read_run_file(paths.results).state) : "unknown";
  throw InputError(fmt::format("{} already holds a run (state: {}); pass --resume to continue it, "
                               "--overwrite to start again, or choose another name",
                               paths.dir, state));
}

torch::Device pick_device(const config::LoadedConfig& loaded) {
  if (loaded.config.run.device == "cpu") return torch::kCPU;
  if (!torch::cuda::is_available())
    throw InputError(fmt::format("{}: run.device: cuda requested, but {}; use run.device: cpu",
                                 loaded.location_of("run.device").str(),
                                 cuda_build().libtorch_cuda.empty()
                                     ? "this LibTorch is a CPU build (harness --version)"
                                     : "no CUDA device is visible (no GPU, or no driver)"));
  return torch::kCUDA;
}

bool is_same_run(const results::RunRecord& record, const config::RunConfig& config) {
  const std::string id = config::config_hash(config);
  const auto stored = record.config.find("hash");
  if (stored != record.config.end() && stored->second == id) return true;
  // Written under the first id scheme: its stored config decides, by today's id.
  const auto canonical = record.config.find("canonical");
  if (canonical == record.config.end()) return false;
  try {
    return config::config_hash(config::load_run_config_text(canonical->second, "run.h5").config) == id;
  } catch (const InputError&) {
    return false;
  }
}

void require_same_run(const results::RunRecord& record, const config::RunConfig& config,
                      const std::string& dir) {
  if (is_same_run(record, config)) return;
  const auto recorded = record.config.find("hash");
  throw InputError(fmt::format("{}: the config changed since this run started (run id {} → {}); "
                               "start a new run or restore the config",
                               dir, recorded == record.config.end() ? "none" : recorded->second,
                               config::config_hash(config)));
}

int64_t use_run_threads(const config::RunConfig& config, int ranks_on_this_node) {
  const int64_t threads =
      config.run.threads > 0
          ? config.run.threads
          : std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()) / std::max(1, ranks_on_this_node));
  torch::set_num_threads(int(threads));
  return threads;
}

void write_resolved_config(const results::RunPaths& paths, const config::RunConfig& config) {
  write_file_atomically(paths.config, fmt::format("# resolved config of run {} (id {})\n{}", config.name,
                                                  config::config_hash(config),
                                                  config::canonical_text(config, false)));
}

results::RunRecord fresh_record(const config::LoadedConfig& loaded, int64_t threads,
                                const torch::Device& device) {
  results::RunRecord r;
  r.config["name"] = loaded.config.name;
  r.config["yaml"] = loaded.text;
  r.config["canonical"] = config::canonical_text(loaded.config, false);
  r.config["hash"] = config::config_hash(loaded.config);
  r.config["source"] = loaded.source;
  r.config["git_revision"] = git_revision();
  r.config["libtorch_version"] = libtorch_version();
  r.config["blas"] = blas_config();
  r.config["device"] = device.str();
  r.config["precision"] = loaded.config.train.precision;
  r.threads = threads;
  return r;
}

}  // namespace harness::train
