// Fused CPU attention against the float64 reference (the oracle), against materialised float32
// attention written the straightforward LibTorch way (the fair speed baseline), and against the
// matmul floor (the case's FLOPs at the sgemm rate measured in the same run): time, peak memory,
// GFLOP/s. Not a test.
//
//   bench_attention [--quick] [--threads N] [--isa auto|avx512|avx2|generic] [--budget-gb G]
//                   [--method NAME]
//
// Every case runs in its own forked child (so one case's allocations never hide another's, and an
// out-of-memory reference cannot take the table down). Peak memory = the child's peak RSS
// (getrusage ru_maxrss) minus its RSS once the inputs exist: bytes the attention call itself
// touched. FLOPs: causal forward 2·T²·d·H (QKᵀ and PV over the lower triangle); forward+backward
// 3.5× that (the backward's five tile matmuls against the forward's two, FlashAttention-2's
// convention). The reference always computes in float64 (it is the oracle); it is skipped when its
// estimated peak exceeds --budget-gb and its computed size is printed instead. Times: wall-clock
// min and median over the reps, plus the process CPU time of the median rep (all threads), which
// shows when other processes were competing for the cores. Each child keeps freed memory for
// reuse as `harness train` and `eval` do (common/process_setup.h): with glibc's defaults
// every call's multi-MiB outputs and operand copies were fresh pages, faulted in again each time
// (the fused forward at T = 8192: 122.9 → 105.1 ms).
#include "attention/attention.h"
#include "attention/fused_cpu.h"
#include "attention/method.h"
#include "attention/reference.h"
#include "attention/score_mod.h"
#include "common/process_setup.h"

#include <torch/torch.h>

#include <sys/resource.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Measurement {
  bool ok = false;
  double ms_min = 0, ms_median = 0;
  double cpu_ms = 0;  // process CPU time per rep (all threads), median rep
  double peak_mb = 0;
  int reps = 0;
};

double cpu_ms_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Runs one case in a forked child. make(T) creates the inputs for context T and returns the step
// to time. A step at a small context runs first, so that code pages, allocator arenas and thread
// stacks touched by any call are resident before the baseline RSS is taken.
using Maker = std::function<std::function<void()>(int64_t)>;
Measurement in_child(const Maker& make, int64_t T, int threads, const std::string& isa,
                     double min_seconds, int max_reps) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Measurement m;
    try {
      harness::keep_freed_memory_for_reuse();
      torch::set_num_threads(threads);
      attention::set_fused_cpu_isa(isa);
      make(std::min<int64_t>(T, 64))();
      auto step = make(T);
      const double base = rss_mb();
      step();  // warm-up (also the peak-memory run)
      std::vector<double> ms, cpu;
      const auto start = std::chrono::steady_clock::now();
      while (int(ms.size()) < max_reps) {
        const double c0 = cpu_ms_now();
        const auto t0 = std::chrono::steady_clock::now();
        step();
        const auto t1 = std::chrono::steady_clock::now();
        cpu.push_back(cpu_ms_now() - c0);
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (std::chrono::duration<double>(t1 - start).count() > min_seconds && ms.size() >= 2) break;
      }
      std::sort(ms.begin(), ms.end());
      std::sort(cpu.begin(), cpu.end());
      m.cpu_ms = cpu[cpu.size() / 2];
      m.ok = true;
      m.ms_min = ms.front();
      m.ms_median = ms[ms.size() / 2];
      m.reps = int(ms.size());
      m.peak_mb = std::max(0.0, peak_rss_mb() - base);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "case failed: %s\n", e.what());
    }
    if (write(fds[1], &m, sizeof m) != ssize_t(sizeof m)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Measurement m;
  const ssize_t got = read(fds[0], &m, sizeof m);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != ssize_t(sizeof m)) m = Measurement{};  // the child died (e.g. out of memory)
  return m;
}

struct Args {
  bool quick = false;
  int threads = 2;
  std::string isa = "auto";
  double budget_gb = 8.0;
  std::string method = "si+p-rope";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--quick")
      a.quick = true;
    else if (s == "--threads")
      a.threads = std::stoi(next());
    else if (s == "--isa")
      a.isa = next();
    else if (s == "--budget-gb")
      a.budget_gb = std::stod(next());
    else if (s == "--method")
      a.method = next();
    else {
      std::fprintf(stderr,
                   "usage: bench_attention [--quick] [--threads N] [--isa auto|avx512|avx2|generic] "
                   "[--budget-gb G] [--method NAME]\n");
      std::exit(2);
    }
  }
  return a;
}

// Shapes of every case: (B, H, T, D) with these B, H, D.
constexpr int64_t kB = 1, kH = 4, kD = 64;

using Attend = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

