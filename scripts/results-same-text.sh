#!/usr/bin/env bash
# The L = 256 results of #47 (called by scripts/results.sh; runs alone too): Table 1 with every
# context scored on the same text (sweeps/table1-same-text.yaml), the planned SI-vs-KERPLE
# comparison (sweeps/si-vs-kerple.yaml), and passkey retrieval at a controlled distance
# (sweeps/passkey.yaml; sweeps/passkey-long.yaml, fine-tunes 3× as long). Their pages,
# docs/results/table1-same-text.md and docs/results/passkey.md, are rendered from committed data
# (scripts/results-lib.sh).
#
#   scripts/results-same-text.sh [BUILD]                  runs or resumes the four sweeps (finished
#       runs are skipped), writes their tables, pairs, figures, when each fine-tune learned and the
#       provenance into docs/results/{table1-same-text,passkey}/, then renders the pages
#       RESULTS_JOBS: runs at a time (default: the cores)
#   scripts/results-same-text.sh --render [BUILD] [DIR]   both pages into DIR (default docs/results)
#       from the committed data only (the CTest results_pages_regenerate)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results-lib.sh  # results_args and what the scripts share
results_args results docs/results "$@"
OUT=docs/results
SAME=$OUT/table1-same-text
KEY=$OUT/passkey
JOBS=${RESULTS_JOBS:-$(nproc)}

plateau() {  # per passkey run, as CSV: the step its key loss fell below 1 nat per digit (off the plateau near ln 10)
  "${PYTHON:-.venv/bin/python}" - "runs/$1" "$("$HARNESS" sweep plan "sweeps/$1.yaml")" <<'PY'
import re, sys
import h5py, numpy as np
print("run,fine-tune steps,key loss below 1 nat/digit from step,\"key loss, last 100 steps (nats/digit)\"")
for line in sys.argv[2].splitlines():  # `sweep plan`: "ID  #I  key=value ...  state"
    m = re.match(r"([0-9a-f]{16})\s+#\d+\s+(.*?)\s+done\s*$", line)
    if not m: continue
    with h5py.File(f"{sys.argv[1]}/{m.group(1)}/run.h5", "r") as f:
        step, loss = f["train/step"][:], f["train/loss"][:]
    window = np.convolve(loss, np.ones(50) / 50, mode="valid")  # mean of each 50 consecutive steps
    below = np.flatnonzero(window < 1.0)
    left = str(int(step[below[0]])) if below.size else "never"
    print(f"\"{', '.join(m.group(2).split())}\",{int(step[-1])},{left},{loss[-100:].mean():.2f}")
PY
}

if [ "$render_only" = 0 ]; then
  for sweep in table1-same-text si-vs-kerple passkey passkey-long; do
    "$HARNESS" sweep run "sweeps/$sweep.yaml" --jobs "$JOBS" --threads-per-job 1 --no-live >/dev/null
  done
  figures table1-same-text sweeps/table1-same-text.yaml  # first: it empties the folder
  figures passkey sweeps/passkey.yaml
  x() { "$HARNESS" export "$@" >/dev/null 2>&1; }
  x table sweeps/table1-same-text.yaml --format csv --out "$SAME/table.csv"
  x pairs sweeps/table1-same-text.yaml --format csv --out "$SAME/pairs.csv"
  x table sweeps/si-vs-kerple.yaml --format csv --out "$SAME/si-vs-kerple.csv"
  x table sweeps/si-vs-kerple.yaml --rows attention.method,train.seed --best none --format csv \
      --out "$SAME/si-vs-kerple-by-seed.csv"
  x pairs sweeps/si-vs-kerple.yaml --format csv --out "$SAME/si-vs-kerple-pairs.csv"
  x table sweeps/passkey.yaml --metric needle/accuracy --rows attention.method,train.seed --best none \
      --format csv --out "$KEY/accuracy-by-seed.csv"
  x table sweeps/passkey.yaml --metric needle/mean_log_prob --format csv --out "$KEY/log-prob.csv"
  x table sweeps/passkey-long.yaml --metric needle/accuracy --rows train.seed --best none --format csv \
      --out "$KEY/long-accuracy-by-seed.csv"
  plateau passkey > "$KEY/plateau.csv"
  plateau passkey-long > "$KEY/long-plateau.csv"
  provenance scripts/results-same-text.sh table1-same-text si-vs-kerple > "$SAME/provenance.md"
  provenance scripts/results-same-text.sh passkey passkey-long > "$KEY/provenance.md"
fi

