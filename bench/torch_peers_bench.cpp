// The fused CPU attention with the scale-invariant transform (si+nope: no rotary, so the same
// logits as FlexAttention's score_mod in bench/flex_vs_sdpa.py) against LibTorch's own plain
// causal SDPA (at::scaled_dot_product_attention, is_causal: the same ATen kernel as Python's
// F.scaled_dot_product_attention), in one process, repetitions interleaved. bench/attention_vs_torch.sh
// runs it beside the Python side (SDPA and Flex) and joins the two on SDPA. Not a test.
//
//   bench_torch_peers [--threads N] [--contexts 4096,16384] [--head-dims 64,128] [--heads H]
//                     [--reps R]
//
// Prints one TSV line per case: `case T D pass kernel min_ms median_ms`.
#include "attention/attention.h"
#include "attention/method.h"
#include "bench/bench_common.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace po = boost::program_options;

struct Timing {
  std::vector<double> ms;
  double min() const { return *std::min_element(ms.begin(), ms.end()); }
  double median() const {
    auto s = ms;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

double time_ms(const std::function<void()>& step) {
  const auto t0 = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One call of `attend` on fresh (1, H, T, D) inputs: forward without autograd, or forward and
// backward against a fixed output gradient.
using Attend = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;
std::function<void()> step_of(Attend attend, int64_t H, int64_t T, int64_t D, bool backward) {
  torch::manual_seed(0);
  auto q = torch::randn({1, H, T, D}), k = torch::randn({1, H, T, D}), v = torch::randn({1, H, T, D});
  const auto grad = torch::randn({1, H, T, D});
  for (auto* x : {&q, &k, &v}) x->requires_grad_(backward);
  return [=]() mutable {
    if (!backward) {
      torch::NoGradGuard no_grad;
      attend(q, k, v);
      return;
    }
    for (auto* x : {&q, &k, &v}) x->mutable_grad() = torch::Tensor();
    attend(q, k, v).backward(grad);
  };
}

int run(int argc, char** argv) {
  po::options_description opts("bench_torch_peers options");
  std::string contexts = "4096,16384", head_dims = "64,128";
  int threads = 2, reps = 5;
  int64_t heads = 4;
  opts.add_options()("help", "this text")("threads", po::value(&threads)->default_value(2), "torch threads")(
      "contexts", po::value(&contexts)->default_value(contexts), "T values")(
      "head-dims", po::value(&head_dims)->default_value(head_dims), "D values")(
      "heads", po::value(&heads)->default_value(4), "H")("reps", po::value(&reps)->default_value(5),
                                                          "timed repetitions of each kernel (after one warm-up)");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (bench::help_requested(opts, vm)) return 0;
  torch::set_num_threads(threads);
  const auto numbers = [](const std::string& list) {
    std::vector<int64_t> out;
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');)
      if (!item.empty()) out.push_back(std::stoll(item));
    return out;
  };
  for (const int64_t D : numbers(head_dims)) {
    for (const int64_t T : numbers(contexts)) {
      attention::MethodOptions o;
      o.method = "si+nope";
      o.kernel = "fused";
      o.heads = heads;
      o.head_dim = D;
      o.train_context = T;
      o.parameters[attention::Parameter::kTau] = 10.0;
      attention::CausalAttention fused(o);
      const Attend ours = [fused](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) mutable {
        return fused->forward(q, k, v);
      };
      const Attend sdpa = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
        return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
      };
      for (const bool backward : {false, true}) {
        auto a = step_of(ours, heads, T, D, backward), b = step_of(sdpa, heads, T, D, backward);
        a();  // warm-up
        b();
        Timing ta, tb;
        for (int r = 0; r < reps; ++r) {
          ta.ms.push_back(time_ms(a));
          tb.ms.push_back(time_ms(b));
        }
        const char* pass = backward ? "fwd+bwd" : "fwd";
        fmt::print("case\t{}\t{}\t{}\tfused si\t{:.2f}\t{:.2f}\n", T, D, pass, ta.min(), ta.median());
        fmt::print("case\t{}\t{}\t{}\tsdpa (C++)\t{:.2f}\t{:.2f}\n", T, D, pass, tb.min(), tb.median());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::main_with("bench_torch_peers", argc, argv, run); }
