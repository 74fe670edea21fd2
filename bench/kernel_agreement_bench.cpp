// One training step's loss and gradients with two attention kernels on the same model, weights
// and batch: the kernel under test (attention.kernel of the config: cuda on a GPU, fused on the
// CPU) against `--against` (default reference, the float64 one), on the config's device or, with
// `--against-device cpu`, the whole step on the CPU (a GPU step against a CPU step). Prints the relative error of the
// loss and of every parameter's gradient (max |a − b| / max |b|) and exits 1 above --tolerance.
// scripts/gpu-check.sh runs it at the paper's width and T = 4096 with the CUDA kernel; a CTest
// runs it on the CPU (fused against reference) at a small size.
//
//   bench_kernel_agreement [--config FILE] [--set key=value]... [--against KERNEL]
//                          [--against-device cpu] [--batch N] [--tolerance X] [--threads N]
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "harness/config/engine_options.h"
#include "models/gpt.h"

namespace {

using Clock = std::chrono::steady_clock;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string config_path = "sweeps/gpu/paper-162m.yaml", against = "reference", against_device;
  std::vector<std::string> overrides;
  int64_t batch = 1;
  double tolerance = -1;
  int threads = 1;
  po::options_description opts("bench_kernel_agreement options");
  opts.add_options()("help,h", "this help")(
      "config", po::value(&config_path), "run config (default sweeps/gpu/paper-162m.yaml)")(
      "set", po::value(&overrides)->composing(), "override a key (repeatable)")(
      "against", po::value(&against), "the kernel to compare with (default reference)")(
      "against-device", po::value(&against_device), "cpu: the compared step runs on the CPU (default: the config's device)")(
      "batch", po::value(&batch), "sequences of train.context tokens (default 1)")(
      "tolerance", po::value(&tolerance), "largest relative error allowed (default 1e-4 fp32, 3e-2 bf16)")(
      "threads", po::value(&threads), "torch threads (default 1)");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (bench::help_requested(opts, vm)) return 0;

  auto tested = bench::configured_model(config_path, overrides, threads);
  const auto& c = tested.loaded.config;
  if (tolerance < 0) tolerance = c.train.precision == "bf16" ? 3e-2 : 1e-4;
  auto other_overrides = overrides;
  other_overrides.push_back("attention.kernel=" + against);
  if (!against_device.empty()) other_overrides.push_back("run.device=" + against_device);
  auto other = bench::configured_model(config_path, other_overrides, threads);
  const auto device_of = [](const harness::config::RunConfig& rc) {
    return rc.run.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  };
  const torch::Device device = device_of(c), other_device = device_of(other.loaded.config);

  // Equal weights, none zero (the zero-initialised projections would leave gradients at zero).
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(c.train.seed + 1);
    auto pa = tested.model->parameters(), pb = other.model->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      pa[i].add_(0.02 * torch::randn_like(pa[i]));
      pb[i].copy_(pa[i]);
    }
  }
  const int64_t L = c.train.context;
  const auto all_tokens = torch::randint(0, tested.vocab, {batch, L + 1}, torch::kLong);
  struct Result {
    double loss = 0, seconds = 0;
    std::vector<std::pair<std::string, torch::Tensor>> grads;
  };
  const auto step = [&](models::GPT& model, const torch::Device& on) {
    const auto tokens = all_tokens.to(on);
    model->to(on);
    model->train();
    const auto t0 = Clock::now();
    auto loss = model->loss(tokens.slice(1, 0, L), tokens.slice(1, 1, L + 1));
    loss.backward();
    Result r;
    r.loss = loss.item<double>();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (const auto& p : model->named_parameters()) r.grads.emplace_back(p.key(), p.value().grad().to(torch::kCPU));
    return r;
  };
  const Result a = step(tested.model, device), b = step(other.model, other_device);

  fmt::print("{}: {} layers, d_model {}, {} heads × {}, L = {}, B = {}, method {}, {} on {}\n", config_path,
             c.model.layers, c.model.d_model, c.model.heads, c.model.head_dim, L, batch, c.attention.method,
             c.train.precision, device.str());
  fmt::print("kernel {} ({:.2f} s fwd+bwd) against {} on {} ({:.2f} s); relative error = max|a − b| / max|b|\n",
             c.attention.kernel, a.seconds, against, other_device.str(), b.seconds);
  double worst = std::fabs(a.loss - b.loss) / std::max(std::fabs(b.loss), 1e-30);
  fmt::print("{:<40} {:>12.3e}   ({:.6f} vs {:.6f})\n", "loss", worst, a.loss, b.loss);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    const double e = relative_error(a.grads[i].second, b.grads[i].second);
    worst = std::max(worst, e);
    fmt::print("{:<40} {:>12.3e}\n", "grad " + a.grads[i].first, e);
  }
  const bool pass = worst <= tolerance;
  fmt::print("kernel agreement: {} (worst {:.3e}, tolerance {:.1e})\n", pass ? "PASSED" : "FAILED", worst, tolerance);
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return bench::main_with("bench_kernel_agreement", argc, argv, run); }
