#!/usr/bin/env bash
# The GPU check of the harness: one call on a lent GPU machine (NVIDIA GPU, nvcc, CMake, ninja, a
# pip torch; no apt, no network), bounded to 8 minutes including every build, so that a second,
# targeted call still fits in the 15 minutes a machine is lent for. Run from the repository root
# with the Debian dependencies gathered beforehand by scripts/gpu-deps.sh (the device tool copies
# the ignored folder .gpu-deps/ when told: carry [".gpu-deps"]):
#
#     scripts/gpu-check.sh [--skip-flex]        on the GPU machine (docs/gpu.md)
#     scripts/gpu-check.sh --dry-run            here, without a GPU (the CTest gpu_check_dry_run)
#     scripts/gpu-check.sh --build-only         builds the kernels' test and gpu_check, runs nothing
#                                               (the CTest gpu_check_build)
#
# Stages, in order of what they tell per second, each with its own budget (STAGES below; the
# budgets sum to at most 480 s) and one verdict line ("stage NAME: PASS|FAIL|SKIP ..."):
#   env            GPU, driver, torch, nvcc, where nccl.h is → env.txt
#   kernels-build  the CUDA kernels (-Xptxas -v → ptxas.txt) and the torch-free kernel test, nvcc;
#                  meanwhile, in the background: the harness (CMake: harness, bench_kernel_agreement,
#                  bench_train_step only), gpu_check's LibTorch objects, the Python operator,
#                  synthetic token shards
#   kernel-test    tests/cuda/fused_attention_test.cu: bf16 tensor-core first-contact cases, then
#                  fp32 (SIMT) and bf16 against float64, FIRE included; resource usage (cuobjdump)
#   binding-build, binding   tests/cuda/gpu_check.cpp: the LibTorch binding against
#                  attention/reference.cpp, forward and backward, every registry transform
#   harness-build  waits for the background CMake build
#   agreement      one training step, CUDA kernel against the reference kernel (fp32, bf16)
#   sync-check     3 training steps under HARNESS_CUDA_SYNC_CHECK=1 (rotary; ALiBi)
#   bench-162m     the 162M model in bf16: step time, MFU, peak memory
#   train-resume   162M: train, kill -9 after a checkpoint, --resume, validate at 4k/16k/64k → run.h5
#   operator       the Python operator (setup.py, built against this torch): its CUDA test case
#   flex           FlexAttention against our kernel, with what time is left (--skip-flex: not at all)
#
# Everything goes under $OUT (the device tool brings it back; default build-gpu-check/out) as it
# happens: gpu-check.log (all output), one log per stage, timings.csv (stage, verdict, seconds,
# budget), env.txt, ptxas.txt, resource-usage.txt, ours.csv, run.h5. Only the end of the output
# comes back inline, so the verdicts are printed again at the end.
#
# A failing kernel case names its id; rerun it alone in a second call, e.g.
#     build-gpu-check/attention_cuda_test --case bf16/64/40/none
#     compute-sanitizer --tool racecheck build-gpu-check/attention_cuda_test --case bf16/64/40/none
# (the build folder does not survive the machine: prefix `scripts/gpu-check.sh --build-only &&`).
#
# Environment: NVCC, PYTHON, CXX, GPU_CHECK_BUILD (build-gpu-check), GPU_BUILD (build-gpu),
# GPU_CHECK_TRAIN_STEPS (20), HARNESS_BIN (--dry-run: a CPU build's harness to check the stages'
# configs with; default build/harness). Exit code: 0 every check passed, 1 one failed, 2 something
# needed is missing (77 with --build-only or --dry-run where nvcc or a CUDA torch is missing).
set -uo pipefail
MODE=run SKIP_FLEX=0
for arg in "$@"; do
  case $arg in
    --dry-run) MODE=dry ;;
    --build-only) MODE=build ;;
    --skip-flex) SKIP_FLEX=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown option $arg (--help lists them)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$(pwd)
