#!/usr/bin/env bash
# `harness report` in a real browser: a small sweep on the fixture corpus (tests/data/sotu:
# si+p-rope at two τ and RoPE, two seeds each), its page made with `harness
# report`, then loaded from its file in headless Chromium (scripts/report_browser_test.py, over
# the DevTools protocol): no console error, every figure drawn with a size, as many figures as
# `harness report` drew SVGs, every link resolving, figures and table rows kept whole in print.
# The same check is then shown to reject five broken copies of the page (--self-test). Keeps the
# page, a screenshot and the printed PDF in OUT_DIR.
#
#   scripts/report-browser-test.sh [path/to/harness] [OUT_DIR]   (a CTest; exit 77 = skipped: no chromium)
set -uo pipefail
cd "$(dirname "$0")/.."
HARNESS=$(realpath "${1:-build/harness}")
OUT=$(realpath -m "${2:-build/report-browser-test}")
fail() { echo "report-browser-test: FAILED: $*"; exit 1; }
command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
  { echo "report-browser-test: skipped (chromium not installed: Debian package chromium, scripts/install-deps.sh)"; exit 77; }
command -v python3 >/dev/null || fail "python3 not found"
rm -rf "$OUT"
mkdir -p "$OUT"
cat >"$OUT/sweep.yaml" <<YAML
name: report-browser
base:
  data: {corpus: '$PWD/tests/data/sotu', data_dir: '$OUT/data'}
  model: {layers: 1, d_model: 32, heads: 2}
  attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}
  train: {context: 32, batch_size: 8, steps: 20}
  eval: {contexts: [L, 4L], windows: 4, every: 10, attention_queries: 8}
  run: {out_dir: '$OUT/runs', checkpoint_every: 20}
grid:
  attention.tau: [L/400, L/40]
runs:
  - {attention.method: rope}
seeds: [0, 1]
YAML
"$HARNESS" sweep run "$OUT/sweep.yaml" --jobs 2 --threads-per-job 1 >"$OUT/sweep.log" 2>&1 ||
  { cat "$OUT/sweep.log"; fail "sweep run"; }
"$HARNESS" report "$OUT/sweep.yaml" >"$OUT/report.log" 2>&1 || { cat "$OUT/report.log"; fail "harness report"; }
cat "$OUT/report.log"
PAGE="$OUT/runs/report-browser/report.html"
[ -f "$PAGE" ] || fail "no page at $PAGE"
# Figures drawn, counted apart from the page: the SVGs gnuplot left beside it.
FIGURES=$(find "$OUT/runs/report-browser/report-figures" -name '*.svg' | wc -l)
[ "$FIGURES" -gt 0 ] || fail "no figure drawn (gnuplot missing?)"
echo "report-browser-test: $FIGURES figures drawn"
python3 scripts/report_browser_test.py "$PAGE" --expect-figures "$FIGURES" --screenshot "$OUT/report.png" \
  --pdf "$OUT/report.pdf" --self-test || fail "the page in Chromium (above)"
echo "report-browser-test: passed; page $PAGE, screenshot $OUT/report.png, printed $OUT/report.pdf"
