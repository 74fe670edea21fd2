#!/usr/bin/env bash
# Is it L, or the batch that changes with L? (sweeps/tau-batch-vs-context.yaml; docs/tau-vs-context.md):
# its page, docs/results/tau-batch-vs-context.md, rendered from committed data by the harness's own code.
#
#   scripts/results-tau-batch.sh [BUILD]                 from the runs: re-validates every finished run
#       on 65,536 tokens per context, writes each batch's per-seed curves, laws and figures and the τ*
#       ratios into docs/results/tau-batch-vs-context/ (`harness tau law --by train.batch_size --out`)
#       with the provenance, then renders
#   scripts/results-tau-batch.sh --render [BUILD] [DIR]  from the committed per-seed curves only: the
#       page into DIR (default docs/results), what the CTest results_pages_regenerate compares
#
# Every number on the page is `harness tau law --curves A --curves B`'s output on the committed CSVs,
# or the provenance the first form measured; the prose names none.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results-lib.sh  # results_args and what the scripts share
results_args results-tau-batch docs/results "$@"
NAME=tau-batch-vs-context
DATA=docs/results/$NAME
SWEEP=sweeps/$NAME.yaml
TOKENS=${RESULTS_TOKENS:-65536}
GROUPS_IN_ORDER=(train.batch_size=32 train.batch_size=8)  # the order --by finds them in the sweep (its plan order)

if [ "$render_only" = 0 ]; then
  "$HARNESS" analyse "$SWEEP" --tokens "$TOKENS" --threads "${RESULTS_JOBS:-$(nproc)}" >/dev/null
  rm -rf "$DATA.tmp"
  "$HARNESS" tau law "$SWEEP" --by train.batch_size --out "$DATA.tmp" >/dev/null
  rm -rf "$DATA" && mkdir -p "$DATA"
  for g in "${GROUPS_IN_ORDER[@]}"; do
    mkdir -p "$DATA/$g" && cp "$DATA.tmp/$g"/tau-law-curves.csv "$DATA.tmp/$g"/*.png "$DATA.tmp/$g"/tau_law_*.csv "$DATA/$g"
  done
  cp "$DATA.tmp/tau-star-ratios.csv" "$DATA" && rm -rf "$DATA.tmp"
  {
    echo "Data written by \`scripts/results-tau-batch.sh\` on $(date -u +%Y-%m-%d) at revision"
    echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs/results' || echo -dirty), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores:"
    echo "$("$HARNESS" sweep plan "$SWEEP" | awk '$2 ~ /^#/ && $NF == "done"' | wc -l) of the $("$HARNESS" sweep plan "$SWEEP" | grep -c ' #') runs of \`$SWEEP\` finished and used,"
    echo "trained at revision(s) $(trained runs/$NAME) (each run.h5's \`/config\` git_revision), each"
    echo "re-validated on $TOKENS tokens per context; their training took $("$HARNESS" export revisions runs/$NAME --train-minutes)"
    echo "run-minutes in all (2 runs at a time on the 2 cores, beside other work)."
  } > "$DATA/provenance.md"
fi

for g in "${GROUPS_IN_ORDER[@]}"; do
  [ -f "$DATA/$g/tau-law-curves.csv" ] || { echo "results-tau-batch: no $DATA/$g/tau-law-curves.csv" >&2; exit 2; }
done
mkdir -p "$PAGE_DIR"
law=$("$HARNESS" tau law $(for g in "${GROUPS_IN_ORDER[@]}"; do echo --curves "$DATA/$g/tau-law-curves.csv"; done) 2>/dev/null)
{
  echo "# The best τ under two batches at one L"
  echo
  cat "$DATA/provenance.md"
  echo
  echo "The τ-law sweeps fix the tokens per step, so the sequences per step shrink as L grows: the best"
  echo "τ may move with the batch, not with L. Here L = 64 is trained with the τ law's batch (2048 tokens"
  echo "per step) and with the batch L = 256 has there (8 sequences), beside L = 256 at 8 sequences, on"
  echo "one 2× τ grid with seeds paired across τ (the design, written before the runs, is the sweep"
  echo "file's header). The 8-sequence L = 64 also sees fewer tokens in its 800 steps: a difference is"
  echo "the batch and the data together. Rendered by \`scripts/results-tau-batch.sh --render\` from the"
  echo "per-seed losses in [$NAME/]($NAME/): what follows is \`harness tau law --curves\` on"
  echo "each batch's file, word for word — each batch's law, then τ* of one batch over the other's at"
  echo "the same L and context, with its interval and the reading its interval allows."
  echo
  echo "$law"
  echo
  for g in "${GROUPS_IN_ORDER[@]}"; do
    echo "![loss above each L's best at 4L, $g]($NAME/$g/tau_law_loss_4L.png)"
    echo
  done
} > "$PAGE_DIR/$NAME.md"
echo "results-tau-batch: $PAGE_DIR/$NAME.md"