BUILD=${GPU_CHECK_BUILD:-build-gpu-check}
GPU_BUILD=${GPU_BUILD:-build-gpu}
OUT_DIR=${OUT:-$BUILD/out}
mkdir -p "$BUILD" "$OUT_DIR" || exit 2
BUILD=$(cd "$BUILD" && pwd) OUT_DIR=$(cd "$OUT_DIR" && pwd)
[[ $GPU_BUILD == /* ]] || GPU_BUILD="$ROOT/$GPU_BUILD"
[[ $MODE == run ]] && exec > >(tee -a "$OUT_DIR/gpu-check.log") 2>&1
status=0
VERDICTS=()
DRY=0; [[ $MODE == dry ]] && DRY=1

# name budget_s: the stages in the order they run; their budgets sum to at most TOTAL_BUDGET_S
# (checked by --dry-run). A stage's commands run within what its budget leaves, cut to the call's.
STAGES=(
  "env 15" "kernels-build 45" "kernel-test 70" "binding-build 20" "binding 50" "harness-build 95"
  "agreement 40" "sync-check 35" "bench-162m 40" "train-resume 55" "operator 15"
)
TOTAL_BUDGET_S=480
CARRY=(.gpu-deps)                       # the device tool's carry list for this call
CARRY_LIMIT_BYTES=$((64 * 1024 * 1024))
PAPER=sweeps/gpu/paper-162m.yaml
HARNESS_TARGETS="harness bench_kernel_agreement bench_train_step"
STEPS=${GPU_CHECK_TRAIN_STEPS:-20}
HELPERS=scripts/gpu_check_helpers.py

# ---- helpers -------------------------------------------------------------------------------------
missing() { printf 'gpu-check: MISSING: %s\n' "$*" >&2; exit $([[ $MODE == run ]] && echo 2 || echo 77); }
budget_of() { local s; for s in "${STAGES[@]}"; do [[ ${s% *} == "$1" ]] && echo "${s#* }" && return; done; echo 0; }
stage_begin() {
  STAGE=$1 STAGE_START=$SECONDS STAGE_BUDGET=$(budget_of "$1")
  printf '\n== [%3d s] %s (budget %d s)\n' "$SECONDS" "$STAGE" "$STAGE_BUDGET"
}
# Seconds the stage has left: its own budget, cut to the call's. --build-only and --dry-run run
# here on a shared 2-core machine, not within the device's budgets: no bound but the CTest's.
stage_left() {
  [[ $MODE != run ]] && { echo 100000; return; }
  local own=$((STAGE_BUDGET - (SECONDS - STAGE_START))) all=$((TOTAL_BUDGET_S - SECONDS))
  echo $((own < all ? own : all))
}
# verdict PASS|FAIL|SKIP [detail]: the stage's one line, kept for the summary and timings.csv.
verdict() {
  local line
  line=$(printf 'stage %-14s %-4s %4d s of %3d  %s' "$STAGE" "$1" $((SECONDS - STAGE_START)) "$STAGE_BUDGET" "${2:-}")
  echo "$line"
  VERDICTS+=("$line")
  [[ $1 == FAIL ]] && status=1
  printf '%s,%s,%d,%d,"%s"\n' "$STAGE" "$1" $((SECONDS - STAGE_START)) "$STAGE_BUDGET" "${2//\"/\'}" >>"$OUT_DIR/timings.csv"
}
# Runs "$@" within what the stage has left, its output also into $OUT_DIR/<stage>.log.
bounded() {
  local left; left=$(stage_left)
  if ((left < 3)); then echo "gpu-check: no time left in $STAGE for: $*"; return 124; fi
  timeout -k 5 "$left" "$@" 2>&1 | tee -a "$OUT_DIR/$STAGE.log"
  return "${PIPESTATUS[0]}"
}
# Waits for a background job within what the stage has left; kills it past that (status 124).
wait_bounded() {
  local pid=$1
  while kill -0 "$pid" 2>/dev/null; do
    if (($(stage_left) <= 0)); then kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null; wait "$pid"; return 124; fi
    sleep 1
  done
  wait "$pid"
}
# background VAR LOG COMMAND...: a job in its own process group (so that wait_bounded can end all
# of it), its pid in VAR (not through $(...): the job must be this shell's child to be waited for).
background() { local var=$1 log=$2; shift 2; setsid "$@" >"$log" 2>&1 & printf -v "$var" %s $!; }
# On any exit (a MISSING included), what still runs in the background goes too: the device tool's
# call ends when this script does.
end_background() {
  local pid
  for pid in ${HARNESS_BUILD_PID:-} ${OPERATOR_PID:-} ${SHARDS_PID:-}; do kill -- -"$pid" 2>/dev/null; done
}
trap end_background EXIT
on_path_or() { command -v "$1" || echo "$2"; }

# ---- stages --------------------------------------------------------------------------------------
find_python() {  # one whose torch sees a GPU wins over one that merely imports torch
  local candidate found=""
  for candidate in ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; do
    command -v "$candidate" >/dev/null || continue
    if "$candidate" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
      found=$(command -v "$candidate"); break
    fi
    [[ -z $found ]] && "$candidate" -c 'import torch' 2>/dev/null && found=$(command -v "$candidate")
  done
  [[ -n $found ]] || missing "a python3 with torch (tried: ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; set PYTHON=...)"
  PYTHON=$found
}

record_environment() {
  echo "date: $(date -u '+%F %T UTC'); revision: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cores: $(nproc); memory: $(free -g 2>/dev/null | awk '/Mem:/{print $2 " GiB"}')"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "nvcc: $NVCC ($("$NVCC" --version | tail -1)); $CXX $("$CXX" -dumpfullversion)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1); ninja: $(ninja --version 2>/dev/null)"
  echo "python: $PYTHON ($("$PYTHON" -V 2>&1)); torch $TORCH_VERSION (CUDA ${TORCH_CUDA_VERSION:-none}, C++11 ABI $TORCH_ABI) at $TORCH_DIR"
  "$PYTHON" -c 'import importlib.util as u; print("python modules:", *(f"{m}={bool(u.find_spec(m))}" for m in ("numpy", "h5py", "pytest", "setuptools", "ninja")))'
  local site; site=$(dirname "$TORCH_DIR")
  echo "nccl.h: $(ls "$site"/nvidia/*/include/nccl.h "$CUDA_HOME"/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h 2>/dev/null | tr '\n' ' ')"
  echo "libnccl: $(ls "$site"/nvidia/*/lib/libnccl.so* "$CUDA_HOME"/lib64/libnccl.so* 2>/dev/null | tr '\n' ' ')"
  local tool path
  for tool in cuobjdump compute-sanitizer; do
    path=$(on_path_or "$tool" "$CUDA_HOME/bin/$tool")
    echo "$tool: $([[ -x $path ]] && echo "$path" || echo absent)"
  done
}

