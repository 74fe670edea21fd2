#!/usr/bin/env bash
# Training throughput and peak memory of `harness train` against its nanoGPT-style Python peer
# (bench/peer/nanogpt_peer.py on the project's pinned torch, .venv/): same model, optimiser step, data,
# batch, context, steps and threads (bench/peer/bench.yaml).
#
#   bench/train_vs_peer.sh [BUILD_DIR] [THREADS]
#
#   BUILD_DIR  holds the harness executable (default: build); nothing is built here
#   THREADS    torch threads for both (default: nproc)
#   env REPEATS=2   runs of each, interleaved harness, peer, harness, peer, … (medians reported)
#   env WARMUP=5    first steps excluded from tokens/s
#   env STEPS=…     override train.steps of bench/peer/bench.yaml (default 60)
#   env CORPUS=DIR  a directory of .txt files instead of data/sotu
#   env SET='k=v …' more overrides for both, e.g. SET='train.context=256 train.batch_size=8'
#                   (model, train and attention keys the peer understands; see nanogpt_peer.py)
#   env OMP_WAIT_POLICY=PASSIVE|ACTIVE  for both (default PASSIVE, the harness's own default).
#                   It must be the same for both: at 2 threads on an idle machine ACTIVE is ~1.4x
#                   faster for either, so comparing the harness's PASSIVE with Python's default
#                   spin-waits measures the policy, not the implementations.
#
# Tokens/s: harness from /train/seconds and /train/tokens of run.h5 (training steps only: no
# validation, checkpoint or start-up), peer from its own per-step timer (same span: batch fetch
# to the end of the optimiser step); both over steps WARMUP+1 … STEPS. Peak RSS: `/usr/bin/time
# -v` of the whole process (start-up, data loading and the final validation included).
# Prints one table and a `RESULT …` line; exits non-zero only if something fails to run (a
# missed target is a result, not an error).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
THREADS="${2:-$(nproc)}"
REPEATS="${REPEATS:-2}"
WARMUP="${WARMUP:-5}"
STEPS="${STEPS:-}"
SET="${SET:-}"
CONFIG="$ROOT/bench/peer/bench.yaml"
PEER="$ROOT/bench/peer/nanogpt_peer.py"
PY="${PYTHON:-$ROOT/.venv/bin/python}"  # the project's torch (scripts/install-python.sh)
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac
HARNESS="$BUILD_DIR/harness"

die() { echo "train_vs_peer: $*" >&2; exit 1; }

[[ -x "$HARNESS" ]] || die "$HARNESS not found: build it first (cmake --build $BUILD_DIR --target harness_cli)"
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer, got '$THREADS'"
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || die "REPEATS must be a positive integer, got '$REPEATS'"
[[ "$WARMUP" =~ ^[0-9]+$ ]] || die "WARMUP must be an integer >= 0, got '$WARMUP'"
[[ -z "$STEPS" || "$STEPS" =~ ^[1-9][0-9]*$ ]] || die "STEPS must be a positive integer, got '$STEPS'"
CORPUS="${CORPUS:-}"  # a directory of .txt files instead of data/sotu (the CTest: the fixture)
if [[ -n "$CORPUS" ]]; then
  [[ -d "$CORPUS" ]] || die "CORPUS=$CORPUS is not a directory"
else
  [[ -d "$ROOT/data/sotu" ]] || die "the corpus $ROOT/data/sotu is missing (scripts/fetch-corpus.sh)"
