#!/usr/bin/env bash
# A results page can only change with its data: each page that is rendered from committed data
# (scripts/results-*.sh --render) is rendered again into a scratch folder and compared with the
# committed page, byte for byte (the CTest results_pages_regenerate).
#
#   scripts/results-pages-test.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
status=0 pages=0
for page in tau-law-sqrt2; do
  [ -f "docs/results/$page.md" ] || { echo "FAILED: docs/results/$page.md is missing"; status=1; continue; }
  scripts/results-tau-law.sh --render "$BUILD" "$WORK" >/dev/null || { echo "FAILED: rendering $page"; status=1; continue; }
  pages=$((pages + 1))
  if ! diff -u "docs/results/$page.md" "$WORK/$page.md"; then
    echo "FAILED: docs/results/$page.md differs from its rendering from committed data (above)"
    status=1
  fi
done
[ "$status" = 0 ] && echo "results-pages-test: $pages page(s) equal their rendering from committed data"
exit $status
