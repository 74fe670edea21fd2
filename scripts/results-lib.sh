# What scripts/results*.sh share (sourced, not run; the functions after results_args need HARNESS).
#
# Each results page has two forms: the build form reads the runs and writes the page's data — CSV
# the harness exported, figures, provenance.md — into docs/results/<page>/; the render form
# (--render) writes the page from that committed data alone, numbers by the harness's own export
# code (`export table|pairs --from-csv`), so that the CTest results_pages_regenerate can render
# every page again and compare.

# The two forms' arguments, the same in every results script: results_args NAME DEFAULT_PAGE_DIR "$@"
# sets render_only (1 for --render), BUILD, HARNESS and PAGE_DIR, and stops (exit 2) when the
# harness is not built.
results_args() {
  local name=$1 default_dir=$2
  shift 2
  render_only=0
  [ "${1:-}" = --render ] && { render_only=1; shift; }
  BUILD=${1:-build}
  HARNESS="$BUILD/harness"
  PAGE_DIR=${2:-$default_dir}
  [ -x "$HARNESS" ] || { echo "$name: $HARNESS not found; run make build first" >&2; exit 2; }
}

# The revisions the runs under the given sweep directories were trained at (each run.h5 records its
# own in /config git_revision), with counts: "abc1234 (15 runs), def5678-dirty (3 runs)".
trained() { "$HARNESS" export revisions "$@" 2>/dev/null; }

# A page's provenance.md: provenance SCRIPT SWEEP... (each sweep's runs under runs/<name>/).
provenance() {
  local script=$1 sweep; shift
  echo "Data written by \`$script\` on $(date -u +%Y-%m-%d) at revision"
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo -dirty), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores."
  for sweep in "$@"; do
    echo "The runs of \`sweeps/$sweep.yaml\` were trained at revision(s) $(trained "runs/$sweep") (each run.h5's /config git_revision)."
  done
}

# A sweep's figures into docs/results/NAME/: PNG and CSV only (export curves also writes SVGs and
# gnuplot scripts). figures NAME SWEEP [export curves options]
figures() {
  local dir="$OUT/$1"; shift
  rm -rf "$dir.tmp" && "$HARNESS" export curves "$@" --out "$dir.tmp" >/dev/null 2>&1
  rm -rf "$dir" && mkdir -p "$dir" && cp "$dir.tmp"/*.png "$dir.tmp"/*.csv "$dir" && rm -rf "$dir.tmp"
}

# A committed file of a page's data, rendered: committed KIND FILE WRITER [export options], KIND
# table (`export table --from-csv`), pairs (`export pairs --from-csv`), plain (any CSV as a
# table) or text (the file as it is). While FILE is not committed yet (written by a build form
# that has not run since the page began to be rendered from data), one line says which command
# writes it.
committed() {
  local kind=$1 file=$2 writer=$3; shift 3
  if [ ! -f "$file" ]; then
    echo "*Not in the committed data yet: \`$writer\` writes \`$file\` from the runs.*"
    return
  fi
  case $kind in
    table) "$HARNESS" export table --from-csv "$file" "$@" ;;
    pairs) "$HARNESS" export pairs --from-csv "$file" "$@" ;;
    plain) "$HARNESS" export table --from-csv "$file" --plain ;;
    text) cat "$file" ;;
  esac
}

# A table of the committed `export table` CSV when there is one, else the same means ± s.e. read
# from committed figure CSVs (`export table --from-curves`: no seed counts, no window s.e.):
# table_or_curves CSV WRITER BEST TITLE LABEL=FILE[@X] ...
table_or_curves() {
  local file=$1 writer=$2 best=$3 title=$4 a args=(); shift 4
  if [ -f "$file" ]; then "$HARNESS" export table --from-csv "$file" --best "$best" --title "$title"; return; fi
  for a in "$@"; do args+=(--from-curves "$a"); done
  "$HARNESS" export table "${args[@]}" --best "$best"
  echo
  echo "*From the figure CSVs until \`$writer\` writes \`$file\` from the runs (with the seeds behind each cell).*"
}