fi
if [[ ! -x /usr/bin/time ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "train_vs_peer: installing GNU time (apt-get install -y time)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null || die "apt-get install time failed"
  else
    die "/usr/bin/time is missing: apt-get install time"
  fi
fi
"$PY" -c 'import torch, h5py' 2>/dev/null ||
  die "$PY lacks torch or h5py: scripts/install-python.sh"

TMP="$(mktemp -d /tmp/train_vs_peer.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
RESULTS="$TMP/results.tsv"
: >"$RESULTS"

overrides=()
[[ -n "$STEPS" ]] && overrides=(--set "train.steps=$STEPS")
[[ -n "$CORPUS" ]] && overrides+=(--set "data.corpus=$(realpath "$CORPUS")")
for kv in $SET; do
  [[ "$kv" == *=* ]] || die "SET entries must be key=value, got '$kv'"
  overrides+=(--set "$kv")
done

# The peer reads the harness's own resolved config (every key, defaults filled in, L-relative
# values resolved), so that it follows the harness's defaults wherever they move.
if ! (cd "$ROOT" && "$HARNESS" config show --config "$CONFIG" --set "data.data_dir=$ROOT/data" \
      "${overrides[@]}") >"$TMP/resolved.yaml" 2>"$TMP/resolved.err"; then
  cat "$TMP/resolved.err" >&2
  die "harness config show failed"
fi

peak_rss_kib() { sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$1"; }
cpu_seconds() {
  awk -F': ' '/User time \(seconds\)/ {u=$2} /System time \(seconds\)/ {s=$2} END {printf "%.2f", u+s}' "$1"
}

run_harness() {
  local i=$1 dir="$TMP/harness_run_$1"
  if ! (cd "$ROOT" && /usr/bin/time -v -o "$TMP/harness_$i.time" "$HARNESS" train \
        --config "$CONFIG" --set "data.data_dir=$ROOT/data" --set "run.threads=$THREADS" \
        "${overrides[@]}" --run-dir "$dir" --overwrite --no-progress) >"$TMP/harness_$i.log" 2>&1; then
    tail -n 20 "$TMP/harness_$i.log" >&2
    die "harness train failed (run $i)"
  fi
  local tps
  tps=$("$PY" - "$dir/run.h5" "$WARMUP" <<'EOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    state = f["status"].attrs["state"]
    state = state.decode() if isinstance(state, bytes) else str(state)
    s, t = f["train/seconds"][:], f["train/tokens"][:]
if state != "done":
    sys.exit(f"run state is {state!r}, not 'done'")
w = min(int(sys.argv[2]), len(s) - 1)
s0, t0 = (s[w - 1], t[w - 1]) if w > 0 else (0.0, 0)
print(f"{(t[-1] - t0) / (s[-1] - s0):.1f}")
EOF
  ) || die "cannot read tokens/s from $dir/run.h5"
  printf 'harness\t%s\t%s\t%s\t%s\n' "$i" "$tps" "$(peak_rss_kib "$TMP/harness_$i.time")" \
    "$(cpu_seconds "$TMP/harness_$i.time")" >>"$RESULTS"
  echo "  harness run $i: $tps tokens/s" >&2
}

run_peer() {
  local i=$1
  if ! /usr/bin/time -v -o "$TMP/peer_$i.time" "$PY" "$PEER" --config "$TMP/resolved.yaml" \
        --root "$ROOT" --threads "$THREADS" --warmup "$WARMUP" >"$TMP/peer_$i.log" 2>&1; then
    tail -n 20 "$TMP/peer_$i.log" >&2
    die "nanogpt_peer.py failed (run $i)"
  fi
  local tps
  tps=$(sed -n 's/^PEER_RESULT tokens_per_s=\([0-9.]*\) .*/\1/p' "$TMP/peer_$i.log")
  [[ -n "$tps" ]] || die "no PEER_RESULT line from nanogpt_peer.py (run $i)"
  printf 'peer\t%s\t%s\t%s\t%s\n' "$i" "$tps" "$(peak_rss_kib "$TMP/peer_$i.time")" \
    "$(cpu_seconds "$TMP/peer_$i.time")" >>"$RESULTS"
  echo "  peer    run $i: $tps tokens/s" >&2
}

export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
REVISION="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] && REVISION+="+dirty"
BUILT="$(date -r "$HARNESS" '+%Y-%m-%d %H:%M')"
echo "train_vs_peer: $THREADS thread(s), OMP_WAIT_POLICY=$OMP_WAIT_POLICY, $REPEATS repeat(s), warm-up $WARMUP steps, $(nproc) CPUs, load average $LOAD_BEFORE" >&2
for ((i = 1; i <= REPEATS; ++i)); do
  run_harness "$i"
  run_peer "$i"
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

"$PY" - "$RESULTS" "$THREADS" "$REPEATS" "$WARMUP" "$LOAD_BEFORE" "$LOAD_AFTER" "$HARNESS" "$REVISION" "$BUILT" "$SET" <<'EOF'
import os, statistics, sys
path, threads, repeats, warmup, load0, load1, harness, revision, built, extra = sys.argv[1:11]
rows = {}
for line in open(path):
    impl, _, tps, rss, cpu = line.split("\t")
    r = rows.setdefault(impl, {"tps": [], "rss": [], "cpu": []})
    r["tps"].append(float(tps)); r["rss"].append(int(rss) / 1024); r["cpu"].append(float(cpu))
names = {"harness": "harness train (C++, LibTorch)", "peer": "nanogpt_peer.py (torch " + __import__("torch").__version__ + ")"}
med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in rows.items()}
print(f"{harness} (tree {revision}, built {built}); bench/peer/bench.yaml"
      + (f" with {extra}" if extra.strip() else ""))
print(f"threads {threads} (OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, OPENBLAS_CORETYPE="
      f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}), {repeats} run(s) each (interleaved), tokens/s over the steps after "
      f"the first {warmup}; load average {load0} before, {load1} after")
print(f"{'implementation':34} {'tokens/s (median)':>17} {'runs':>22} {'peak RSS MiB':>13} {'CPU s':>7}")
for k in ("harness", "peer"):
    runs = ", ".join(f"{x:.0f}" for x in rows[k]["tps"])
    print(f"{names[k]:34} {med[k]['tps']:17.0f} {runs:>22} {max(rows[k]['rss']):13.0f} {med[k]['cpu']:7.1f}")
ratio = med["harness"]["tps"] / med["peer"]["tps"]
rss_ratio = max(rows["harness"]["rss"]) / max(rows["peer"]["rss"])
print(f"{'ratio harness/peer':34} {ratio:16.2f}x {'':>22} {rss_ratio:12.2f}x {med['harness']['cpu'] / med['peer']['cpu']:6.2f}x")
print("(peak RSS: the largest over the runs; CPU s: user+sys of the whole process, start-up included)")
target = "met" if ratio >= 1.5 and rss_ratio <= 1.0 else "NOT met"
print(f"target (>= 1.5x tokens/s, no more memory: #15): {target}")
print(f"RESULT threads={threads} harness_tokens_per_s={med['harness']['tps']:.1f} "
      f"peer_tokens_per_s={med['peer']['tps']:.1f} ratio={ratio:.3f} "
      f"harness_peak_rss_mib={max(rows['harness']['rss']):.1f} peer_peak_rss_mib={max(rows['peer']['rss']):.1f} "
      f"rss_ratio={rss_ratio:.3f}")
EOF
