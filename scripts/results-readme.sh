#!/usr/bin/env bash
# The front page's results (README.md, "What it shows"): the quickstart's table between the markers
# <!-- quickstart-table --> and <!-- /quickstart-table -->, rendered from committed data by the
# harness's own code, and the entropy figure beside it.
#
#   scripts/results-readme.sh [BUILD]                 from the runs of sweeps/quickstart.yaml (run it
#       first: `make quickstart`): writes docs/results/quickstart/ (the table as CSV, the provenance)
#       and the figure docs/figures/entropy_vs_context.png (with its CSV), then renders
#   scripts/results-readme.sh --render [BUILD] [DIR]  README.md into DIR (default .) with the block
#       rendered from the committed CSV only (the CTest results_pages_regenerate compares it)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results-lib.sh  # results_args and what the scripts share
results_args results-readme . "$@"
DATA=docs/results/quickstart
SWEEP=sweeps/quickstart.yaml

if [ "$render_only" = 0 ]; then
  mkdir -p "$DATA"
  "$HARNESS" export table "$SWEEP" --format csv --out "$DATA/table.csv" >/dev/null 2>&1
  "$HARNESS" theory entropy --quick --tau 0.16 --out runs/theory/entropy-quick.h5 >/dev/null 2>&1
  rm -rf "$DATA/figures.tmp"
  "$HARNESS" export curves "$SWEEP" --out "$DATA/figures.tmp" --theory runs/theory/entropy-quick.h5 >/dev/null 2>&1
  cp "$DATA/figures.tmp/entropy_vs_context.png" docs/figures/entropy_vs_context.png
  cp "$DATA/figures.tmp/entropy_vs_context.csv" "$DATA/entropy_vs_context.csv" && rm -rf "$DATA/figures.tmp"
  {
    echo "as \`make quickstart\` printed it, re-rendered by \`scripts/results-readme.sh\` from"
    echo "[docs/results/quickstart/table.csv](docs/results/quickstart/table.csv): its runs trained at revision(s)"
    echo "$(trained runs/quickstart), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(date -u +%Y-%m-%d); one seed per row."
  } > "$DATA/provenance.md"
fi

[ -f "$DATA/table.csv" ] || { echo "results-readme: no $DATA/table.csv" >&2; exit 2; }
mkdir -p "$PAGE_DIR"
block=$(mktemp)
trap 'rm -f "$block"' EXIT
{
  echo "<!-- quickstart-table: rendered by scripts/results-readme.sh; do not edit by hand -->"
  echo "Validation loss (nats/byte) by method and context,"
  cat "$DATA/provenance.md"
  echo
  "$HARNESS" export table --from-csv "$DATA/table.csv" --best min --title "quickstart: loss" 2>/dev/null
  echo "<!-- /quickstart-table -->"
} > "$block"
awk -v block="$block" '
  /^<!-- quickstart-table/ { while ((getline line < block) > 0) print line; skip = 1; next }
  /^<!-- \/quickstart-table -->/ { skip = 0; next }
  !skip { print }' README.md > "$PAGE_DIR/README.md.tmp"
mv "$PAGE_DIR/README.md.tmp" "$PAGE_DIR/README.md"
echo "results-readme: $PAGE_DIR/README.md"
