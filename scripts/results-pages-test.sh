#!/usr/bin/env bash
# A results page can only change with its data: each page that is rendered from committed data
# (scripts/results*.sh --render) is rendered again into a scratch folder and compared with the
# committed page, byte for byte (the CTest results_pages_regenerate).
#
#   scripts/results-pages-test.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
status=0 pages=0
# The script that renders each page (`SCRIPT --render BUILD DIR` writes the page's file name into DIR).
while read -r script page; do
  [ -f "$page" ] || { echo "FAILED: $page is missing"; status=1; continue; }
  rm -rf "$WORK/out" && mkdir -p "$WORK/out"
  "$script" --render "$BUILD" "$WORK/out" >/dev/null || { echo "FAILED: $script --render"; status=1; continue; }
  pages=$((pages + 1))
  if ! diff -u "$page" "$WORK/out/$(basename "$page")"; then
    echo "FAILED: $page differs from its rendering from committed data by $script (above)"
    status=1
  fi
done <<'PAGES'
scripts/results-tau-law.sh docs/results/tau-law-sqrt2.md
scripts/results-fire.sh docs/results/fire.md
scripts/results-same-text.sh docs/results/table1-same-text.md
scripts/results-same-text.sh docs/results/passkey.md
scripts/results.sh docs/results.md
scripts/tau-vs-context.sh docs/results/tau-vs-context.md
scripts/results-tau-batch.sh docs/results/tau-batch-vs-context.md
scripts/results-readme.sh README.md
PAGES
[ "$status" = 0 ] && echo "results-pages-test: $pages page(s) equal their rendering from committed data"
exit $status
