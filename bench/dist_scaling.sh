#!/usr/bin/env bash
# Data-parallel scaling of `harness train` (#23): tokens/s of one process × 1 thread, one process ×
# 2 threads and 2 processes (--nproc 2) × 1 thread, side by side, interleaved, on the same config,
# with the share of the 2-rank step spent waiting for collectives (gradient all-reduce, Muon's
# all-gather). The 2 × 1 runs twice: as configured (25 MiB buckets: this model's 1.8 MB of
# gradients are one bucket, summed after the backward) and with the all-reduce overlapped with the
# backward in 256 KiB buckets (HARNESS_GRAD_BUCKET_KB=256).
#
#   bench/dist_scaling.sh [BUILD_DIR]          prints a Markdown table (RATIO lines on stderr)
#   env MODES="11 12 21 20"  which runs, in this order each round (2p: 2 × 1 with pinned ranks)
#   env RAW_OUT=FILE         append each run's tokens/s to FILE
#   env CONTEXTS="64 1024"   training contexts (bench/peer/bench.yaml, batch scaled to ~2k tokens)
#   env REPEATS=2 WARMUP=5 STEPS=60 CORPUS=DIR (a directory of .txt files instead of data/sotu)
#   env TOKENS_PER_STEP=2048  tokens per optimiser step; forwards stay ~2048 tokens
#                             (train.micro_batch_size), so 32768 is 16 accumulated micro-batches
#                             on one process and 8 per rank on two: compute outweighs the all-reduce
#
# Tokens/s from /train/seconds and /train/tokens of run.h5 over steps WARMUP+1 … STEPS (training
# steps only); the collectives' share from the run's last "data parallel: … in collectives" line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac
HARNESS="$BUILD_DIR/harness"
CONTEXTS="${CONTEXTS:-64 1024}"
REPEATS="${REPEATS:-2}"
WARMUP="${WARMUP:-5}"
STEPS="${STEPS:-60}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"  # h5py (scripts/install-python.sh)
[[ -x "$HARNESS" ]] || { echo "dist_scaling: $HARNESS not found" >&2; exit 1; }
CORPUS="${CORPUS:-}"  # a directory of .txt files instead of data/sotu (the CTest: the fixture)
TOKENS="${TOKENS_PER_STEP:-2048}"  # tokens per optimiser step (all ranks together)
[[ -n "$CORPUS" || -d "$ROOT/data/sotu" ]] || { echo "dist_scaling: corpus $ROOT/data/sotu missing (scripts/fetch-corpus.sh)" >&2; exit 1; }
TMP="$(mktemp -d /tmp/dist_scaling.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT

tokens_per_s() {  # run.h5 → tokens/s over steps WARMUP+1 … STEPS
  "$PY" - "$1" "$WARMUP" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    w = int(sys.argv[2]); s = f["train/seconds"][:]; t = f["train/tokens"][:]
    print(f"{(t[-1] - t[w - 1]) / (s[-1] - s[w - 1]):.0f}" if w > 0 else f"{t[-1] / s[-1]:.0f}")
PY
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# Modes: 11 = 1 process × 1 thread, 12 = 1 × 2 threads, 21 = 2 processes × 1 thread (--nproc 2),
# 20 = 2 × 1 with 256 KiB buckets (the all-reduce overlapped with the backward), 2p = 2 × 1 with
# each rank pinned to its own CPUs (HARNESS_PIN_RANKS=1, harness/distributed/launcher.cpp).
MODES="${MODES:-11 12 21 20}"
for m in $MODES; do case $m in 11|12|21|20|2p) ;; *) echo "dist_scaling: unknown mode '$m' in MODES" >&2; exit 1 ;; esac; done
mode_name() { case $1 in 11) echo "1 × 1" ;; 12) echo "1 × 2" ;; 21) echo "2 × 1" ;; 20) echo "2 × 1 overlapped" ;; 2p) echo "2 × 1 pinned" ;; esac; }

