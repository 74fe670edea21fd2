#!/usr/bin/env bash
# The fused CPU attention (scale-invariant, si+nope) against torch 2.x's own CPU kernels, side by
# side in one run, as one Markdown table: FlexAttention (torch.compile'd, the same score_mod) and
# SDPA's plain causal kernel, forward and forward+backward, at T = 4096 and 16384, D = 64 and 128
# (B = 1, H = 4, float32). Two processes: bench_torch_peers (C++: fused and SDPA) and
# bench/flex_vs_sdpa.py (Python: SDPA and Flex), each interleaving its kernels' repetitions and
# both on the same threads; fused vs Flex is joined through SDPA, which both time (the same ATen
# kernel: the two SDPA columns should agree, and the table shows both).
#
#   bench/attention_vs_torch.sh [BUILD_DIR] [THREADS]     (defaults: build, 2)
#   env CONTEXTS=4096,16384 HEAD_DIMS=64,128 REPS=5
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
THREADS="${2:-2}"
CONTEXTS="${CONTEXTS:-4096,16384}"
HEAD_DIMS="${HEAD_DIMS:-64,128}"
REPS="${REPS:-5}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # the same for both (the harness's default)
[[ -x "$BUILD_DIR/bench_torch_peers" ]] || { echo "attention_vs_torch: $BUILD_DIR/bench_torch_peers not built" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "# fused CPU attention vs torch $("$PY" -c 'import torch; print(torch.__version__)') on the CPU, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) logical CPUs; threads $THREADS; OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
echo "- revision: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- B = 1, H = 4, float32, causal; times are minima over $REPS repetitions after a warm-up (a compile, for Flex)"
echo
for D in ${HEAD_DIMS//,/ }; do
  for T in ${CONTEXTS//,/ }; do
    "$BUILD_DIR/bench_torch_peers" --threads "$THREADS" --contexts "$T" --head-dims "$D" --reps "$REPS" >>"$TMP/cases.tsv"
    # One inductor compile thread: no pool of compile workers left beside the timed kernels.
    TORCHINDUCTOR_COMPILE_THREADS=1 "$PY" "$ROOT/bench/flex_vs_sdpa.py" --threads "$THREADS" --contexts "$T" --head-dims "$D" --reps "$REPS" \
      >>"$TMP/cases.tsv" 2>>"$TMP/flex.err" || echo "attention_vs_torch: flex_vs_sdpa.py failed (T=$T D=$D)" >&2
  done
done
"$PY" - "$TMP/cases.tsv" <<'PY'
import collections, math, sys
t = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    parts = line.rstrip("\n").split("\t")
    if parts[0] != "case":
        continue
    _, T, D, p, kernel, low, _median = parts
    t[(int(T), int(D), p)][kernel] = float(low)
def ratio(a, b):
    return f"{a / b:.2f}x" if a == a and b == b else "–"
def ms(x):
    return f"{x:.1f}" if x == x else "not run"
print("| T | D | pass | fused si ms | SDPA ms (C++) | SDPA ms (Python) | Flex si ms | fused vs SDPA | fused vs Flex | fused vs Flex, raw |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (T, D, p), k in sorted(t.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2] != "fwd")):
    fused, sc, sp, flex = (k.get(n, math.nan) for n in ("fused si", "sdpa (C++)", "sdpa (Python)", "flex si"))
    # fused vs Flex through SDPA: (flex / sdpa_py) / (fused / sdpa_cpp)
    via = (flex / sp) / (fused / sc) if all(x == x for x in (fused, sc, sp, flex)) else math.nan
    print(f"| {T} | {D} | {p} | {ms(fused)} | {ms(sc)} | {ms(sp)} | {ms(flex)} | {ratio(sc, fused)} | "
          + (f"{via:.2f}x" if via == via else "–") + f" | {ratio(flex, fused)} |")
print()
print("fused vs X: X's time / fused time (above 1: fused is faster). fused vs Flex: joined through "
      "the SDPA time each process measured; raw: Flex's time over fused's, across the two processes.")
PY
if [[ -s "$TMP/flex.err" ]]; then
  echo
  echo "Not run (bench/flex_vs_sdpa.py):"
  grep -E '^flex_vs_sdpa:' "$TMP/flex.err" | sed 's/^/- /' | sort -u
fi
echo
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
