#include "harness/train/run_setup.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <stdexcept>

#include "common/errors.h"
#include "harness/config/engine_options.h"
#include "harness/train/run_directory.h"

namespace harness::train {

std::unique_ptr<RunSetup> build_run_setup(const config::LoadedConfig& loaded, const distributed::World& world) {
  const auto& c = loaded.config;
  torch::Device device = pick_device(loaded);
  if (device.is_cuda() && world.distributed()) device = torch::Device(torch::kCUDA, world.local_rank);
  auto s = std::unique_ptr<RunSetup>(new RunSetup{data::Dataset(c.data), {}, nullptr, nullptr, device});
  try {
    s->eval_windows = data::make_validation_windows(
        s->dataset.validation_documents(), c.eval_contexts(), [&](int64_t T) { return c.eval_windows_at(T); },
        c.eval.seed, c.eval.same_text);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: eval.contexts: {}", loaded.location_of("eval.contexts").str(), e.what()));
  }
  torch::manual_seed(c.train.seed);
  try {
    s->model = models::GPT(config::gpt_options(c, s->dataset.vocab_size()));
    s->model->to(s->device);
    s->optim = std::make_unique<models::Optimizers>(s->model, c.optim);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}", loaded.source, e.what()));
  }
  return s;
}

}  // namespace harness::train