echo "# data-parallel scaling, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) logical CPUs; revision $(git -C "$ROOT" rev-parse --short HEAD)"
echo "- config: bench/peer/bench.yaml (2 layers, d_model 128, Muon + Adam), $STEPS steps, $TOKENS tokens per step, $REPEATS interleaved repeats of the modes ($MODES, in that order each round), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- tok/s: median [min–max] over the repeats; a ratio: the median [min–max] of the per-round ratios (the two runs of one round are minutes apart, not hours)"
echo
header="| L | batch (micro) |"; rule="|---|---|"
for m in $MODES; do header+=" $(mode_name "$m") tok/s |"; rule+="---|"; done
for m in $MODES; do [[ $m == 11 ]] && continue; header+=" $(mode_name "$m") / 1 × 1 |"; rule+="---|"; done
header+=" collectives in 2×1 |"; rule+="---|"
echo "$header"; echo "$rule"
RAW="${RAW_OUT:-}"  # env RAW_OUT=FILE: one line per run (L mode repeat tokens/s), appended
for L in $CONTEXTS; do
  batch=$(( TOKENS / L < 2 ? 2 : TOKENS / L ))
  batch=$(( batch % 2 ? batch + 1 : batch ))
  # Forwards of ~2048 tokens (train.micro_batch_size) whatever the step's size: a large step is
  # gradient accumulation, as real training does it, not a larger forward.
  micro=$(( 2048 / L < 1 ? 1 : 2048 / L ))
  (( micro > batch / 2 )) && micro=$(( batch / 2 ))
  set_args=(--set train.context=$L --set train.batch_size=$batch --set train.micro_batch_size=$micro --set train.steps=$STEPS
            --set eval.contexts=[L] --set eval.windows=2 --set run.out_dir="$TMP")
  [[ -n "$CORPUS" ]] && set_args+=(--set data.corpus="$(realpath "$CORPUS")")
  declare -A tps=()
  share=()
  rounds=0
  for r in $(seq "$REPEATS"); do
    # env DEADLINE=<epoch seconds>: no round starts after it (at least 2 rounds run)
    if [[ -n "${DEADLINE:-}" ]] && (( r > 2 && $(date +%s) >= DEADLINE )); then
      echo "dist_scaling: DEADLINE reached, $rounds of $REPEATS rounds run" >&2; break
    fi
    rounds=$r
    for mode in $MODES; do
      dir="$TMP/L$L-$mode-$r"
      common=(train --config "$ROOT/bench/peer/bench.yaml" "${set_args[@]}" --run-dir "$dir" --no-progress)
      case $mode in
        11) "$HARNESS" "${common[@]}" --set run.threads=1 >"$dir.log" 2>&1 ;;
        12) "$HARNESS" "${common[@]}" --set run.threads=2 >"$dir.log" 2>&1 ;;
        21) "$HARNESS" "${common[@]}" --set run.threads=1 --nproc 2 >"$dir.log" 2>&1 ;;
        20) HARNESS_GRAD_BUCKET_KB=256 "$HARNESS" "${common[@]}" --set run.threads=1 --nproc 2 >"$dir.log" 2>&1 ;;
        2p) HARNESS_PIN_RANKS=1 "$HARNESS" "${common[@]}" --set run.threads=1 --nproc 2 >"$dir.log" 2>&1 ;;
      esac || { echo "dist_scaling: mode $mode at L = $L failed:" >&2; tail -5 "$dir.log" >&2; exit 1; }
      v=$(tokens_per_s "$dir/run.h5")
      tps[$mode,$r]=$v
      [[ -n "$RAW" ]] && echo "L=$L mode=$mode repeat=$r tokens_per_s=$v" >>"$RAW"
      if [[ $mode == 21 ]]; then
        share+=("$(sed -n 's/.*in collectives (\([0-9.]*\)%).*/\1/p' "$dir/train.log" | tail -n 1)")
      fi
      rm -rf "$dir"
    done
  done
  row="| $L | $batch ($micro), $rounds rounds |"
  for m in $MODES; do
    vals=(); for r in $(seq "$rounds"); do vals+=("${tps[$m,$r]}"); done
    row+=" $(median "${vals[@]}") [$(printf '%s\n' "${vals[@]}" | sort -n | head -1)–$(printf '%s\n' "${vals[@]}" | sort -n | tail -1)] |"
  done
  for m in $MODES; do
    [[ $m == 11 ]] && continue
    if [[ " $MODES " == *" 11 "* ]]; then
      ratios=(); for r in $(seq "$rounds"); do ratios+=("$(awk -v a="${tps[$m,$r]}" -v b="${tps[11,$r]}" 'BEGIN { printf "%.3f", a / b }')"); done
      med=$(median "${ratios[@]}"); lo=$(printf '%s\n' "${ratios[@]}" | sort -n | head -1); hi=$(printf '%s\n' "${ratios[@]}" | sort -n | tail -1)
      row+=" $(printf '%.2f' "$med")× [$(printf '%.2f' "$lo")–$(printf '%.2f' "$hi")] |"
      echo "RATIO L=$L mode=$m over=11 median=$med min=$lo max=$hi rounds=$rounds" >&2
    else
      row+=" – |"
    fi
  done
  if ((${#share[@]})); then row+=" $(median "${share[@]}")% |"; else row+=" – |"; fi
  echo "$row"
  unset tps share
done
echo
echo "Targets (#23, this 2-core machine): 2 × 1 ≥ 1.8× the 1 × 1 and ≥ 1.2× the 1 × 2; #36: 2 × 1 ≥ 1.8× the 1 × 1 with ≥ 32k tokens per step (TOKENS_PER_STEP=32768)."
