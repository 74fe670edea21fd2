#!/usr/bin/env bash
# `make fuzz` (docs/fuzzing.md): libFuzzer on the readers, for a bounded time. Builds the fuzz
# targets in build-fuzz/ (clang, -DHARNESS_FUZZ=ON: ASan + UBSan + coverage), prepares the seed
# corpora and dictionaries, runs each target for FUZZ_SECONDS (one after the other), triages what
# they found, and prints per target: seconds, executions, corpus size, coverage and findings.
# Exit 1 when a finding is the project's own (a crash, sanitizer report, hang or OOM in our code,
# or an error the readers do not document); crashes inside the system's libhdf5 or LibTorch on
# their own memory are kept apart (fuzz-findings/<target>/upstream/) and reported, not failed on.
#
#   scripts/fuzz.sh [fuzz_config] [fuzz_run_file] [fuzz_checkpoint] [fuzz_shard]
#   env: FUZZ_SECONDS (600), FUZZ_BUILD (build-fuzz), HARNESS (the harness that makes the run
#        file and checkpoint seeds; default build/harness when it runs, else build-fuzz's own), JOBS
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${FUZZ_SECONDS:-600}
B=${FUZZ_BUILD:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(fuzz_config fuzz_run_file fuzz_checkpoint fuzz_shard)
WORK=$B/fuzz              # seeds (regenerated), corpora (kept: they grow run after run), logs
FINDINGS=$B/fuzz-findings

say() { echo "fuzz: $*"; }

# ---- build ---------------------------------------------------------------------------------------
command -v clang++ >/dev/null || { say "clang++ not found (apt-get install clang)"; exit 2; }
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
        -DHARNESS_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$B" -j"$JOBS" --target "${TARGETS[@]}" fuzz_regressions
# What fuzzing found before, under the same sanitizers (tests/fuzz_regressions_test.cpp).
ASAN_OPTIONS=detect_leaks=0 "$B/fuzz_regressions" --gtest_brief=1 >"$B/fuzz_regressions.log" 2>&1 ||
  { tail -20 "$B/fuzz_regressions.log"; say "the regression tests fail under the sanitizers"; exit 1; }
say "regression tests pass under ASan/UBSan ($(grep -o '[0-9]* tests' "$B/fuzz_regressions.log" | head -1))"

HARNESS=${HARNESS:-}
if [ -z "$HARNESS" ]; then
  if [ -x build/harness ] && build/harness --version >/dev/null 2>&1; then
    HARNESS=build/harness
  else
    cmake --build "$B" -j"$JOBS" --target harness_cli
    HARNESS=$B/harness
  fi
fi
HARNESS=$(realpath "$HARNESS")

# ---- seeds and dictionaries ----------------------------------------------------------------------
mkdir -p "$WORK" "$FINDINGS"

config_seeds() {
  local seeds=$WORK/seeds/fuzz_config
  rm -rf "$seeds" && mkdir -p "$seeds"
  local f
  for f in sweeps/*.yaml sweeps/*/*.yaml tests/data/sweeps/*.yaml; do
    cp "$f" "$seeds/$(echo "$f" | tr / _)"
  done
  # The YAML blocks of the docs (configs and sweeps as users are shown them).
  for f in README.md sweeps/README.md docs/*.md; do
    awk -v out="$seeds/$(echo "$f" | tr / _)" '
      /^```ya?ml[ \t]*$/ { n++; inside = 1; next }
      /^```/ { inside = 0; next }
      inside { print > (out "." n ".yaml") }' "$f"
  done
  if [ -d tests/data/fuzz-regressions/config ]; then cp tests/data/fuzz-regressions/config/* "$seeds/"; fi
  # The dictionary: every config key (dotted, and each part), the values of the keys that take one
  # of a list, the sweep's keys, and YAML's punctuation.
  "$HARNESS" config keys | awk '
    function add(s) { if (s != "" && !(s in seen)) { seen[s] = 1; gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); print "\"" s "\"" } }
    /^[a-z_]/ { key = $1; add(key); n = split(key, parts, "."); for (i = 1; i <= n; i++) add(parts[i]) }
    /expected one of: / { sub(/.*expected one of: /, ""); sub(/; default.*/, ""); n = split($0, v, ", "); for (i = 1; i <= n; i++) add(v[i]) }
  ' >"$WORK/fuzz_config.dict"
  cat >>"$WORK/fuzz_config.dict" <<'DICT'
