// The attention module's fused CPU kernel alone, at one context: forward, and forward + backward,
// per method; min and median wall-clock ms over the reps. Written to compare two builds of the
// kernel with the same source on the same machine (bench/query_bias_overhead.sh runs this one
// against a base revision's, alternately); links only the attention library, so that a base
// revision builds it in minutes. Not a test.
//
//   bench_kernel_step [--T 8192] [--methods si+p-rope,alibi,...] [--reps 3] [--threads N]
#include "attention/attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int64_t kB = 1, kH = 2, kD = 64;

struct Args {
  int64_t T = 8192;
  std::vector<std::string> methods{"si+p-rope", "alibi", "kerple", "logn+p-rope"};
  int reps = 3;
  int threads = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--T" && has_value) {
      a.T = std::atoll(argv[++i]);
    } else if (s == "--reps" && has_value) {
      a.reps = std::max(1, std::atoi(argv[++i]));
    } else if (s == "--threads" && has_value) {
      a.threads = std::max(1, std::atoi(argv[++i]));
    } else if (s == "--methods" && has_value) {
      a.methods.clear();
      std::stringstream list(argv[++i]);
      for (std::string m; std::getline(list, m, ',');) a.methods.push_back(m);
    } else {
      std::fprintf(stderr, "usage: bench_kernel_step [--T N] [--methods a,b,...] [--reps N] [--threads N]\n");
      std::exit(2);
    }
  }
  return a;
}

// min and median ms of `reps` calls of f, after one untimed call.
template <class F>
std::pair<double, double> timed(int reps, const F& f) {
  f();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  torch::set_num_threads(args.threads);
  std::printf("| method | pass | T | min ms | median ms |\n| --- | --- | --- | --- | --- |\n");
  for (const auto& method : args.methods) {
    attention::MethodOptions o;
    o.method = method;
    o.heads = kH;
    o.head_dim = kD;
    o.train_context = 1024;
    o.kernel = "fused";
    attention::CausalAttention attn(o);
    torch::manual_seed(0);
    const auto q = torch::randn({kB, kH, args.T, kD}), k = torch::randn({kB, kH, args.T, kD}),
               v = torch::randn({kB, kH, args.T, kD});
    const auto [fwd_min, fwd_median] = timed(args.reps, [&] {
      torch::NoGradGuard no_grad;
      attn->forward(q, k, v);
    });
    std::printf("| %s | fwd | %lld | %.1f | %.1f |\n", method.c_str(), (long long)args.T, fwd_min, fwd_median);
    const auto qg = q.clone().requires_grad_(true), kg = k.clone().requires_grad_(true),
               vg = v.clone().requires_grad_(true);
    const auto w = torch::randn_like(q);
    const auto [bwd_min, bwd_median] = timed(args.reps, [&] { (attn->forward(qg, kg, vg) * w).sum().backward(); });
    std::printf("| %s | fwd+bwd | %lld | %.1f | %.1f |\n", method.c_str(), (long long)args.T, bwd_min, bwd_median);
    std::fflush(stdout);
  }
  return 0;
}
