# What scripts/results*.sh share (sourced, not run). Needs HARNESS set.

# The revisions the runs under the given sweep directories were trained at (each run.h5 records its
# own in /config git_revision), with counts: "abc1234 (15 runs), def5678-dirty (3 runs)".
trained() {
  "${PYTHON:-.venv/bin/python}" - "$@" <<'PY'
import collections, glob, sys
import h5py
count = collections.Counter()
for folder in sys.argv[1:]:
    for path in glob.glob(f"{folder}/*/run.h5"):
        with h5py.File(path, "r") as f:
            rev = f["config"].attrs.get("git_revision", "unknown")
            rev = rev.decode() if isinstance(rev, bytes) else str(rev)
            count[rev[:7] + ("-dirty" if rev.endswith("-dirty") else "")] += 1  # short hash
print(", ".join(f"{rev} ({n} runs)" for rev, n in sorted(count.items())) or "none")
PY
}

# A sweep's figures into docs/results/NAME/: PNG and CSV only (export curves also writes SVGs and
# gnuplot scripts). figures NAME SWEEP [export curves options]
figures() {
  local dir="$OUT/$1"; shift
  rm -rf "$dir.tmp" && "$HARNESS" export curves "$@" --out "$dir.tmp" >/dev/null 2>&1
  rm -rf "$dir" && mkdir -p "$dir" && cp "$dir.tmp"/*.png "$dir.tmp"/*.csv "$dir" && rm -rf "$dir.tmp"
}