"name"
"description"
"base"
"grid"
"zip"
"seeds"
"runs"
": "
":\x0a  "
"\x0a- "
"- "
"["
"]"
"{"
"}"
", "
"&a "
"*a"
"<<: "
"!!str "
"!!int "
"!!map"
"---"
"..."
"|"
">"
"#"
"'"
"\""
"~"
"null"
"true"
"L"
"L/400"
"4L"
"16L"
"0.25*L"
"1e400"
"-1"
"0"
DICT
  say "fuzz_config: $(ls "$seeds" | wc -l) seeds, $(wc -l <"$WORK/fuzz_config.dict") dictionary entries"
}

# Real run files, made by `harness train` on the fixture corpus (seconds each), and cached: a done
# run with validations and attention statistics, the same analysed (/analysis), a run stopped
# early, a run without validation, a needle fine-tuning (/needle), and a theory file (root `kind`).
run_file_seeds() {
  local seeds=$WORK/seeds/fuzz_run_file gen=$WORK/generate
  mkdir -p "$seeds"
  if [ ! -f "$seeds/.complete" ]; then
    rm -rf "$gen" && mkdir -p "$gen"
    local common="data: {corpus: '$ROOT/tests/data/sotu', data_dir: '$gen/data'}
model: {layers: 1, d_model: 32, heads: 2}
run: {checkpoint_every: 2, threads: 1, out_dir: '$gen/runs'}"
    printf '%s\nname: done\ntrain: {context: 16, batch_size: 2, steps: 4}\neval: {every: 2, contexts: [L, 2L], windows: 2}\n' \
      "$common" >"$gen/done.yaml"
    printf '%s\nname: base\ntrain: {context: 256, batch_size: 2, steps: 2}\neval: {every: 2, contexts: [L], windows: 2}\n' \
      "$common" >"$gen/base.yaml"
    printf '%s\nname: needle\ntrain: {context: 256, batch_size: 2, steps: 2}\neval: {every: 2, contexts: [L], windows: 2}\ntask: needle\ninit_from: %s\nneedle: {steps: 2, warmup_steps: 0, cooldown_steps: 0, batch_size: 2, contexts: [L], examples: 2}\n' \
      "$common" "$gen/runs/base" >"$gen/needle.yaml"
    local t="$HARNESS train --no-progress --config"
    {
      $t "$gen/done.yaml" &&
      $t "$gen/done.yaml" --set name=stopped --stop-after-steps 2 &&
      $t "$gen/done.yaml" --set name=noeval --set eval.every=0 &&
      $t "$gen/base.yaml" &&
      $t "$gen/needle.yaml" &&
      cp -r "$gen/runs/done" "$gen/runs/analysed" &&
      "$HARNESS" analyse "$gen/runs/analysed" --windows 2 --queries 8 --threads 1 &&
      "$HARNESS" theory entropy --quick --tau 0.16 --threads 1 --out "$gen/theory-entropy.h5"
    } >"$gen/log" 2>&1 || { say "making the run file seeds failed ($HARNESS): see $gen/log"; tail -5 "$gen/log"; exit 1; }
    for r in done stopped noeval base needle analysed; do cp "$gen/runs/$r/run.h5" "$seeds/$r.h5"; done
    cp "$gen/theory-entropy.h5" "$seeds/"
    # The same run as h5py users may rewrite it (layouts our writer never makes), when the
    # project's Python is there: compressed, compact and float32 columns, fixed-length strings,
    # attributes of several values, HDF5's newest object headers (dense attribute storage).
    if [ -x .venv/bin/python ]; then
      .venv/bin/python - "$seeds/done.h5" "$seeds" <<'PY' >>"$gen/log" 2>&1 || say "h5py seeds skipped (see $gen/log)"
import sys, h5py, numpy as np
src, out = sys.argv[1], sys.argv[2]
def variant(name, edit, **kw):
    path = f"{out}/h5py-{name}.h5"
    with h5py.File(src, "r") as a, h5py.File(path, "w", **kw) as b:
        for k, v in a.attrs.items(): b.attrs[k] = v
        for key in a: a.copy(a[key], b, name=key)
        edit(b)
def rewrite(f, group, layout=None, **kw):
    for name in list(f[group]):
        data, attrs = f[group][name][()], dict(f[group][name].attrs)
        del f[group][name]
        if layout is None:
            f[group].create_dataset(name, data=data, **kw)
        else:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(layout)
            space = h5py.h5s.create_simple(data.shape)
            h5py.h5d.create(f[group].id, name.encode(), h5py.h5t.py_create(data.dtype), space,
                            dcpl=dcpl).write(h5py.h5s.ALL, h5py.h5s.ALL, data)
        for k, v in attrs.items(): f[group][name].attrs[k] = v
variant("gzip", lambda f: rewrite(f, "train", compression="gzip", shuffle=True, chunks=True))
variant("compact", lambda f: rewrite(f, "train", layout=h5py.h5d.COMPACT))
variant("contiguous", lambda f: rewrite(f, "train", layout=h5py.h5d.CONTIGUOUS))
def float32(f):
    for name in ["loss", "lr", "seconds"]:
        data = f["train"][name][()].astype(np.float32); del f["train"][name]; f["train"][name] = data
variant("float32", float32)
def fixed_strings(f):
    for k, v in list(f["config"].attrs.items()):
        if isinstance(v, str): f["config"].attrs[k] = np.bytes_(v.encode())
    f["status"].attrs["state"] = np.bytes_(b"done")
variant("fixed-strings", fixed_strings)
def arrays(f):
    f["status"].attrs["step"] = np.array([4, 4], dtype=np.int64)
    f["status"].attrs["reason"] = np.array(["a", "b"], dtype=h5py.string_dtype())
variant("attribute-arrays", arrays)
def dense(f):
    for i in range(40): f["config"].attrs[f"extra{i}"] = i
variant("latest-dense", dense, libver="latest")
PY
    fi
    touch "$seeds/.complete"
  fi
  find tests/data -name '*.h5' -exec cp {} "$seeds/" \;
  if [ -d tests/data/fuzz-regressions/run_file ]; then cp tests/data/fuzz-regressions/run_file/* "$seeds/"; fi
  cp tests/fuzz/run_file.dict "$WORK/fuzz_run_file.dict"
  say "fuzz_run_file: $(ls "$seeds" | wc -l) seeds"
}

# Real checkpoints: the run of tests/fuzz/checkpoint.yaml (the model fuzz_checkpoint loads into:
# its checkpoints of steps 2 and 4, and its checkpoints.tsv for the list's parser), the same with
# AdamW (another optimiser's state) and with d_model 16 (other shapes). Cached.
checkpoint_seeds() {
  local seeds=$WORK/seeds/fuzz_checkpoint gen=$WORK/generate-checkpoint
  mkdir -p "$seeds"
  if [ ! -f "$seeds/.complete" ]; then
    rm -rf "$gen" && mkdir -p "$gen"
    local t="$HARNESS train --no-progress --config tests/fuzz/checkpoint.yaml --set data.corpus=$ROOT/tests/data/sotu
             --set data.data_dir=$gen/data --set run.out_dir=$gen/runs"
    {
      $t && $t --set name=adamw --set optim.name=adamw && $t --set name=wide --set model.d_model=16
    } >"$gen/log" 2>&1 || { say "making the checkpoint seeds failed ($HARNESS): see $gen/log"; tail -5 "$gen/log"; exit 1; }
    cp "$gen/runs/fuzz-checkpoint/checkpoint-2.pt" "$seeds/step2.pt"
    cp "$gen/runs/fuzz-checkpoint/checkpoint-4.pt" "$seeds/step4.pt"
    cp "$gen/runs/fuzz-checkpoint/checkpoints.tsv" "$seeds/checkpoints.tsv"
    cp "$gen/runs/adamw/checkpoint-4.pt" "$seeds/adamw.pt"
    cp "$gen/runs/wide/checkpoint-4.pt" "$seeds/wide.pt"
    touch "$seeds/.complete"
  fi
  if [ -d tests/data/fuzz-regressions/checkpoint ]; then cp tests/data/fuzz-regressions/checkpoint/* "$seeds/"; fi
  cp tests/fuzz/checkpoint.dict "$WORK/fuzz_checkpoint.dict"
  say "fuzz_checkpoint: $(ls "$seeds" | wc -l) seeds"
}

# Token shards written by the harness's own writer (write_token_shard; fuzz_shard writes them).
shard_seeds() {
  local seeds=$WORK/seeds/fuzz_shard
  rm -rf "$seeds"
  HARNESS_FUZZ_SHARD_SEEDS=$seeds "$B/fuzz_shard"
  if [ -d tests/data/fuzz-regressions/shard ]; then cp tests/data/fuzz-regressions/shard/* "$seeds/"; fi
  cp tests/fuzz/shard.dict "$WORK/fuzz_shard.dict"
  say "fuzz_shard: $(ls "$seeds" | wc -l) seeds"
}

# ---- run -----------------------------------------------------------------------------------------
# fuzz_config runs in libFuzzer's plain mode: its first crash ends it (our code and yaml-cpp only).
# fuzz_run_file runs in fork mode (-fork=1, crashes/timeouts/OOMs recorded and the run goes on):
# the system's libhdf5 1.10 crashes by itself on some damaged files, and one such crash would
# otherwise end the run within seconds. fuzz_checkpoint runs in fork mode too (LibTorch is not
# instrumented either and parses the archive's TorchScript code), fuzz_shard in the plain mode.
# All keep their artifacts for the triage below.
status=0
summary=()
for target in "${TARGETS[@]}"; do
  case $target in
    fuzz_config) config_seeds; mode=(-max_len=65536 -print_final_stats=1) ;;
    fuzz_run_file) run_file_seeds; mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1) ;;
    fuzz_checkpoint) checkpoint_seeds; mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_len=160000) ;;
    fuzz_shard) shard_seeds; mode=(-max_len=65536 -print_final_stats=1) ;;
    *) say "unknown target $target"; exit 2 ;;
  esac
  corpus=$WORK/corpus/$target
  found=$FINDINGS/$target
  log=$WORK/$target.log
  mkdir -p "$corpus" "$found"
  stamp=$WORK/$target.started
  touch "$stamp"
  say "$target: ${SECS} s (log: $log)"
  start=$(date +%s)
  set +e
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$B/$target" "${mode[@]}" \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
    -dict="$WORK/$target.dict" -artifact_prefix="$found/" "$corpus" "$WORK/seeds/$target" >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  # Executions: plain mode's final stat; fork mode's last "#N:" status line (its jobs' sum).
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  size=$(find "$corpus" -type f | wc -l)
  # Triage this run's artifacts: ours fail the run, libhdf5's and LibTorch's are moved to upstream/.
  new=$(find "$found" -maxdepth 1 -type f -newer "$stamp" \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | sort)
  ours=0 upstream=0 unreproduced=0
  for artifact in $new; do
    verdict=$(python3 scripts/fuzz_triage.py "$B/$target" "$artifact")
    echo "  $verdict"
    case $verdict in
      upstream*) upstream=$((upstream + 1)); mkdir -p "$found/upstream"; mv "$artifact" "$found/upstream/" ;;
      # Crashed in the fork-mode job but not alone: libhdf5's state after earlier inputs (its
      # free lists), or a timeout on a busy machine. Kept and reported; rerun it to look again.
      unreproduced*) unreproduced=$((unreproduced + 1)); mkdir -p "$found/unreproduced"; mv "$artifact" "$found/unreproduced/" ;;
      *) ours=$((ours + 1)) ;;
    esac
  done
  if [ "$rc" != 0 ] && [ "$ours" = 0 ] && [ -z "$new" ]; then ours=1; echo "  libFuzzer exited $rc with no artifact: see $log"; fi
  [ "$ours" = 0 ] || status=1
  summary+=("$(printf '%-14s %5s s  %10s execs  corpus %5s  cov %6s  findings: %s ours, %s upstream (libhdf5, LibTorch), %s unreproduced' \
    "$target" "$elapsed" "${execs:-?}" "$size" "${cov:-?}" "$ours" "$upstream" "$unreproduced")")
done

echo
say "results ($(date -u +%Y-%m-%dT%H:%MZ), $(clang++ --version | head -1))"
for line in "${summary[@]}"; do echo "  $line"; done
if [ $status != 0 ]; then
  say "FAILED: findings in our code under $FINDINGS/<target>/ (reproduce: $B/<target> <file>)"
else
  say "no open finding"
fi
exit $status
