#!/usr/bin/env bash
# The τ-vs-context study (docs/tau-vs-context.md), its page docs/results/tau-vs-context.md rendered
# from committed data.
#
#   scripts/tau-vs-context.sh [BUILD]                  trains (or resumes: finished runs are skipped)
#       sweeps/tau-vs-context.yaml, re-validates every final model on TOKENS tokens per context
#       (`harness analyse --tokens`: loss ± its standard error over windows), writes into
#       docs/results/tau-vs-context/ the loss table (CSV), the figures loss_vs_tau (τ/L axis) and
#       loss_vs_tau_tokens (τ axis) and the provenance, then renders the page
#       TOKENS (default 65536), JOBS (default: cores)
#   scripts/tau-vs-context.sh --render [BUILD] [DIR]   the page into DIR (default docs/results) from
#       the committed loss.csv only (the CTest results_pages_regenerate): per training context L the
#       loss table, and the best τ per L and validation context (the grid's best, and the minimum of
#       a parabola in ln τ through it and its two neighbours, with how many seeds' standard errors
#       separate the best from its neighbours; also written to best_tau.csv by the first form)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results-lib.sh  # results_args and what the scripts share
results_args tau-vs-context docs/results "$@"
JOBS=${JOBS:-$(nproc)}
TOKENS=${TOKENS:-65536}
SWEEP=sweeps/tau-vs-context.yaml
OUT=docs/results/tau-vs-context

if [ "$render_only" = 0 ]; then
  "$HARNESS" sweep run "$SWEEP" --jobs "$JOBS" --threads-per-job 1 --no-live
  "$HARNESS" analyse "$SWEEP" --tokens "$TOKENS" --threads "$JOBS" >/dev/null
  mkdir -p "$OUT"
  "$HARNESS" export table "$SWEEP" --metric analysis/loss --rows train.context,train.batch_size,attention.method,attention.tau \
      --format csv --window-se --out "$OUT/loss.csv" >/dev/null 2>&1
  rm -rf "$OUT.tmp" && "$HARNESS" export curves "$SWEEP" --out "$OUT.tmp" >/dev/null 2>&1
  cp "$OUT.tmp"/loss_vs_tau*.png "$OUT.tmp"/loss_vs_tau*.csv "$OUT" && rm -rf "$OUT.tmp"
  { provenance scripts/tau-vs-context.sh tau-vs-context
    echo "Every final model re-validated on $TOKENS tokens per context (\`harness analyse --tokens $TOKENS\`)."; } > "$OUT/provenance.md"
fi

