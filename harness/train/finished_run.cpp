#include "harness/train/finished_run.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <filesystem>

#include "harness/config/engine_options.h"
#include "common/errors.h"
#include "harness/train/checkpoint.h"

namespace fs = std::filesystem;

namespace harness::train {

void load_model_weights(const std::vector<char>& checkpoint, models::GPT& model) {
  torch::serialize::InputArchive archive;
  // Mapped onto the model's device as it is read: a run trained on a GPU opens on a laptop.
  const auto params = model->parameters();
  load_checkpoint_archive(archive, checkpoint,
                          params.empty() ? torch::Device(torch::kCPU) : params.front().device());
  load_model_state(archive, model);  // the model's own entries; the optimiser's are left unread
}

FinishedRun open_finished_run(const std::string& run_dir, torch::Device device) {
  FinishedRun run{results::RunPaths(run_dir), {}, {}, nullptr, nullptr};
  if (!fs::is_directory(run_dir))
    throw InputError(fmt::format("{}: no such run directory", run_dir));
  if (!fs::exists(run.paths.results))
    throw InputError(fmt::format("{}: not a run directory (no run.h5)", run_dir));
  try {
    run.record = results::read_run_file(run.paths.results);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("cannot read the run file {}", e.what()));  // e names the file
  }
  if (run.record.state != results::RunState::kDone)
    throw InputError(fmt::format("{}: the run is {} at step {}{}; finish it first (harness train "
                                 "--resume, or harness sweep run)",
                                 run_dir, results::to_string(run.record.state),
                                 run.record.status_step,
                                 run.record.reason.empty() ? "" : " (" + run.record.reason + ")"));
  // The final model: the newest checkpoint that is whole (a damaged one is skipped, with a
  // warning naming it: the final step's results are in run.h5 either way).
  std::optional<RunCheckpoints::Read> checkpoint;
  try {
    checkpoint = RunCheckpoints(run_dir).read_newest_good(
        [](const std::string& warning) { spdlog::warn("{}", warning); });
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: the run is done but {}", run_dir, e.what()));
  }
  if (!checkpoint) throw InputError(fmt::format("{}: the run is done but its checkpoint is missing", run_dir));
  if (checkpoint->entry.step >= 0 && checkpoint->entry.step != run.record.status_step)
    spdlog::warn("{}: the model is step {}'s ({}), not the final step {}'s", run_dir,
                 checkpoint->entry.step, checkpoint->path, run.record.status_step);
  const auto canonical = run.record.config.find("canonical");
  if (canonical == run.record.config.end())
    throw InputError(fmt::format("{}: /config has no canonical attribute", run.paths.results));
  run.loaded = config::load_run_config_text(canonical->second,
                                            run.paths.results + ":/config/canonical");
  // A run trained with the CUDA kernel opens on a CPU with the fused one: the same maths, and
  // the kernel is not part of the run id.
  if (!device.is_cuda() && run.loaded.config.attention.kernel == "cuda") run.loaded.config.attention.kernel = "fused";
  run.dataset = std::make_unique<data::Dataset>(run.loaded.config.data);
  run.model = models::GPT(config::gpt_options(run.loaded.config, run.dataset->vocab_size()));
  try {
    load_model_weights(checkpoint->bytes, run.model);
  } catch (const c10::Error& e) {
    throw InputError(fmt::format("{}: cannot load the model from {}: {}", run_dir,
                                 checkpoint->path, e.what_without_backtrace()));
  }
  run.model->to(device);
  run.model->eval();
  return run;
}

}  // namespace harness::train