// Random q, k, v (B, H, T, D) and the timed step: `attend` forward without autograd, or forward and
// backward.
std::function<void()> timed_step(int64_t T, bool backward, Attend attend) {
  torch::manual_seed(0);
  auto q = torch::randn({kB, kH, T, kD}), k = torch::randn({kB, kH, T, kD}), v = torch::randn({kB, kH, T, kD});
  if (backward) {
    q.requires_grad_();
    k.requires_grad_();
    v.requires_grad_();
  }
  auto grad = torch::randn({kB, kH, T, kD});
  return [=]() mutable {
    if (backward) {
      q.mutable_grad() = torch::Tensor();
      k.mutable_grad() = torch::Tensor();
      v.mutable_grad() = torch::Tensor();
      attend(q, k, v).backward(grad);
    } else {
      torch::NoGradGuard no_grad;
      attend(q, k, v);
    }
  };
}

// The method through CausalAttention with `kernel` ("fused" or "reference").
Maker kernel_step(const attention::MethodOptions& opts, const std::string& kernel, bool backward) {
  return [=](int64_t T) {
    auto o = opts;
    o.kernel = kernel;
    attention::CausalAttention attn(o);
    return timed_step(T, backward, [attn](const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v) mutable { return attn->forward(q, k, v); });
  };
}

// Materialised float32: the method's multiplier and bias as (T, T) tables from the policy, then
// logits, masked softmax and P·V with autograd, as one would write it in LibTorch.
Maker materialised_fp32_step(const attention::MethodOptions& opts, bool backward) {
  return [=](int64_t T) {
    const attention::Method m = attention::resolve_method(opts);
    const attention::ScoreMod mod = attention::score_mod(m, T);
    const auto slopes = attention::alibi_slopes(kH);
    auto mult = torch::zeros({kH, T, T}), bias = torch::full({kH, T, T}, -INFINITY);
    auto mp = mult.accessor<float, 3>(), bp = bias.accessor<float, 3>();
    const double hs = attention::initial_head_scale(m);
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          const int t = int(i - j);
          mp[h][i][j] = float(hs * mod.scale * attention::fixed_multiplier<double>(mod, int(i), t));
          bp[h][i][j] =
              float(attention::distance_bias<double>(mod, t, int(h)) - (m.alibi() ? slopes[h] * t : 0.0));
        }
    const auto rot = attention::rotary_tables(m, T, torch::TensorOptions().dtype(torch::kFloat32));
    return timed_step(T, backward, [=](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
      const auto qr = attention::apply_rotary(q, rot), kr = attention::apply_rotary(k, rot);
      const auto logits = torch::matmul(qr, kr.transpose(-2, -1)) * mult + bias;  // (B, H, T, T)
      return torch::matmul(torch::softmax(logits, -1), v);
    });
  };
}

// The measurements of one case (context, pass) and what it takes to print them as table rows.
struct Case {
  int64_t T = 0;
  bool backward = false;
  double flops = 0.0, mm_gflops = 0.0, budget_gb = 0.0;
  Measurement fused, fp32, ref;
  bool run_fp32 = false, run_ref = false;
  double fp32_est_gb = 0.0, ref_est_gb = 0.0;  // estimated peaks, which decide whether each runs
};

// vs columns: the other kernel's time / this one's (the fused row only).
void print_row(const Case& c, const char* kernel, const Measurement& m, bool compare) {
  const char* pass = c.backward ? "fwd+bwd" : "fwd";
  if (!m.ok) {
    std::printf("| %lld | %s | %s | failed | | | | | | | | |\n", (long long)c.T, pass, kernel);
    return;
  }
  const double gflops = c.flops / (m.ms_min * 1e-3) / 1e9;
  char vs_ref[32] = "", vs_fp32[32] = "", mem[32] = "";
  if (compare && c.ref.ok) {
    std::snprintf(vs_ref, sizeof vs_ref, "%.2fx", c.ref.ms_min / m.ms_min);
    std::snprintf(mem, sizeof mem, "%.2f%%", 100.0 * m.peak_mb / std::max(c.ref.peak_mb, 1e-9));
  } else if (compare) {
    std::snprintf(mem, sizeof mem, "%.3f%%*", 100.0 * m.peak_mb / (c.ref_est_gb * 1e3));
  }
  if (compare && c.fp32.ok) std::snprintf(vs_fp32, sizeof vs_fp32, "%.2fx", c.fp32.ms_min / m.ms_min);
  std::printf("| %lld | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f%% | %s | %s | %s |\n", (long long)c.T,
              pass, kernel, m.ms_min, m.ms_median, m.cpu_ms, m.peak_mb, gflops,
              c.mm_gflops > 0 ? 100.0 * gflops / c.mm_gflops : 0.0, vs_ref, vs_fp32, mem);
}

void print_not_run(const Case& c, const char* kernel, double est_gb, const char* what, double one_gb) {
  std::printf("| %lld | %s | %s | not run: estimated peak %.1f GB > budget %.1f GB "
              "(one B·H·T×T %s tensor = %.2f GB) | | | | | | | | |\n",
              (long long)c.T, c.backward ? "fwd+bwd" : "fwd", kernel, est_gb, c.budget_gb, what, one_gb);
}