best_csv=/dev/null
[ "$render_only" = 0 ] && best_csv="$OUT/best_tau.csv"
mkdir -p "$PAGE_DIR"
{
echo "# The best τ against the training context: the grid of sweeps/tau-vs-context.yaml"
echo
committed text "$OUT/provenance.md" scripts/tau-vs-context.sh
echo
echo "The setting, and what the tables say, are in [tau-vs-context.md](../tau-vs-context.md). Rendered by"
echo "\`scripts/tau-vs-context.sh --render\` from the committed loss table"
echo "[tau-vs-context/loss.csv](tau-vs-context/loss.csv) (\`harness export table --format csv\`). Cells: loss"
echo "(nats/byte), mean ± standard error over seeds, and (w ± …) the standard error over validation"
echo "windows; bold: best τ per column."
echo
"${PYTHON:-.venv/bin/python}" - "$OUT/loss.csv" "$best_csv" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
contexts = sorted({int(k.split()[0]) for k in rows[0] if k.endswith(" mean")})
cells = {}      # (L, tau) -> {T: (mean, se, n, window_se)}: si+p-rope
reference = {}  # (L, method) -> the same: methods without τ (KERPLE-log + p-RoPE)
for r in rows:
    L = int(r["train.context"])
    for T in contexts:
        m = r[f"{T} mean"]
        if m:
            f = lambda k: float(r[f"{T} {k}"]) if r[f"{T} {k}"] else float("nan")
            cell = (float(m), f("se"), int(r[f"{T} n"]), f("window_se"))
            if r["attention.tau"]:
                cells.setdefault((L, float(r["attention.tau"])), {})[T] = cell
            else:
                reference.setdefault((L, r["attention.method"]), {})[T] = cell
Ls = sorted({L for L, _ in cells})
best_rows = []
for L in Ls:
    taus = sorted(t for l, t in cells if l == L)
    print(f"### L = {L}\n")
    print("| τ (tokens) | τ / L | " + " | ".join(f"{m}L" for m in (1, 4, 16)) + " |")
    print("| --- | --- | --- | --- | --- |")
    best = {}
    for m in (1, 4, 16):
        T = m * L
        vals = [(cells[(L, t)][T][0], t) for t in taus if T in cells[(L, t)]]
        best[m] = min(vals)[1] if vals else None
    for t in taus:
        out = []
        for m in (1, 4, 16):
            mean, se, n, wse = cells[(L, t)].get(m * L, (math.nan,) * 4)
            s = f"{mean:.4f} ± {se:.4f} (w ± {wse:.4f})"
            out.append(f"**{s}**" if best[m] == t else s)
        print(f"| {t:g} | L/{L / t:.4g} | " + " | ".join(out) + " |")
    for (l, method), ref in sorted(reference.items()):
        if l != L: continue
        out = []
        for m in (1, 4, 16):
            mean, se, n, wse = ref.get(m * L, (math.nan,) * 4)
            out.append(f"{mean:.4f} ± {se:.4f} (w ± {wse:.4f})")
        print(f"| {method} | – | " + " | ".join(out) + " |")
    print()
    for m in (1, 4, 16):
        T = m * L
        i = taus.index(best[m])
        mean = lambda t: cells[(L, t)][T][0]
        se = lambda t: cells[(L, t)][T][1]
        # Parabola in x = ln τ through the best grid point and its neighbours (an interior best only).
        fit = math.nan
        if 0 < i < len(taus) - 1:
            x = [math.log(taus[j]) for j in (i - 1, i, i + 1)]
            y = [mean(taus[j]) for j in (i - 1, i, i + 1)]
            d = (x[0] - x[1]) * (x[0] - x[2]) * (x[1] - x[2])
            a = (x[2] * (y[1] - y[0]) + x[1] * (y[0] - y[2]) + x[0] * (y[2] - y[1])) / d
            b = (x[2] ** 2 * (y[0] - y[1]) + x[1] ** 2 * (y[2] - y[0]) + x[0] ** 2 * (y[1] - y[2])) / d
            if a > 0: fit = math.exp(-b / (2 * a))
        # How many combined seeds' s.e. separate the best from each neighbour.
        z = [(mean(taus[j]) - mean(taus[i])) / math.hypot(se(taus[j]), se(taus[i]))
             for j in (i - 1, i + 1) if 0 <= j < len(taus)]
        best_rows.append((L, m, taus[i], fit, min(z) if z else math.nan))
with open(sys.argv[2], "w") as f:
    w = csv.writer(f)
    w.writerow(["L", "context_multiple", "best_tau_grid", "best_tau_parabola", "best_tau_parabola_over_L",
                "z_nearest_neighbour"])
    for L, m, t, fit, z in best_rows:
        w.writerow([L, m, t, f"{fit:.6g}", f"{fit / L:.6g}", f"{z:.3g}"])
print("### The best τ\n")
print("| L | context | best τ on the grid | parabola in ln τ | as L / … | nearest neighbour, seeds' s.e. |")
print("| --- | --- | --- | --- | --- | --- |")
for L, m, t, fit, z in best_rows:
    print(f"| {L} | {m}L | {t:g} | {fit:.3g} | L/{L / fit:.3g} | {z:.1f} |" if not math.isnan(fit)
          else f"| {L} | {m}L | {t:g} (grid edge) | – | – | {z:.1f} |")
PY
echo
echo "\"parabola in ln τ\": the minimum of the parabola through the best grid point and its two"
echo "neighbours (an interior best only); \"nearest neighbour\": how many combined seeds' s.e. separate"
echo "the best grid point from the closer of its neighbours."
echo
echo "![loss against τ in tokens](tau-vs-context/loss_vs_tau_tokens.png)"
echo
echo "![loss against τ / L](tau-vs-context/loss_vs_tau.png)"
} > "$PAGE_DIR/tau-vs-context.md"
echo "tau-vs-context: $PAGE_DIR/tau-vs-context.md"
