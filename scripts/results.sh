#!/usr/bin/env bash
# `make results`: the CPU-scale results of docs/results.md, regenerated in one go, each page
# rendered from committed data (scripts/results-lib.sh).
#
#   scripts/results.sh [BUILD]                  runs (or resumes: finished runs are skipped) Table 1
#       (sweeps/table1.yaml) and the τ ablation (sweeps/tau-ablation.yaml), re-validates every final
#       model on RESULTS_TOKENS tokens per context (default 131072, or all the validation text holds;
#       `harness analyse --tokens`), writes their tables, figures and provenance into
#       docs/results/{table1,tau-ablation}/, runs the other results scripts' build forms (the τ
#       check's calibration, the τ law, Table 1 on the same text, passkey, FIRE), then renders
#       docs/results.md. RESULTS_JOBS (default: the core count) runs at a time, one thread each.
#   scripts/results.sh --render [BUILD] [DIR]   docs/results.md into DIR (default docs) from the
#       committed data only (the CTest results_pages_regenerate)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results-lib.sh  # results_args and what the scripts share
results_args results docs "$@"
JOBS=${RESULTS_JOBS:-$(nproc)}
TOKENS=${RESULTS_TOKENS:-131072}
OUT=docs/results

if [ "$render_only" = 0 ]; then
  for sweep in table1 tau-ablation; do
    "$HARNESS" sweep run "sweeps/$sweep.yaml" --jobs "$JOBS" --threads-per-job 1 --no-live
    "$HARNESS" analyse "sweeps/$sweep.yaml" --tokens "$TOKENS" --threads "$JOBS" >/dev/null
  done
  mkdir -p "$OUT"
  # How often tau check's interval is wrong (docs/tau-vs-context.md): 60 pairs of 3-seed arms of one τ.
  "$HARNESS" sweep run sweeps/tau-check-calibration.yaml --jobs "$JOBS" --threads-per-job 1 --no-live >/dev/null
  "$HARNESS" tau calibrate sweeps/tau-check-calibration.yaml --out "$OUT/tau-check-calibration.md" >/dev/null
  # The law of the best τ against L (docs/tau-vs-context.md): its tables, CSV and figures.
  "$HARNESS" sweep run sweeps/tau-law.yaml --jobs "$JOBS" --threads-per-job 1 --no-live >/dev/null
  "$HARNESS" tau law sweeps/tau-law.yaml --out "$OUT/tau-law" >/dev/null
  # The IID-logit theory at every τ the two sweeps train (L = 64: L/400, and L/409600 … L/40.96).
  "$HARNESS" theory entropy --tau 0.16 --tau 0.00015625 --tau 0.0015625 --tau 0.015625 --tau 0.15625 \
      --tau 1.5625 --out runs/theory/entropy-results.h5 >/dev/null
  scripts/results-same-text.sh "$BUILD" >/dev/null
  scripts/results-fire.sh "$BUILD" >/dev/null
  figures table1 sweeps/table1.yaml --theory runs/theory/entropy-results.h5  # first: it empties the folder
  figures tau-ablation sweeps/tau-ablation.yaml --theory runs/theory/entropy-results.h5
  x() { "$HARNESS" export table "$@" --format csv >/dev/null 2>&1; }
  x sweeps/table1.yaml --metric analysis/loss --window-se --out "$OUT/table1/table.csv"
  x sweeps/table1.yaml --metric attention/entropy --out "$OUT/table1/entropy.csv"
  x sweeps/tau-ablation.yaml --metric analysis/loss --window-se --out "$OUT/tau-ablation/table.csv"
  { provenance scripts/results.sh table1 tau-ablation
    echo "Every final model re-validated on $TOKENS validation tokens per context (or all the validation"
    echo "text holds; \`harness analyse --tokens $TOKENS\`)."; } > "$OUT/table1/provenance.md"
fi

