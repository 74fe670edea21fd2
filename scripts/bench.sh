#!/usr/bin/env bash
# The performance tables of docs/performance.md, regenerated in one go (`make bench`): the machine, then
# bench_attention (fused CPU attention against the float64 reference, materialised float32 and
# the matmul floor) and bench_eval_stats (the attention statistics' share of a validation), as
# Markdown, printed and written to a file. Ratios are measured side by side in one run; run it on
# an idle machine (the load average is printed before and after).
#
#   scripts/bench.sh [BUILD_DIR] [OUT.md]       default: build, runs/bench/<UTC time>.md
#   BENCH_THREADS=N (default 2), BENCH_QUICK=1 (a first look in a minute)
#
# Data-parallel scaling (bench/dist_scaling.sh: 1×1, 1×2 threads, 2 processes × 1) runs when the
# default corpus is in data/sotu. The fused kernel against torch's FlexAttention and SDPA is
# bench/attention_vs_torch.sh (skipped with BENCH_QUICK). Training against the Python peer is
# bench/train_vs_peer.sh (the project's .venv torch; ~10 min).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-runs/bench/$(date -u +%Y%m%dT%H%M%SZ).md}
threads=${BENCH_THREADS:-2}
quick=()
[[ -n "${BENCH_QUICK:-}" ]] && quick=(--quick)   # a first look: T <= 2048, fewer repetitions
mkdir -p "$(dirname "$out")"

cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
isa=""
for f in avx512f avx512bw avx2 fma; do [[ " $cpu_flags " == *" $f "* ]] && isa+="$f "; done
{
  echo "# harness benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) logical CPUs; ISA: ${isa:-none of avx2/avx512}"
  echo "- memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); threads used: $threads"
  echo "- revision: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-unset}"
  echo
  echo "## Fused CPU attention: \`$build/bench_attention --threads $threads\`"
  echo
  "$build/bench_attention" --threads "$threads" "${quick[@]}"
  echo
  echo "## Attention statistics in a validation: \`$build/bench_eval_stats --threads $threads\`"
  echo
  "$build/bench_eval_stats" --threads "$threads"
  [[ -n "${BENCH_QUICK:-}" ]] ||
    "$build/bench_eval_stats" --threads "$threads" --contexts 16384 --windows 4 --reps 3 | tail -n 1
  echo
  if [[ -z "${BENCH_QUICK:-}" ]]; then
    echo "## Against torch's CPU kernels: \`bench/attention_vs_torch.sh $build $threads\`"
    echo
    bench/attention_vs_torch.sh "$build" "$threads" | tail -n +3
    echo
  fi
  if [[ -d data/sotu ]]; then
    echo "## Data-parallel scaling: \`bench/dist_scaling.sh $build\`"
    echo
    bench/dist_scaling.sh "$build" | tail -n +5
  else
    echo "(data-parallel scaling skipped: no corpus in data/sotu; scripts/fetch-corpus.sh data)"
  fi
  echo
  echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
echo "bench: written to $out" >&2