// Times the fused kernel, and the materialised float32 and float64 reference paths where their
// estimated peak fits the budget, then prints the case's rows.
void bench_case(const Args& args, const attention::MethodOptions& opts, int64_t T, bool backward, double mm_gflops) {
  const double min_seconds = args.quick ? 0.5 : 2.0;
  const int max_reps = args.quick ? 5 : 10;
  Case c;
  c.T = T;
  c.backward = backward;
  c.mm_gflops = mm_gflops;
  c.budget_gb = args.budget_gb;
  const double fwd_flops = 2.0 * double(T) * double(T) * kD * kH;
  c.flops = backward ? 3.5 * fwd_flops : fwd_flops;
  c.fused = in_child(kernel_step(opts, "fused", backward), T, args.threads, args.isa, min_seconds, max_reps);
  // Materialised float32 peak: the two tables and ~3 B·H·T×T float32 tensors (inference), ~7 with
  // autograd.
  const double tt32_gb = double(T) * double(T) * 4.0 / 1e9;
  c.fp32_est_gb = (2.0 + (backward ? 7.0 : 3.0) * kB) * kH * tt32_gb;
  c.run_fp32 = c.fp32_est_gb <= args.budget_gb;
  if (c.run_fp32) c.fp32 = in_child(materialised_fp32_step(opts, backward), T, args.threads, args.isa, min_seconds, 3);
  // Reference peak estimate: inference keeps ~7 T×T float64 matrices (one head at a time); with
  // autograd ~10 B·H·T×T float64 tensors are alive.
  const double tt_gb = double(T) * double(T) * 8.0 / 1e9;
  c.ref_est_gb = backward ? 10.0 * kB * kH * tt_gb : 7.0 * tt_gb;
  c.run_ref = c.ref_est_gb <= args.budget_gb;
  if (c.run_ref) c.ref = in_child(kernel_step(opts, "reference", backward), T, args.threads, args.isa, min_seconds, 3);

  print_row(c, "fused", c.fused, true);
  if (c.run_fp32)
    print_row(c, "fp32 mat.", c.fp32, false);
  else
    print_not_run(c, "fp32 mat.", c.fp32_est_gb, "float32", kB * kH * tt32_gb);
  if (c.run_ref)
    print_row(c, "reference", c.ref, false);
  else
    print_not_run(c, "reference", c.ref_est_gb, "float64", kB * kH * tt_gb);
  if (mm_gflops > 0)
    std::printf("| %lld | %s | %s | %.1f | | | | %.1f | 100%% | | | |\n", (long long)T, backward ? "fwd+bwd" : "fwd",
                "mm floor", c.flops / (mm_gflops * 1e9) * 1e3, mm_gflops);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  torch::set_num_threads(args.threads);  // the parent only forks; children set it again
  const std::vector<int64_t> contexts =
      args.quick ? std::vector<int64_t>{256, 1024, 2048} : std::vector<int64_t>{512, 2048, 8192, 16384};

  attention::MethodOptions opts;
  opts.method = args.method;
  opts.heads = kH;
  opts.head_dim = kD;
  opts.train_context = 1024;
  opts.parameters[attention::Parameter::kTau] = 10.0;

  // Matmul reference point: square float32 sgemm through LibTorch, same threads, same run.
  const int64_t N = 2048;
  const Measurement mm = in_child(
      [&](int64_t n) {
        auto a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
        return std::function<void()>([=]() mutable { torch::mm_out(c, a, b); });
      },
      N, args.threads, args.isa, args.quick ? 0.5 : 2.0, 20);
  const double mm_gflops = mm.ok ? 2.0 * N * N * N / (mm.ms_min * 1e-3) / 1e9 : 0.0;

  // The ISA name without running a kernel in the parent (no OpenMP pool before fork()).
  attention::set_fused_cpu_isa(args.isa);
  const std::string isa_name = attention::fused_cpu_isa();
  std::printf("attention bench: method %s, B=%lld H=%lld d=%lld, float32 inputs, %d threads, "
              "fused ISA %s\n\n",
              args.method.c_str(), (long long)kB, (long long)kH, (long long)kD, args.threads, isa_name.c_str());
  std::printf("matmul (torch::mm %lldx%lld float32): %.1f GFLOP/s (min %.2f ms, CPU %.2f ms)\n\n",
              (long long)N, (long long)N, mm_gflops, mm.ms_min, mm.cpu_ms);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("load average at start: %s; OMP_WAIT_POLICY %s (CPU ms ≫ threads × wall ms means "
              "other processes shared the cores)\n\n",
              load_average().c_str(), wait_policy ? wait_policy : "unset (libgomp: spin, then sleep)");
  // A Markdown table, as docs/performance.md holds it (scripts/bench.sh).
  std::printf("| T | pass | kernel | min ms | median ms | CPU ms | peak MB | GFLOP/s | %% of matmul | "
              "vs ref | vs fp32 | mem/ref |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | "
              "--- | --- | --- |\n");
  for (const int64_t T : contexts)
    for (const bool backward : {false, true}) bench_case(args, opts, T, backward, mm_gflops);
  std::printf("\nvs ref, vs fp32: float64 reference (the oracle) or materialised float32 time / fused "
              "time. mm floor: the case's FLOPs at the matmul rate. mem/ref: fused peak / reference "
              "peak (* = against the reference's estimated peak, not run).\n");
  return 0;
}