# Which cells of a committed loss table are within 2 combined seeds' s.e. of their column's best.
separable() {
  if [ -f "$1" ]; then "$HARNESS" export table --from-csv "$1" | scripts/separable.py
  else committed table "$1" scripts/results.sh; fi
}
mkdir -p "$PAGE_DIR"
W=scripts/results.sh
{
  echo "# Results at CPU scale"
  echo
  committed text "$OUT/table1/provenance.md" $W
  echo
  echo "Byte-level models trained at L = 64 on the State of the Union corpus (the model and steps of"
  echo "sweeps/table1.yaml), validated zero-shot at L, 4L and 16L; τ = L/400 and the p-RoPE base L/4"
  echo "(README: why they scale with L). Rendered by \`scripts/results.sh --render\` from the committed"
  echo "data in [results/table1/](results/table1/) and [results/tau-ablation/](results/tau-ablation/)."
  echo "Loss cells: validation loss (nats/byte) of the final model, re-validated (\`harness analyse"
  echo "--tokens\`), mean ± standard error over seeds, and, in a table of \`export table\`'s CSV,"
  echo "(windows ± …) the standard error over validation windows, mean over seeds; bold: best per"
  echo "column. The windows are shared by every run, so a difference between two cells carries only"
  echo "the seeds' error: \"separable\" below means more than 2 combined seeds' s.e. (scripts/separable.py)."
  echo
  echo "## Table 1 (sweeps/table1.yaml: every method × seed)"
  echo
  committed table "$OUT/table1/table.csv" $W --best min --title "table1: analysis/loss"
  echo
  echo "Separable from the best of each column:"
  echo
  separable "$OUT/table1/table.csv"
  echo
  echo "YaRN at L = 64 is not YaRN as the paper runs it: its β rotations exceed the turns the fastest"
  echo "frequency pair makes over 64 positions, so every pair is interpolated (at L = 256, in"
  echo "needle.md's pretraining, YaRN has the lowest 4L loss of rope, p-rope, rope+ntk and yarn). Read"
  echo "its row as YaRN's formula outside its design range. T5's buckets for the longest distances are"
  echo "never reached at L = 64 and keep their initial 0 beyond it. At L = 64, τ = L/400 is far below"
  echo "si+p-rope's best τ at 1L (the largest τ tried, [tau-vs-context.md](tau-vs-context.md)), whence"
  echo "its deficit to p-rope at 1L; at L = 256 with τ = L/100, on the same text, see the last section."
  echo
  echo "Attention entropy at the last validation, mean over layers and heads:"
  echo
  E=$OUT/table1/entropy_vs_context.csv
  table_or_curves "$OUT/table1/entropy.csv" $W none "table1: attention/entropy" "64 (1L)=$E@64" "256 (4L)=$E@256" \
      "1024 (16L)=$E@1024"
  echo
  echo "![entropy against context](results/table1/entropy_vs_context.png)"
  echo
  echo "## The τ ablation of si+p-rope (sweeps/tau-ablation.yaml, Appendix H)"
  echo
  T=$OUT/tau-ablation/loss_vs_tau.csv  # its rows: τ / L of the sweep's grid, L/409600 … L/40.96
  table_or_curves "$OUT/tau-ablation/table.csv" $W none "tau-ablation: analysis/loss" "L/409600=$T@2.44140625e-06" \
      "L/40960=$T@2.44140625e-05" "L/4096=$T@2.44140625e-04" "L/409.6=$T@2.44140625e-03" "L/40.96=$T@2.44140625e-02"
  echo
  echo "Separable from the best of each column:"
  echo
  separable "$OUT/tau-ablation/table.csv"
  echo
  echo "![loss against τ](results/tau-ablation/loss_vs_tau.png)"
  echo
  echo "## Table 1 on the same text, and passkey retrieval (L = 256)"
  echo
  echo "[results/table1-same-text.md](results/table1-same-text.md): every method at L = 256, τ = L/100"
  echo "(one τ, taken from the τ law's earlier point estimate at 4L for L = 256, whose interval also"
  echo "holds L/400: not a measured optimum), every context scored on the same text, every pair of"
  echo "methods tested (seed-paired, windows clustered by document, a family per context). Its table,"
  echo "its pairs and their verdicts are there; what they show, in words:"
  echo "- On the same text, with that table's seeds, the methods that generalise have a lower mean loss"
  echo "  at 4L than at 1L; contexts are not tested against each other, and the pattern is not general"
  echo "  (on the planned comparison's seeds below it does not hold for si+p-rope at 16L). The L = 64"
  echo "  table's falling losses compared different text."
  echo "- RoPE, p-RoPE and their frequency-rescaled variants break beyond L, worse than the paper's mild"
  echo "  degradation. The loss by position in the 16L windows shows where each breaks: rope and p-rope"
  echo "  from about L; rope+ntk, yarn and logn+ntk, whose frequencies are rescaled for the 16L window,"
  echo "  are worse already within the first L and climb; logn+rope, logn+p-rope, si+rope and t5 climb"
  echo "  more slowly; si+p-rope, kerple+p-rope, kerple, si+nope and alibi stay flat."
  echo "- kerple+p-rope has the lowest mean at every length and si+p-rope the lowest of the paper's own"
  echo "  methods, as in the paper; what is new here is KERPLE + p-RoPE (not in the paper's table) below"
  echo "  it — with SI at one τ (L/100), which is not SI's best at 1L: a comparison with τ tuned for both"
  echo "  is planned. The pair was tested as a planned comparison on new seeds (sweeps/si-vs-kerple.yaml,"
  echo "  written before its runs), under its registered criterion:"
  echo
  committed pairs "$OUT/table1-same-text/si-vs-kerple-pairs.csv" $W --sweep sweeps/si-vs-kerple.yaml
  echo "The comparison with τ tuned for SI is preregistered in two stages: sweeps/si-vs-kerple-tuned-select.yaml"
  echo "chose SI's τ per L on three selection seeds by its registered rule (its table:"
  echo "[results/si-vs-kerple-tuned/selection.csv](results/si-vs-kerple-tuned/selection.csv)), and"
  echo "sweeps/si-vs-kerple-tuned.yaml's planned block, completed with that choice before its runs, tests"
  echo "SI at it against kerple+p-rope at 4L and 16L on eight new seeds (Holm over the four tests, a sign"
  echo "test and the seed spreads beside each). Its runs are not finished: no result is stated yet."
  echo
  echo "[results/passkey.md](results/passkey.md): five of those methods fine-tuned to retrieve a key at a"
  echo "controlled distance. Whether a fine-tune learns to copy at all depends on the seed; a fine-tune"
  echo "that has not learned scores 0 at every distance, so read the table by seed. Fine-tuned 3× as"
  echo "long, more si+p-rope seeds learn. At this scale the passkey measures how soon a fine-tune learns"
  echo "to copy as much as how far a method retrieves; with these few seeds it shows the cliffs of rope"
  echo "(beyond L/2) and alibi (beyond L), and no ordering among the p-RoPE methods is tested. All five on"
  echo "one schedule with eight seeds each is preregistered (sweeps/passkey-one-schedule.yaml: the share of"
  echo "seeds that learn to copy, Fisher's exact test with Holm over the pairs); its runs are not done."
  echo
  echo "[results/fire.md](results/fire.md): FIRE (Li et al. 2023) beside KERPLE and T5, each as its preset"
  echo "and with p-RoPE, in the same setting. FIRE alone, its paper's setting, does not extrapolate here:"
  echo "its loss rises with the position in the window beyond L, where kerple stays flat; with p-RoPE it"
  echo "does, which is why the preset \`fire+p-rope\` exists. Its gaps to kerple+p-rope at each context,"
  echo "and which are resolved, are in that page's pairs. Why FIRE alone does not carry to 4L here, where"
  echo "its paper reports it does, is not tested: this is a small model trained briefly, with every FIRE"
  echo "parameter per head and a deterministic start ([attention.md](attention.md))."
  echo
  echo "Every figure with its CSV: [results/table1/](results/table1/), [results/tau-ablation/](results/tau-ablation/)."
  echo "The needle-in-a-haystack table (sweeps/needle-base.yaml + sweeps/needle.yaml) is in"
  echo "[needle.md](needle.md), a one-off with its commands, machine and revisions there."
} > "$PAGE_DIR/results.md"
echo "results: $PAGE_DIR/results.md"