mkdir -p "$PAGE_DIR"
W=scripts/results-same-text.sh
{
  echo "# Table 1 on the same text at every length (L = 256)"
  echo
  committed text "$SAME/provenance.md" $W
  echo
  echo "Byte-level models trained at L = 256 on the State of the Union corpus, τ = L/100 (one τ, from"
  echo "the τ law's earlier point estimate at L = 256; its interval holds L/400 too) and the p-RoPE base"
  echo "L/4 (sweeps/table1-same-text.yaml). Every context is validated on the same target tokens: each"
  echo "16L window is cut into consecutive chunks for 1L and 4L (\`eval.same_text\`). Rendered by"
  echo "\`scripts/results-same-text.sh --render\` from the committed data in"
  echo "[table1-same-text/](table1-same-text/). Cells: final validation loss (nats/byte), mean ± standard"
  echo "error over seeds (number of seeds). The windows' share of the error is in the pairs below"
  echo "(clustered by document); the stored per-context loss_se counts the chunks of one window as"
  echo "independent."
  echo
  table_or_curves "$SAME/table.csv" $W min "table1-same-text: loss" "256 (1L)=$SAME/loss_vs_step_T256.csv" \
      "1024 (4L)=$SAME/loss_vs_step_T1024.csv" "4096 (16L)=$SAME/loss_vs_step_T4096.csv"
  echo
  echo "## Which differences are resolved"
  echo
  echo "\`harness export pairs sweeps/table1-same-text.yaml\`: every pair of methods at each context,"
  echo "the seed-paired gap with windows clustered by document, resolved under the family each context"
  echo "names ([export.md](../export.md)); a pair whose runs scored every window alike is marked – and"
  echo "left out of the family."
  echo
  committed pairs "$SAME/pairs.csv" $W --sweep sweeps/table1-same-text.yaml
  echo "## A planned comparison: kerple+p-rope against si+p-rope on new seeds"
  echo
  echo "The table above puts kerple+p-rope ahead of si+p-rope at every length, which its pairs cannot"
  echo "resolve. Chosen after reading it, the pair is tested on runs that played no part in choosing"
  echo "it: sweeps/si-vs-kerple.yaml, the same setting on new seeds, with its family and criterion"
  echo "registered in its \`planned:\` block before its runs; the verdicts below are that criterion's."
  echo
  committed table "$SAME/si-vs-kerple.csv" $W --best min --title "si-vs-kerple: loss"
  echo
  echo "By seed:"
  echo
  committed table "$SAME/si-vs-kerple-by-seed.csv" $W --title "si-vs-kerple: loss, by seed"
  echo
  echo "The planned test, seed-paired with windows clustered by document"
  echo "([si-vs-kerple-pairs.csv](table1-same-text/si-vs-kerple-pairs.csv)):"
  echo
  committed pairs "$SAME/si-vs-kerple-pairs.csv" $W --sweep sweeps/si-vs-kerple.yaml
  echo "## Loss by position in the 16L windows"
  echo
  echo "![loss by position](table1-same-text/position_loss_T4096.png)"
  echo
  echo "Every figure with its CSV: [table1-same-text/](table1-same-text/) (pairs.csv: every pair's gap,"
  echo "interval, p-value and verdict)."
} > "$PAGE_DIR/table1-same-text.md"
{
  echo "# Passkey retrieval at a controlled distance (L = 256)"
  echo
  committed text "$KEY/provenance.md" $W
  echo
  echo "Five methods of [table1-same-text.md](table1-same-text.md), each fine-tuned on passkey examples"
  echo "of L tokens (loss on the key's digits only), then scored teacher-forced on validation examples"
  echo "at each distance d between the key and the question (sweeps/passkey.yaml, [needle.md](../needle.md))."
  echo "Exact match: every digit of the key is the argmax, i.e. greedy decoding writes the key."
  echo "Rendered by \`scripts/results-same-text.sh --render\` from the committed data in [passkey/](passkey/);"
  echo "columns are the distance d."
  echo
  echo "Exact match, by seed: a fine-tune either learns to copy the key or stays on a plateau near a"
  echo "uniform guess, so a mean over seeds would mix the two (the figures show the means)."
  echo
  committed table "$KEY/accuracy-by-seed.csv" $W --title "passkey: needle/accuracy, by seed"
  echo
  echo "When each fine-tune learned to copy (training key loss, mean of 50 consecutive steps):"
  echo
  committed plain "$KEY/plateau.csv" $W
  echo
  echo "Log-probability of the key (nats, summed over its digits; a uniform guess scores the number"
  echo "of digits times ln 1/10):"
  echo
  table_or_curves "$KEY/log-prob.csv" $W max "passkey: needle/mean_log_prob" \
      "128=$KEY/passkey_log_prob_vs_distance.csv@0.5" "256 (1L)=$KEY/passkey_log_prob_vs_distance.csv@1" \
      "512 (2L)=$KEY/passkey_log_prob_vs_distance.csv@2" "1024 (4L)=$KEY/passkey_log_prob_vs_distance.csv@4" \
      "2048 (8L)=$KEY/passkey_log_prob_vs_distance.csv@8" "3840 (15L)=$KEY/passkey_log_prob_vs_distance.csv@15"
  echo
  echo "![passkey against distance](passkey/passkey_vs_distance.png)"
  echo
  echo "![log-probability against distance](passkey/passkey_log_prob_vs_distance.png)"
  echo
  echo "## si+p-rope with a fine-tune 3× as long"
  echo
  echo "sweeps/passkey-long.yaml: the same pretrained si+p-rope runs fine-tuned 3× as many steps, the"
  echo "rest as above."
  echo
  committed table "$KEY/long-accuracy-by-seed.csv" $W --title "passkey-long: needle/accuracy, by seed"
  echo
  committed plain "$KEY/long-plateau.csv" $W
} > "$PAGE_DIR/passkey.md"
echo "results: $PAGE_DIR/table1-same-text.md, $PAGE_DIR/passkey.md"