stage_env() {
  stage_begin env
  NVCC=${NVCC:-$(on_path_or nvcc /usr/local/cuda/bin/nvcc)}
  [[ -x $NVCC ]] || missing "nvcc (not on PATH, not at /usr/local/cuda/bin/nvcc; set NVCC=...)"
  CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
  CXX=${CXX:-g++}
  command -v "$CXX" >/dev/null || missing "a C++ compiler ($CXX; set CXX=...)"
  find_python
  eval "$("$PYTHON" "$ROOT/scripts/torch_env.py")" || missing "could not query torch with $PYTHON"
  [[ -n $TORCH_CUDA_VERSION ]] || missing "a CUDA build of torch (this one is CPU-only)"
  if [[ $TORCH_SEES_GPU != 1 ]]; then
    [[ $MODE == run ]] && missing "a visible NVIDIA GPU (torch.cuda.is_available() is False; nvidia-smi: $(nvidia-smi -L 2>&1 | head -1))"
    GPU_ARCH=90 GPU_NAME="none ($MODE)"
  fi
  GENCODE=(-gencode "arch=compute_${GPU_ARCH},code=sm_${GPU_ARCH}")
  record_environment >"$OUT_DIR/env.txt" 2>&1
  cat "$OUT_DIR/env.txt"
  verdict PASS "$GPU_NAME (sm_$GPU_ARCH), torch $TORCH_VERSION, $(grep -o 'nccl.h: [^ ]*' "$OUT_DIR/env.txt")"
}

