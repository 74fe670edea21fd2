#!/usr/bin/env bash
# One-shot measurement of everything docs/performance.md reports for #60, side by side in one run,
# on a quiet machine (nothing else running: pause any sweep first). About 12–16 minutes on 2 cores.
#
#   bench/perf-window.sh [BUILD_DIR]
#
# Writes its raw outputs under bench/out/<UTC time>/ (git-ignored) and the Markdown page
# docs/performance-measured.md (every figure as the tools printed it, with the CPU, revision, load
# and times), which docs/performance.md links. Nothing is typed by hand. Stages, in this order:
#   1. the machine: CPU, load, revision, torch, environment
#   2. step breakdown (bench_step_breakdown): bench/peer/bench.yaml — the quickstart's training
#      step (same model, L = 64, B = 32) — at 1 and 2 threads; L = 1024, B = 2 at 1 and 2 threads
#   2b. environment A/B on the harness's step: OpenMP wait policy / spin, ATen's AVX-512 kernels
#   3. harness vs the Python peer (bench/train_vs_peer.sh), 1 and 2 threads, REPEATS_PEER runs
#      each, interleaved
#   (run last, under a deadline: 5 before 4)
#   4. data parallel (bench/dist_scaling.sh) at L = 64, 32,768 tokens per step: 1 × 1, 2 × 1 and
#      2 × 1 with pinned ranks, REPEATS_DIST interleaved rounds, median and min–max of the
#      per-round ratios
#   5. memory (bench/memory_account.py): `harness --version`, a harness run and a peer run on
#      bench/peer/bench.yaml, by source (CUDA libraries, torch's, other, heap + anonymous)
# env: REPEATS_PEER=5 REPEATS_DIST=7 DIST_STEPS=14 DIST_WARMUP=2 BUDGET_MIN=17 SKIP="" (stages to skip,
#      e.g. SKIP="2b 5"), WRITE_DOCS=1 (0: a smoke run, the page stays in bench/out/ only)
# Benchmarks compare with sgemm: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for all of them.
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac
REPEATS_PEER="${REPEATS_PEER:-5}"
REPEATS_DIST="${REPEATS_DIST:-7}"
DIST_STEPS="${DIST_STEPS:-14}"
DIST_WARMUP="${DIST_WARMUP:-2}"
SKIP="${SKIP:-}"
BUDGET_MIN="${BUDGET_MIN:-17}"  # the data-parallel stage starts no round after BUDGET_MIN − 2 minutes
PY="${PYTHON:-$ROOT/.venv/bin/python}"
for exe in harness bench_step_breakdown; do
  [[ -x "$BUILD_DIR/$exe" ]] || { echo "perf-window: $BUILD_DIR/$exe missing: cmake --build $BUILD_DIR --target harness bench_step_breakdown" >&2; exit 1; }
