#!/usr/bin/env bash
# A full disk while a checkpoint is written, for real: a 400 KiB tmpfs as run.out_dir (in a mount
# namespace of its own, so nothing outlives the test) fills up at the first checkpoint. The run
# must stop with exit code 1 (not a signal), say the disk is full naming the file, leave no
# temporary file and mark run.h5 failed with that reason; once the tmpfs grows, --resume must
# finish equal to an uninterrupted run.
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
trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "disk-full-test: FAILED: $*"; exit 1; }
mkdir -p "$WORK/small"
mount -t tmpfs -o size=400k tmpfs "$WORK/small" || { echo "disk-full-test: skipped (cannot mount a tmpfs)"; exit 77; }
cat >"$WORK/disk.yaml" <<YAML
data: {corpus: '$PWD/tests/data/sotu', data_dir: '$WORK/data'}
model: {layers: 1, d_model: 64, heads: 1}
train: {context: 32, batch_size: 2, steps: 4}
eval: {every: 0}
run: {checkpoint_every: 2, threads: 1}
YAML
run() { "$HARNESS" train --no-progress --config "$WORK/disk.yaml" "$@"; }

run --set run.out_dir="$WORK/small" >"$WORK/full.log" 2>&1
code=$?
[ $code = 1 ] || fail "exit code $code, not 1 ($(tail -3 "$WORK/full.log"))"
grep -q "error: cannot write the checkpoint $WORK/small/disk/checkpoint-2.pt: No space left on device" "$WORK/full.log" ||
  fail "no message naming the file and the full disk: $(tail -3 "$WORK/full.log")"
grep -q "Exception raised from\|terminate called" "$WORK/full.log" && fail "a LibTorch trace reached the user"
[ -z "$(ls "$WORK/small/disk" | grep "\.tmp")" ] || fail "a temporary file left behind: $(ls "$WORK/small/disk")"
"$PY" - "$WORK/small/disk/run.h5" <<'PY' || fail "run.h5 does not say failed, with the reason"
import sys, h5py
status = h5py.File(sys.argv[1], "r")["status"].attrs
assert status["state"] == "failed" and "No space left on device" in status["reason"], dict(status)
PY

mount -o remount,size=16m "$WORK/small" || fail "cannot grow the tmpfs"
run --set run.out_dir="$WORK/small" --resume >"$WORK/resume.log" 2>&1 || fail "--resume: $(tail -3 "$WORK/resume.log")"
run --set run.out_dir="$WORK/whole" >"$WORK/whole.log" 2>&1 || fail "the uninterrupted run: $(tail -3 "$WORK/whole.log")"
"$PY" - "$WORK/small/disk/run.h5" "$WORK/whole/disk/run.h5" <<'PY' || fail "run files differ"
import sys, h5py
resumed, whole = (h5py.File(p, "r") for p in sys.argv[1:])
assert resumed["status"].attrs["state"] == "done", dict(resumed["status"].attrs)
assert list(resumed["train/step"][:]) == [1, 2, 3, 4], list(resumed["train/step"][:])
assert list(resumed["train/loss"][:]) == list(whole["train/loss"][:]), "losses differ"
PY
echo "disk-full-test: PASSED (exit 1 with the file and the cause, no .tmp, failed; resumed equal to whole)"