# The background builds: the harness (CMake, only the targets the stages run), gpu_check's
# LibTorch objects, the Python operator; and the synthetic shards. Each logs into $OUT_DIR.
TORCH_SOURCES=(attention/cuda/binding.cpp tests/cuda/gpu_check.cpp attention/method_tensors.cpp attention/method.cpp
               attention/transforms.cpp attention/parameters.cpp attention/reference.cpp attention/learned_bias.cpp)
start_background_builds() {
  local src cxx_flags=(-std=c++17 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI="$TORCH_ABI" -I"$ROOT"
    -isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include" -isystem "$CUDA_HOME/include")
  TORCH_PIDS=()
  for src in "${TORCH_SOURCES[@]}"; do
    "$CXX" "${cxx_flags[@]}" -c "$src" -o "$BUILD/$(basename "${src%.cpp}").o" &
    TORCH_PIDS+=($!)
  done
  [[ $MODE == build ]] && return
  # bash's `times` after the build, last line: the CPU time (user, system) of all its processes.
  background HARNESS_BUILD_PID "$OUT_DIR/harness-build.log" bash -c \
    'nice -n 5 scripts/gpu-build.sh --no-tests --build-dir "$1" --targets "$2" --arch "$3"; s=$?; times; exit $s' \
    _ "$GPU_BUILD" "$HARNESS_TARGETS" "$GPU_ARCH"
  # The operator against this torch: pip (no network, no isolation), else setup.py build_ext with
  # the package's Python files copied beside the extension.
  background OPERATOR_PID "$OUT_DIR/operator-build.log" env SCALE_INVARIANT_ATTENTION_CUDA=1 \
    TORCH_CUDA_ARCH_LIST="${GPU_ARCH:0:-1}.${GPU_ARCH: -1}" MAX_JOBS=4 SCALE_INVARIANT_ATTENTION_BUILD_BASE="$BUILD/python" \
    nice -n 10 bash -c '"$1" -m pip install --no-build-isolation --no-deps --no-index --target "$2" . && exit
      echo "gpu-check: pip install failed; setup.py build_ext instead"
      "$1" setup.py build_ext --build-lib "$2" && cp python/scale_invariant_attention/*.py "$2/scale_invariant_attention/"' \
    _ "$PYTHON" "$BUILD/python-target"
  background SHARDS_PID "$OUT_DIR/shards.log" "$PYTHON" "$HELPERS" shards "$BUILD/shards"
}

stage_kernels_build() {
  stage_begin kernels-build
  local kernel sources=(attention/cuda/fused_attention.cu attention/cuda/fused_attention_tc.cu tests/cuda/fused_attention_test.cu
                        "${TORCH_SOURCES[@]}" scripts/gpu-build.sh setup.py "$HELPERS" "$PAPER")
  for kernel in "${sources[@]}"; do [[ -f $kernel ]] || { verdict FAIL "no $kernel"; return; }; done
  if ((DRY)); then verdict PASS "sources present (the build itself: ctest gpu_check_build)"; return; fi
  start_background_builds
  : >"$OUT_DIR/ptxas.txt"
  local flags=(-std=c++17 -O3 -lineinfo "${GENCODE[@]}" -I"$ROOT")
  for kernel in fused_attention fused_attention_tc; do
    bounded "$NVCC" "${flags[@]}" -Xptxas -v -Xcompiler -fPIC -c "attention/cuda/$kernel.cu" -o "$BUILD/$kernel.o" \
      >>"$OUT_DIR/ptxas.txt" || { tail -20 "$OUT_DIR/ptxas.txt"; verdict FAIL "nvcc attention/cuda/$kernel.cu"; return; }
  done
  bounded "$NVCC" "${flags[@]}" tests/cuda/fused_attention_test.cu attention/method.cpp attention/transforms.cpp \
    attention/parameters.cpp "$BUILD/fused_attention.o" "$BUILD/fused_attention_tc.o" -o "$BUILD/attention_cuda_test" \
    || { verdict FAIL "nvcc attention_cuda_test"; return; }
  verdict PASS "$(grep -c 'bytes spill stores' "$OUT_DIR/ptxas.txt") kernels; with a stack frame: $(grep -c '[1-9][0-9]* bytes stack frame' "$OUT_DIR/ptxas.txt") (ptxas.txt)"
}

stage_kernel_test() {
  stage_begin kernel-test
  if [[ $MODE != run ]]; then verdict SKIP "needs a GPU"; return; fi
  [[ -x $BUILD/attention_cuda_test ]] || { verdict FAIL "not built"; return; }
  local cuobjdump; cuobjdump=$(on_path_or cuobjdump "$CUDA_HOME/bin/cuobjdump")
  [[ -x $cuobjdump ]] && "$cuobjdump" --dump-resource-usage "$BUILD/fused_attention.o" "$BUILD/fused_attention_tc.o" \
    >"$OUT_DIR/resource-usage.txt" 2>&1
  bounded "$BUILD/attention_cuda_test"
  case $? in
    0) verdict PASS "$(tail -1 "$OUT_DIR/kernel-test.log")" ;;
    124) verdict FAIL "timed out after $(grep -c '^ok\|^FAIL' "$OUT_DIR/kernel-test.log") cases" ;;
    *) verdict FAIL "failing ids: $(awk '/^FAIL/{print $2}' "$OUT_DIR/kernel-test.log" | head -6 | tr '\n' ' ')(rerun one: attention_cuda_test --case ID)" ;;
  esac
}

stage_binding_build() {
  stage_begin binding-build
  if ((DRY)); then verdict PASS "sources present"; return; fi
  local n objects=()
  for n in "${!TORCH_SOURCES[@]}"; do
    wait "${TORCH_PIDS[$n]}" || { verdict FAIL "g++ ${TORCH_SOURCES[$n]}"; return; }
    [[ ${TORCH_SOURCES[$n]} == */gpu_check.cpp ]] || objects+=("$BUILD/$(basename "${TORCH_SOURCES[$n]%.cpp}").o")
  done
  # Our kernels carry their own (static) CUDA runtime of the local toolkit; torch keeps its own.
  "$CXX" "$BUILD/gpu_check.o" "${objects[@]}" "$BUILD/fused_attention.o" "$BUILD/fused_attention_tc.o" \
    -o "$BUILD/gpu_check" -L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" \
    -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,--as-needed \
    -L"$CUDA_HOME/lib64" -L"$CUDA_HOME/lib" -lcudart_static -ldl -lrt -lpthread || { verdict FAIL "link gpu_check"; return; }
  verdict PASS "gpu_check linked"
}

