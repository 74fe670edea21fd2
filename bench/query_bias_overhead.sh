#!/usr/bin/env bash
# What the (i, t) policy (#48 item 1: FIRE's query_bias) costs methods that do not use it: the
# fused CPU kernel at T = 8192, forward and forward + backward, built at BASE (a revision before it)
# and at this tree, from the same benchmark source (bench/kernel_step_bench.cpp, copied into the
# base's tree), run alternately ROUNDS times on this machine. Prints each build's min over its
# rounds and the ratio this / base. docs/performance.md holds a run.
#
#   bench/query_bias_overhead.sh [BASE] [BUILD]     BASE: a revision (default 02c870c, before the
#                                                   policy); BUILD: this tree's build (default build)
#   ROUNDS=3 REPS=3 T=8192 THREADS=$(nproc) METHODS=si+p-rope,alibi,kerple,logn+p-rope
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${1:-02c870c}
BUILD=$(cd "${2:-$ROOT/build}" && pwd)
WORK=${WORK:-$BUILD/query-bias-overhead}
ROUNDS=${ROUNDS:-3} REPS=${REPS:-3} T=${T:-8192} THREADS=${THREADS:-$(nproc)}
METHODS=${METHODS:-si+p-rope,alibi,kerple,logn+p-rope}
say() { echo "query_bias_overhead: $*" >&2; }

# The base: its tree at BASE with this tree's bench/, built for the one target.
if [ ! -d "$WORK/src" ]; then
  mkdir -p "$WORK"
  git -C "$ROOT" worktree add --detach "$WORK/src" "$BASE" >/dev/null
fi
git -C "$WORK/src" checkout --quiet --detach "$BASE"
rm -rf "$WORK/src/bench" && cp -r "$ROOT/bench" "$WORK/src/bench"
cmake -S "$WORK/src" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHARNESS_TESTS=OFF \
      -DHARNESS_CUDA=OFF -DHARNESS_PYTHON="$ROOT/.venv/bin/python" >/dev/null
say "building bench_kernel_step at $BASE and here"
cmake --build "$WORK/build" -j"$THREADS" --target bench_kernel_step >/dev/null
cmake --build "$BUILD" -j"$THREADS" --target bench_kernel_step >/dev/null

# Alternate base and this build; each line: build<TAB>method<TAB>pass<TAB>min ms.
results="$WORK/results.tsv"
: >"$results"
for round in $(seq "$ROUNDS"); do
  for which in base this; do
    bin=$([ "$which" = base ] && echo "$WORK/build/bench_kernel_step" || echo "$BUILD/bench_kernel_step")
    "$bin" --T "$T" --methods "$METHODS" --reps "$REPS" --threads "$THREADS" |
      awk -F' *\\| *' -v w="$which" 'NR > 2 { print w "\t" $2 "\t" $3 "\t" $5 }' >>"$results"
  done
  say "round $round of $ROUNDS done"
done

echo "fused CPU kernel, T = $T, B = 1, H = 2, d = 64, $THREADS threads; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "base $BASE ($(git -C "$ROOT" log -1 --format=%h "$BASE")) against this tree ($(git -C "$ROOT" describe --always --dirty)); min ms over $ROUNDS rounds × $REPS reps, alternating"
echo
echo "| method | pass | base ms | this ms | this / base |"
echo "| --- | --- | --- | --- | --- |"
awk -F'\t' '{ k = $2 "\t" $3; if (!(k in order)) { order[k] = ++n; keys[n] = k }
              if (!((k, $1) in best) || $4 < best[k, $1]) best[k, $1] = $4 }
            END { for (i = 1; i <= n; ++i) { k = keys[i]; split(k, p, "\t")
                    printf "| %s | %s | %.1f | %.1f | %.3f |\n", p[1], p[2], best[k, "base"], best[k, "this"], best[k, "this"] / best[k, "base"] } }' "$results"
