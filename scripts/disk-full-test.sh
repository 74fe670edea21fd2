#!/usr/bin/env bash
# A full disk at every write, for real: a tmpfs (in a mount namespace of its own, so nothing
# outlives the test) sized so that each write point in turn is the first write that does not fit.
# Training (4 steps, saved at steps 2 and 4): run.h5 at the first save, checkpoint-2.pt, its list,
# run.h5 at the final save, checkpoint-4.pt; then `export table` and `report` on a disk left with
# no free page, and `report` with one page fewer than report.html takes. Every stop must be exit 1
# (not a signal) with a message naming the file and the cause, no temporary file left, nothing
# written before lost; every training stop must, once the disk grows, --resume to a run equal to
# an uninterrupted one.
#
# The sizes are measured, not written down: the first write that fails comes later as the disk
# grows, so bisecting the size between two sizes that stop at different writes finds every write
# point, to the page (4 KiB), whatever the files weigh today.
#
#   scripts/disk-full-test.sh [path/to/harness]     (a CTest; exit 77 = skipped: not root, no unshare)
set -uo pipefail
cd "$(dirname "$0")/.."
HARNESS=$(realpath "${1:-build/harness}")
PY="${PYTHON:-.venv/bin/python}"
[ "$(id -u)" = 0 ] || { echo "disk-full-test: skipped (needs root for a tmpfs)"; exit 77; }
command -v unshare >/dev/null || { echo "disk-full-test: skipped (no unshare)"; exit 77; }
if [ -z "${DISK_FULL_TEST_INSIDE:-}" ]; then
  DISK_FULL_TEST_INSIDE=1 exec unshare --mount --propagation private "$0" "$HARNESS"
fi
WORK=$(mktemp -d)
DISK=$WORK/disk
RUN=$DISK/disk  # the run's directory: <out_dir>/<config name>
trap 'umount "$DISK" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "disk-full-test: FAILED: $*"; exit 1; }
mkdir -p "$DISK"
mount -t tmpfs -o size=16m tmpfs "$DISK" || { echo "disk-full-test: skipped (cannot mount a tmpfs)"; exit 77; }
cat >"$WORK/disk.yaml" <<YAML
data: {corpus: '$PWD/tests/data/sotu', data_dir: '$WORK/data'}
model: {layers: 1, d_model: 16, heads: 1}
train: {context: 32, batch_size: 2, steps: 4}
eval: {contexts: [L], windows: 2, every: 2}
run: {checkpoint_every: 2, threads: 1}
YAML
train() { "$HARNESS" train --no-progress --config "$WORK/disk.yaml" "$@"; }
resize() { mount -o remount,size=$(($1 * 4))k "$DISK" || fail "cannot resize the tmpfs to $1 pages"; }
used_pages() { df -B4096 --output=used "$DISK" | tail -1 | tr -d ' '; }

# check_stop LOG CODE WHAT: a stop at a full disk as its user must see it.
check_stop() {
  local log=$1 code=$2 what=$3
  [ "$code" -lt 128 ] || fail "$what: killed by signal $((code - 128)): $(grep error "$log" | tail -2)"
  [ "$code" = 1 ] || fail "$what: exit code $code, not 1: $(tail -2 "$log")"
  grep -qE "^error: cannot write (the checkpoint )?$DISK/[^ ]+: (.*: )?No space left on device$" "$log" ||
    fail "$what: no message naming the file and the full disk: $(tail -2 "$log")"
  if grep -q "Exception raised from\|terminate called" "$log"; then fail "$what: a LibTorch trace reached the user"; fi
  local left
  left=$(find "$DISK" -name "*.tmp*")
  [ -z "$left" ] || fail "$what: a temporary file left behind: $left"
}

# What was on disk before the stop (before.h5, when run.h5 was written) must be a whole file
# holding a prefix of the uninterrupted run; the resumed run must equal it.
check_resumed() {
  "$PY" - "$WORK/before.h5" "$RUN/run.h5" "$WORK/whole/disk/run.h5" <<'PY'
import os, sys, h5py
before, resumed, whole = sys.argv[1:]
w = h5py.File(whole, "r")
if os.path.exists(before):
    b = h5py.File(before, "r")
    n = len(b["train/step"])
    # "done" too: the final save writes run.h5 before the last checkpoint
    assert b["status"].attrs["state"] in ("running", "failed", "done"), dict(b["status"].attrs)
    assert list(b["train/step"][:]) == list(w["train/step"][:n]), "run.h5 before the stop: steps"
    assert list(b["train/loss"][:]) == list(w["train/loss"][:n]), "run.h5 before the stop: losses"
r = h5py.File(resumed, "r")
assert r["status"].attrs["state"] == "done", dict(r["status"].attrs)
for column in ("train/step", "train/loss", "eval/32/step", "eval/32/loss"):
    assert list(r[column][:]) == list(w[column][:]), f"{column}: {r[column][:]} vs {w[column][:]}"
PY
}