stage_binding() {
  stage_begin binding
  if [[ $MODE != run ]]; then verdict SKIP "needs a GPU"; return; fi
  bounded "$BUILD/gpu_check" --timing-csv "$OUT_DIR/ours.csv"
  local s=$?
  [[ $s == 0 ]] && verdict PASS "$(grep -m1 '^gpu_check:' "$OUT_DIR/binding.log")" || verdict FAIL "exit $s: $(grep -m1 '^gpu_check:' "$OUT_DIR/binding.log")"
}

stage_harness_build() {
  stage_begin harness-build
  if ((DRY)); then
    local bytes deb_count
    bytes=$(carry_bytes)
    ((bytes <= CARRY_LIMIT_BYTES)) || { verdict FAIL "the call carries $((bytes >> 20)) MiB, over 64"; return; }
    deb_count=$(ls .gpu-deps/*.deb 2>/dev/null | wc -l)
    # Made once, as root with apt, before the call: a checkout without it is not an error here.
    ((deb_count > 0)) || { verdict SKIP "no .gpu-deps/*.deb: run scripts/gpu-deps.sh before the call (tree alone: $((bytes >> 20)) MiB)"; return; }
    # The build's first step there: unpack and relocate the packages, check their library closure.
    bounded scripts/gpu-build.sh --unpack-only "$BUILD/deps-prefix" >/dev/null || { verdict FAIL "gpu-build.sh --unpack-only"; return; }
    verdict PASS "$deb_count packages unpack; working tree + ${CARRY[*]} = $((bytes >> 20)) MiB of 64"
    return
  fi
  wait_bounded "$HARNESS_BUILD_PID"
  local s=$?
  HARNESS_BUILT=0
  if [[ $s == 0 ]]; then HARNESS_BUILT=1; verdict PASS "CPU time user, system: $(tail -1 "$OUT_DIR/harness-build.log")"
  else tail -25 "$OUT_DIR/harness-build.log"; verdict FAIL "exit $s (harness-build.log)"; fi
}

# What the device tool copies: tracked and untracked-not-ignored files, plus the carry list.
carry_bytes() {
  local tree carry
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  carry=$(du -sb "${CARRY[@]}" 2>/dev/null | awk '{s += $1} END {print s + 0}')
  echo $((tree + carry))
}

# Runs a harness binary, or with --dry-run checks what it would be given against a CPU build: its
# options against that build's --help, its config and --set list with `harness config show` (an
# unknown key or a bad value fails here, not on the GPU).
harness_or_dry() {  # harness_or_dry BINARY [SUBCOMMAND] OPTIONS...
  local binary=$1; shift
  ((DRY)) || { bounded "$binary" "$@"; return; }
  local sub=() config=() help option local_binary
  [[ $1 != -* ]] && sub=("$1") && shift
  local_binary="$(dirname "$DRY_HARNESS")/$(basename "$binary")"
  if [[ -x $local_binary ]]; then
    help=$("$local_binary" "${sub[@]}" --help 2>&1)
    for option in "$@"; do
      [[ $option == --* && $help != *"${option%%=*}"* ]] && { echo "$(basename "$binary") ${sub[*]}: no option $option"; return 2; }
    done
  else
    echo "($local_binary not built here: its options unchecked)"
  fi
  while (($#)); do
    case $1 in
      --config|--set) config+=("$1" "$2"); shift 2 ;;
      --no-progress|--resume) shift ;;
      *) shift 2 ;;
    esac
  done
  bounded "$DRY_HARNESS" config show "${config[@]}" >/dev/null
}
needs_harness() {
  if ((DRY)); then
    DRY_HARNESS=${HARNESS_BIN:-build/harness}
    [[ -x $DRY_HARNESS ]] && return 0
    verdict SKIP "no CPU build at $DRY_HARNESS to check the settings with"; return 1
  fi
  [[ $MODE == run && ${HARNESS_BUILT:-0} == 1 ]] && return 0
  verdict SKIP "the harness was not built"; return 1
}

stage_agreement() {
  stage_begin agreement
  needs_harness || return
  local failed=""
  # fp32: the GPU step (CUDA kernel) against the same step on the CPU (fused CPU kernel, itself
  # tested against the float64 reference); bf16: against the reference kernel on the GPU.
  harness_or_dry "$GPU_BUILD/bench_kernel_agreement" --config "$PAPER" --set model.layers=2 \
    --set train.precision=fp32 --batch 1 --against fused --against-device cpu --threads "$(nproc)" || failed+=" fp32-vs-cpu"
  harness_or_dry "$GPU_BUILD/bench_kernel_agreement" --config "$PAPER" --set model.layers=2 \
    --set train.precision=bf16 --batch 1 || failed+=" bf16"
  [[ -z $failed ]] && verdict PASS "$( ((DRY)) && echo "settings resolve" || grep 'kernel agreement:' "$OUT_DIR/agreement.log" | tr '\n' ' ')" \
    || verdict FAIL "failed:$failed"
}

shards_ready() {
  ((DRY)) && { bounded "$PYTHON" "$HELPERS" shards "$BUILD/shards" --docs 2 >/dev/null; return; }
  [[ -n ${SHARDS_OK:-} ]] && return "$SHARDS_OK"
  wait_bounded "$SHARDS_PID"; SHARDS_OK=$?
  return "$SHARDS_OK"
}
train_args() {  # the paper's config on the synthetic shards, no periodic validation
  echo --config "$PAPER" --set data.corpus="$BUILD/shards" --set data.data_dir="$BUILD/data" \
    --set eval.every=0 --set eval.windows=2 --set train.batch_size=16
}

stage_sync_check() {
  stage_begin sync-check
  needs_harness || return
  shards_ready || { verdict FAIL "no shards: $(tail -2 "$OUT_DIR/shards.log")"; return; }
  local method failed="" args
  read -ra args <<<"$(train_args)"
  for method in si+p-rope alibi; do  # rotary tables; ALiBi slopes (both built on the device)
    rm -rf "$BUILD/runs/sync-$method"
    HARNESS_CUDA_SYNC_CHECK=1 harness_or_dry "$GPU_BUILD/harness" train "${args[@]}" --set model.layers=2 \
      --set attention.method=$method --set train.steps=3 --set schedule.warmup_steps=1 \
      --set eval.contexts=[L] --run-dir "$BUILD/runs/sync-$method" --no-progress || failed+=" $method"
  done
  ((DRY)) || grep -q "HARNESS_CUDA_SYNC_CHECK" "$OUT_DIR/sync-check.log" || failed+=" (the check never said it was on)"
  [[ -z $failed ]] && verdict PASS "$( ((DRY)) && echo "settings resolve: ")3 steps each of si+p-rope, alibi with HARNESS_CUDA_SYNC_CHECK=1" \
    || verdict FAIL "$failed"
}

stage_bench_162m() {
  stage_begin bench-162m
  needs_harness || return
  harness_or_dry "$GPU_BUILD/bench_train_step" --config "$PAPER" --set train.batch_size=16 \
    --set train.micro_batch_size=8 --steps 8 --warmup 3
  local s=$?
  [[ $s == 0 ]] && verdict PASS "$( ((DRY)) && echo "settings resolve" || grep -E '^MFU|^step ' "$OUT_DIR/bench-162m.log" | tr -s ' ' | tr '\n' ';')" \
    || verdict FAIL "exit $s"
}

# Trains until the checkpoint at half the steps is written, kills the process (SIGKILL: no chance
# to tidy up), resumes to the end, then reads the record. With --dry-run the same, on the CPU
# build with a tiny model (the shards, the flags, the checkpoint names and run.h5 checked here).
train_kill_resume() {  # BINARY RUN_DIR OPTIONS...
  local binary=$1 run=$2 pid; shift 2
  rm -rf "$run"
  "$binary" train "$@" --run-dir "$run" --no-progress >>"$OUT_DIR/$STAGE.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [[ ! -e $run/checkpoint-$((STEPS / 2)).pt ]] && (($(stage_left) > 0)); do sleep 0.2; done
  sleep 1  # into the steps after that checkpoint
  kill -9 "$pid" 2>/dev/null && echo "killed (SIGKILL) with $(ls "$run" | grep -c '^checkpoint-') checkpoint(s) written" | tee -a "$OUT_DIR/$STAGE.log"
  wait "$pid"
  bounded "$binary" train "$@" --run-dir "$run" --no-progress --resume || return
  [[ -f $run/run.h5 ]] && cp "$run/run.h5" "$OUT_DIR/run.h5"
  bounded "$PYTHON" "$HELPERS" run-h5 "$run/run.h5" "$STEPS"
}

stage_train_resume() {
  stage_begin train-resume
  needs_harness || return
  shards_ready || { verdict FAIL "no shards"; return; }
  local args binary=$GPU_BUILD/harness
  read -ra args <<<"$(train_args)"
  args+=(--set train.steps="$STEPS" --set schedule.warmup_steps=2 --set run.checkpoint_every=$((STEPS / 2)))
  if ((DRY)); then
    harness_or_dry "$binary" train "${args[@]}" --run-dir "$BUILD/runs/paper-162m" --no-progress --resume \
      || { verdict FAIL "settings"; return; }
    binary=$DRY_HARNESS
    args+=(--set run.device=cpu --set attention.kernel=fused --set train.precision=fp32 --set model.layers=1
           --set model.d_model=64 --set model.heads=2 --set model.head_dim=32 --set train.context=256
           --set train.batch_size=2 --set train.micro_batch_size=2)
  fi
  train_kill_resume "$binary" "$BUILD/runs/paper-162m" "${args[@]}"
  local s=$?
  [[ $s == 0 ]] && verdict PASS "$( ((DRY)) && echo "(CPU, tiny model) ")$(grep 'run.h5:' "$OUT_DIR/train-resume.log" | tail -1)" \
    || verdict FAIL "exit $s (train-resume.log)"
}

stage_operator() {
  stage_begin operator
  if ((DRY)); then
    bounded "$PYTHON" "$HELPERS" operator-test --dry-run && verdict PASS "test module imports" || verdict FAIL "operator-test --dry-run"
    return
  fi
  [[ $MODE == run ]] || return
  if ! wait_bounded "$OPERATOR_PID"; then
    tail -15 "$OUT_DIR/operator-build.log"; verdict FAIL "build (operator-build.log)"; return
  fi
  PYTHONPATH="$BUILD/python-target${PYTHONPATH:+:$PYTHONPATH}" bounded "$PYTHON" "$HELPERS" operator-test
  local s=$?
  [[ $s == 0 ]] && verdict PASS "$(tail -1 "$OUT_DIR/operator.log")" || verdict FAIL "exit $s"
}

stage_flex() {
  STAGE=flex STAGE_START=$SECONDS STAGE_BUDGET=$((TOTAL_BUDGET_S - 10 - SECONDS))
  if ((SKIP_FLEX)); then verdict SKIP "--skip-flex"; return; fi
  if ((STAGE_BUDGET < 90)); then verdict SKIP "only ${STAGE_BUDGET} s left"; return; fi
  printf '\n== [%3d s] flex (what is left: %d s)\n' "$SECONDS" "$STAGE_BUDGET"
  # No new configuration after its budget: a compile (1-2 min) must still fit.
  bounded "$PYTHON" bench/flex_bench.py --csv "$OUT_DIR/flex.csv" --budget-s $((STAGE_BUDGET - 75))
  local s=$?
  "$PYTHON" "$HELPERS" results "$OUT_DIR/ours.csv" "$OUT_DIR/flex.csv" | tee -a "$OUT_DIR/flex.log"
  [[ $s == 0 ]] && verdict PASS "flex.csv" || verdict SKIP "flex_bench exit $s (n/a where it has no number)"
}

# --dry-run: the stages' budgets within the call's, and the Python files parse.
dry_run_totals() {
  STAGE=budgets STAGE_START=$SECONDS STAGE_BUDGET=0
  local s total=0
  for s in "${STAGES[@]}"; do total=$((total + ${s#* })); done
  ((total <= TOTAL_BUDGET_S)) && verdict PASS "stage budgets sum to $total s of $TOTAL_BUDGET_S" \
    || verdict FAIL "stage budgets sum to $total s, over $TOTAL_BUDGET_S"
  "$PYTHON" -m py_compile "$HELPERS" bench/flex_bench.py || verdict FAIL "a Python file does not compile"
  # The options the flex and binding stages pass, against the programs' own.
  "$PYTHON" bench/flex_bench.py --help | grep -q -- '--budget-s' || verdict FAIL "bench/flex_bench.py has no --budget-s"
  grep -q '"--timing-csv"' tests/cuda/gpu_check.cpp || verdict FAIL "tests/cuda/gpu_check.cpp has no --timing-csv"
}

summary() {
  printf '\n== verdicts (%s; logs, timings.csv and the rest in %s)\n' "$MODE" "$OUT_DIR"
  printf '%s\n' "${VERDICTS[@]}"
  echo "gpu-check$([[ $MODE == dry ]] && echo " --dry-run"): $([[ $status == 0 ]] && echo PASSED || echo FAILED) after ${SECONDS} s"
  exit $status
}

# ---- main ----------------------------------------------------------------------------------------
echo "stage,verdict,seconds,budget,detail" >"$OUT_DIR/timings.csv"
for stage in "${STAGES[@]}"; do
  "stage_$(echo "${stage% *}" | tr - _)"
  [[ $MODE == build && ${stage% *} == binding-build ]] && break
done
if [[ $MODE == build ]]; then
  echo "gpu-check --build-only: $([[ $status == 0 ]] && echo PASSED || echo FAILED) (kernels for sm_$GPU_ARCH, attention_cuda_test, gpu_check in $BUILD/)"
  exit $status
fi
[[ $MODE == run ]] && stage_flex
[[ $MODE == dry ]] && dry_run_totals
summary