done
STAMP="$(date -u '+%Y%m%dT%H%M%SZ')"
OUT="$ROOT/bench/out/$STAMP"
mkdir -p "$OUT"
PAGE="$OUT/performance-measured.md"
START=$(date +%s)
skip() { [[ " $SKIP " == *" $1 "* ]]; }
log() { echo "[perf-window $(date -u +%H:%M:%S), +$(( $(date +%s) - START )) s] $*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
REV="$(git -C "$ROOT" rev-parse --short HEAD)"
[[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no -- bench models harness common attention cli 2>/dev/null)" ]] && REV+="+dirty"

{
  echo "# Performance, measured (#60)"
  echo
  echo "Written by \`bench/perf-window.sh\` (raw outputs in \`bench/out/$STAMP/\`, not committed); do not edit by hand."
  echo
  echo "- when: $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: **$CPU**, $(nproc) logical CPUs ($(grep -qw avx512f /proc/cpuinfo && echo "AVX-512" || echo "no AVX-512")$(grep -qw amx_tile /proc/cpuinfo && echo ", AMX"), $(lscpu | sed -n 's/^Hypervisor vendor:[[:space:]]*//p' | head -1 | sed 's/^$/bare metal/;s/^\(..*\)$/\1 guest/' | sed 's/bare metal guest/bare metal/'))"
  echo "- revision: $REV; harness built $(date -r "$BUILD_DIR/harness" -u '+%Y-%m-%d %H:%M UTC'); torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
  echo "- environment: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset; OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset, so PASSIVE as the harness sets it}"
  echo "- load average at the start: $(load); other processes using CPU then: $(ps -eo pcpu=,comm= --sort=-pcpu | awk '$1 > 5 {printf "%s (%s%%) ", $2, $1}' | head -c 300)"
  echo
} >"$PAGE"

# 2. Step breakdown
if ! skip 2; then
  log "stage 2: step breakdown"
  {
    echo "## Step breakdown (bench_step_breakdown)"
    echo
    echo "Command: \`build/bench_step_breakdown --threads N [--set …]\`; see the bench's header for what each part holds and how the floor is counted."
    echo
  } >>"$PAGE"
  for spec in "L = 64, B = 32 (bench/peer/bench.yaml = the quickstart's step)|" \
              "L = 1024, B = 2|--set train.context=1024 --set train.batch_size=2"; do
    label="${spec%%|*}"; sets="${spec#*|}"
    for t in 1 2; do
      # shellcheck disable=SC2086
      (cd "$ROOT" && "$BUILD_DIR/bench_step_breakdown" --threads "$t" --steps 30 --profiled 10 --label "$label" $sets) \
        >"$OUT/breakdown-$t-${label%%,*}.md" 2>>"$OUT/breakdown.err" ||
        { echo "bench_step_breakdown failed:"; tail -5 "$OUT/breakdown.err"; } >&2
      cat "$OUT/breakdown-$t-${label%%,*}.md" >>"$PAGE"
    done
  done
fi

# 2b. Environment settings the harness could set, A/B on its own training step (bench_train_step,
# bench/peer/bench.yaml), interleaved rounds: OpenMP's wait (PASSIVE, the default; PASSIVE with a
# bounded spin GOMP_SPINCOUNT=1000 or 10000; ACTIVE) at 2 threads, and ATen's CPU kernels (AVX2, the
# default torch picks here, against ATEN_CPU_CAPABILITY=avx512) at 1 and 2 threads.
if ! skip 2b && [[ -x "$BUILD_DIR/bench_train_step" ]]; then
  log "stage 2b: environment A/B"
  AB="$OUT/env-ab.txt"; : >"$AB"
  for round in $(seq "${AB_ROUNDS:-3}"); do
    for spec in "2|default (PASSIVE)|OMP_WAIT_POLICY=PASSIVE" "2|GOMP_SPINCOUNT=1000|OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=1000" \
                "2|GOMP_SPINCOUNT=10000|OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000" \
                "2|ACTIVE|OMP_WAIT_POLICY=ACTIVE" "2|ATEN_CPU_CAPABILITY=avx512|OMP_WAIT_POLICY=PASSIVE ATEN_CPU_CAPABILITY=avx512" \
                "1|default (PASSIVE)|OMP_WAIT_POLICY=PASSIVE" "1|ATEN_CPU_CAPABILITY=avx512|OMP_WAIT_POLICY=PASSIVE ATEN_CPU_CAPABILITY=avx512"; do
      IFS='|' read -r t name envs <<<"$spec"
      # shellcheck disable=SC2086
      ms=$(cd "$ROOT" && env $envs "$BUILD_DIR/bench_train_step" --threads "$t" --steps "${AB_STEPS:-40}" --warmup 5 2>/dev/null |
           awk '$1 == "step" {print $2}')
      echo "$t|$name|$round|${ms:-nan}" >>"$AB"
    done
  done
  {
    echo "## Environment A/B on the harness's step (bench_train_step, bench/peer/bench.yaml)"
    echo
    echo "Median step ms of ${AB_STEPS:-40} steps, ${AB_ROUNDS:-3} interleaved rounds: median of the rounds [min–max]; ratio: default / this (above 1: faster). CPU: $CPU."
    echo
    echo "| threads | setting | step ms | vs default |"
    echo "|---|---|---|---|"
    "$PY" - "$AB" <<'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    t, name, _, ms = line.strip().split("|")
    rows.setdefault((t, name), []).append(float(ms))
for (t, name), v in rows.items():
    base = statistics.median(rows[(t, "default (PASSIVE)")])
    m = statistics.median(v)
    print(f"| {t} | {name} | {m:.2f} [{min(v):.2f}–{max(v):.2f}] | {base / m:.2f}× |")
    print(f"ENVAB threads={t} setting=\"{name}\" step_ms={m:.3f} ratio={base / m:.3f}", file=sys.stderr)
PYEOF
    echo
  } >>"$PAGE" 2>>"$OUT/env-ab.err"
fi

# 3. Harness vs the peer
if ! skip 3; then
  log "stage 3: harness vs peer"
  {
    echo "## Training against the Python peer (bench/train_vs_peer.sh)"
    echo
    echo "Command: \`REPEATS=$REPEATS_PEER bench/train_vs_peer.sh build THREADS\` (bench/peer/bench.yaml, L = 64, B = 32, 60 steps; medians of interleaved runs). CPU: $CPU."
    echo
  } >>"$PAGE"
  for t in 1 2; do
    REPEATS=$REPEATS_PEER "$ROOT/bench/train_vs_peer.sh" "$BUILD_DIR" "$t" >"$OUT/peer-$t.txt" 2>"$OUT/peer-$t.err" ||
      { echo "train_vs_peer.sh failed at $t threads:"; tail -5 "$OUT/peer-$t.err"; } >&2
    { echo "**$t thread(s)**"; echo; echo '```'; cat "$OUT/peer-$t.txt"; echo '```'; echo; } >>"$PAGE"
  done
fi

# 5. Memory
if ! skip 5; then
  log "stage 5: memory"
  {
    echo "## Memory by source (bench/memory_account.py)"
    echo
    echo "Each process's /proc/PID/smaps sampled every 50 ms, the sample with the largest Rss shown; peak RSS from /usr/bin/time. CPU: $CPU."
    echo
  } >>"$PAGE"
  "$PY" "$ROOT/bench/memory_account.py" --label "harness --version" -- "$BUILD_DIR/harness" --version >>"$PAGE" 2>>"$OUT/memory.err" || true
  RUN="$OUT/memory-run"
  (cd "$ROOT" && "$PY" "$ROOT/bench/memory_account.py" --label "harness train, bench/peer/bench.yaml, 1 thread" -- \
     "$BUILD_DIR/harness" train --config bench/peer/bench.yaml --set data.data_dir="$ROOT/data" --set run.threads=1 \
     --run-dir "$RUN" --overwrite --no-progress) >>"$PAGE" 2>>"$OUT/memory.err" || true
  "$BUILD_DIR/harness" config show --config "$ROOT/bench/peer/bench.yaml" --set data.data_dir="$ROOT/data" >"$OUT/resolved.yaml" 2>>"$OUT/memory.err" || true
  (cd "$ROOT" && "$PY" "$ROOT/bench/memory_account.py" --label "nanogpt_peer.py, bench/peer/bench.yaml, 1 thread" -- \
     "$PY" bench/peer/nanogpt_peer.py --config "$OUT/resolved.yaml" --root "$ROOT" --threads 1 --warmup 5) >>"$PAGE" 2>>"$OUT/memory.err" || true
  rm -rf "$RUN"
fi

# 4. Data parallel
if ! skip 4; then
  log "stage 4: data parallel"
  {
    echo "## Data parallel at 32,768 tokens per step (bench/dist_scaling.sh)"
    echo
    echo "Command: \`CONTEXTS=64 TOKENS_PER_STEP=32768 STEPS=$DIST_STEPS WARMUP=$DIST_WARMUP REPEATS=$REPEATS_DIST MODES='11 21 2p' bench/dist_scaling.sh build\`; 2 × 1 pinned: each rank bound to its own CPU (HARNESS_PIN_RANKS=1)."
    echo
  } >>"$PAGE"
  # No round starts after BUDGET_MIN minutes from the script's start (stage 5 then needs < 1 min).
  CONTEXTS=64 TOKENS_PER_STEP=32768 DEADLINE=$(( START + BUDGET_MIN * 60 - 120 )) STEPS=$DIST_STEPS WARMUP=$DIST_WARMUP REPEATS=$REPEATS_DIST MODES="11 21 2p" \
    RAW_OUT="$OUT/dist-runs.txt" "$ROOT/bench/dist_scaling.sh" "$BUILD_DIR" >"$OUT/dist.md" 2>"$OUT/dist.err" ||
    { echo "dist_scaling.sh failed:"; tail -5 "$OUT/dist.err"; } >&2
  cat "$OUT/dist.md" >>"$PAGE"
  echo >>"$PAGE"
fi

{
  echo "---"
  echo "Load average at the end: $(load); the whole script took $(( ($(date +%s) - START) / 60 )) min $(( ($(date +%s) - START) % 60 )) s."
} >>"$PAGE"
if [[ "${WRITE_DOCS:-1}" == 1 ]]; then
  cp "$PAGE" "$ROOT/docs/performance-measured.md"
  log "done: $OUT, docs/performance-measured.md"
else
  log "done: $OUT (WRITE_DOCS=0: docs/performance-measured.md left alone)"
fi
grep -h '^BREAKDOWN\|^RESULT\|^RATIO\|^MEMORY\|^ENVAB' "$OUT"/*.md "$OUT"/*.txt "$OUT"/*.err "$PAGE" 2>/dev/null | sort -u >"$OUT/summary.txt" || true
cat "$OUT/summary.txt"