declare -A STOP SEEN  # disk size in pages → where training stopped; the stops met so far
STOPS=()
# probe PAGES: a fresh run on a disk of PAGES pages; at a stop not met before, the resume too.
probe() {
  local pages=$1 log="$WORK/train-$1.log" code
  rm -rf "$RUN"
  resize "$pages"
  train --set run.out_dir="$DISK" >"$log" 2>&1
  code=$?
  [ $code = 0 ] && { STOP[$pages]=none; return; }
  check_stop "$log" $code "training on a disk of $pages pages"
  STOP[$pages]="$(grep '^error: ' "$log") [$(grep -c 'failure is not recorded' "$log") unrecorded; files: $(ls "$RUN" | tr '\n' ' ')]"
  [ -n "${SEEN[${STOP[$pages]}]:-}" ] && return
  SEEN[${STOP[$pages]}]=1
  STOPS+=("$pages pages: ${STOP[$pages]}")
  rm -f "$WORK/before.h5"
  [ -f "$RUN/run.h5" ] && cp "$RUN/run.h5" "$WORK/before.h5"
  resize 4096
  train --set run.out_dir="$DISK" --resume >"$WORK/resume-$pages.log" 2>&1 ||
    fail "--resume after the stop at $pages pages: $(tail -2 "$WORK/resume-$pages.log")"
  check_resumed || fail "the run stopped at $pages pages, resumed, differs from the uninterrupted run"
}
# walk LO HI: every stop between disks of LO and HI pages (both probed).
walk() {
  local lo=$1 hi=$2
  [ "${STOP[$lo]}" != "${STOP[$hi]}" ] && [ $((hi - lo)) -gt 1 ] || return 0
  local mid=$(((lo + hi) / 2))
  probe $mid
  walk "$lo" $mid
  walk $mid "$hi"
}

start=$SECONDS
train --set run.out_dir="$WORK/whole" >"$WORK/whole.log" 2>&1 || fail "the uninterrupted run: $(tail -3 "$WORK/whole.log")"
# Room for the whole run and a temporary copy of its largest file.
room=$(($(du -s -B4096 "$WORK/whole/disk" | cut -f1) + $(du -B4096 "$WORK/whole/disk/"* | sort -n | tail -1 | cut -f1) + 2))
probe 1
probe $room
[ "${STOP[$room]}" = none ] || fail "the run does not fit in $room pages: ${STOP[$room]}"
walk 1 $room
printf '  %s\n' "${STOPS[@]}" | sort -n
# The first save (nothing written yet), the first checkpoint, the final save, the second checkpoint.
for point in "run.h5: .*files: config.yaml train.log \]" "checkpoint-2.pt: " \
             "run.h5: .*files: checkpoint-2.pt" "checkpoint-4.pt: "; do
  printf '%s\n' "${STOPS[@]}" | grep -q "$point" || fail "no stop at a write matching '$point'"
done
echo "disk-full-test: training: ${#STOPS[@]} write points, each stopped and resumed ($((SECONDS - start)) s)"

# Exports on a full disk: the previous file stays, and no temporary one.
rm -rf "$RUN"
resize 4096
train --set run.out_dir="$DISK" >"$WORK/run.log" 2>&1 || fail "training on a large disk: $(tail -2 "$WORK/run.log")"
"$HARNESS" export table "$RUN" --out "$DISK/table.md" >"$WORK/table.log" 2>&1 || fail "export table: $(tail -2 "$WORK/table.log")"
cp "$DISK/table.md" "$WORK/table.md"
resize "$(used_pages)"
"$HARNESS" export table "$RUN" --out "$DISK/table.md" --format csv >"$WORK/table.log" 2>&1
check_stop "$WORK/table.log" $? "export table on a full disk"
cmp -s "$DISK/table.md" "$WORK/table.md" || fail "export table on a full disk changed the previous table"

resize 4096
"$HARNESS" report "$RUN" --out "$DISK/report/report.html" >"$WORK/report.log" 2>&1 || fail "report: $(tail -2 "$WORK/report.log")"
cp "$DISK/report/report.html" "$WORK/report.html"
# The first write of `report` (no free page) and its last, the page itself (one page fewer than it
# takes); the previous page must stay whole.
page_pages=$(du -B4096 "$DISK/report/report.html" | cut -f1)
for free in 0 $((page_pages - 1)); do
  resize 4096
  resize $(($(used_pages) + free))
  "$HARNESS" report "$RUN" --out "$DISK/report/report.html" >"$WORK/report-$free.log" 2>&1
  check_stop "$WORK/report-$free.log" $? "report with $free free pages"
  cmp -s "$DISK/report/report.html" "$WORK/report.html" || fail "report with $free free pages changed the previous page"
  echo "  report, $free free pages: $(grep '^error: ' "$WORK/report-$free.log")"
done
grep -q "report.html: No space left on device" "$WORK/report-$((page_pages - 1)).log" ||
  fail "report with $((page_pages - 1)) free pages did not stop at the page itself"
echo "disk-full-test: PASSED (every stop: exit 1 naming the file and the cause, no .tmp, nothing lost;" \
  "resumed equal to the whole run; $((SECONDS - start)) s)"
