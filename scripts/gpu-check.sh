#!/usr/bin/env bash
# GPU check of the harness, for a machine with an NVIDIA GPU, nvcc and a pip-installed torch 2.x
# (no apt, no internet needed). One prepared script, bounded to finish within 10 minutes. Run
# from the repository root, with the Debian dependencies gathered beforehand by
# scripts/gpu-deps.sh (the folder .gpu-deps/ travels with the tree):
#
#     scripts/gpu-check.sh
#
#  1. builds the kernels (fused_attention.cu, and fused_attention_tc.cu: bf16 on tensor cores, sm_80+)
#     and the torch-free test (tests/cuda/fused_attention_test.cu) with nvcc and runs the test
#     (float64 CPU reference, fp32 + bf16, D 64/128, T 1/37/200, and 4096 for bf16);
#  2. builds the LibTorch binding and tests/cuda/gpu_check.cpp against that torch's LibTorch
#     (directly with nvcc + g++) and checks forward and backward of every registry transform
#     against attention/reference.cpp; meanwhile the whole harness builds with CMake against the
#     same LibTorch (scripts/gpu-build.sh, into build-gpu/);
#  3. one training step of a 2-layer model of the paper's width (768, 6 heads × 128) at T = 4096
#     with the CUDA kernel against the reference kernel: loss and every gradient
#     (bench_kernel_agreement, fp32, then bf16);
#  4. the 162M model of sweeps/gpu/paper-162m.yaml in bf16: bench_train_step (tokens/s, MFU over
#     the bf16 matmul rate measured in the same run, peak memory, attention's share of a step),
#     then `harness train` on synthetic GPT-2 token shards: stop after some steps, resume, finish,
#     validate at 4096, 16384 and 65536 tokens;
#  5. if time is left, FlexAttention (bench/flex_bench.py, torch.compile'd) against our
#     kernel at T ∈ {1024, 4096, 16384}, B=1, H=6, D=128, scale-invariant logits.
#
#     scripts/gpu-check.sh --build-only
#
# builds steps 1 and 2 (the kernels, attention_cuda_test and gpu_check, for sm_90 or the GPU seen)
# and runs nothing: what `make test` checks on a machine without a GPU (ctest gpu_check_build),
# so that the device's one prepared run does not fail at a compile or a link.
#
# Build products go to build-gpu-check/ (GPU_CHECK_BUILD) and build-gpu/ (GPU_BUILD).
# Environment overrides: NVCC, PYTHON, CXX, GPU_CHECK_BUILD, GPU_BUILD, GPU_CHECK_DEADLINE_S
# (default 570), GPU_CHECK_TRAIN_STEPS (default 20).
# Exit code: 0 when the checks pass, 1 when a check fails, 2 when something needed is missing
# (77 with --build-only, which CTest reads as skipped).
set -uo pipefail
BUILD_ONLY=0
[[ ${1:-} == --build-only ]] && BUILD_ONLY=1

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$(pwd)
BUILD=${GPU_CHECK_BUILD:-build-gpu-check}
mkdir -p "$BUILD"
DEADLINE_S=${GPU_CHECK_DEADLINE_S:-570}  # stay inside 10 minutes (override: GPU_CHECK_DEADLINE_S)
status=0

say() { printf '\n== %s\n' "$*"; }
missing() { printf 'gpu-check: MISSING: %s\n' "$*" >&2; exit $((BUILD_ONLY ? 77 : 2)); }
remaining() { echo $((DEADLINE_S - SECONDS)); }
# A step's time limit: its own, cut to what the deadline leaves (20 s kept for the summary).
limit() { local left=$(( $(remaining) - 20 )); echo $(( left < $1 ? left : $1 )); }
# Runs "$@" under limit N, or skips it (as a failure) when under 10 s are left.
bounded() {
  local n; n=$(limit "$1"); shift
  if (( n < 10 )); then echo "gpu-check: SKIPPED for lack of time: $*"; return 124; fi
  timeout "$n" "$@"
}

# ---------------------------------------------------------------------------------------------
say "tools"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $NVCC ]] || missing "nvcc (not on PATH, not at /usr/local/cuda/bin/nvcc; set NVCC=...)"
CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null || missing "a C++ compiler ($CXX; set CXX=...)"
echo "nvcc: $NVCC ($("$NVCC" --version | tail -1))"

# The python with torch: $PYTHON, else python3 on PATH, else the system ones; one whose torch sees
# a GPU wins over one that merely imports torch (kept for the error message below).
PYTHON_FOUND=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; do
  command -v "$candidate" >/dev/null || continue
  if "$candidate" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    PYTHON_FOUND=$(command -v "$candidate")
    break
  fi
  if [[ -z $PYTHON_FOUND ]] && "$candidate" -c 'import torch' 2>/dev/null; then
    PYTHON_FOUND=$(command -v "$candidate")
  fi
done
[[ -n $PYTHON_FOUND ]] || missing "a python3 with torch (tried: ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; set PYTHON=...)"
PYTHON=$PYTHON_FOUND

eval "$("$PYTHON" "$ROOT/scripts/torch_env.py")" || missing "could not query torch with $PYTHON"
echo "python: $PYTHON, torch $TORCH_VERSION (CUDA ${TORCH_CUDA_VERSION:-none}, C++11 ABI $TORCH_ABI) at $TORCH_DIR"
[[ -n $TORCH_CUDA_VERSION ]] || missing "a CUDA build of torch (this one is CPU-only)"
if [[ $TORCH_SEES_GPU != 1 && $BUILD_ONLY == 1 ]]; then GPU_ARCH=90 GPU_NAME="none (--build-only)"
else
  [[ $TORCH_SEES_GPU == 1 ]] || missing "a visible NVIDIA GPU (torch.cuda.is_available() is False; nvidia-smi: $(nvidia-smi -L 2>&1 | head -1))"
fi
echo "GPU: $GPU_NAME (sm_$GPU_ARCH)"
GENCODE=(-gencode "arch=compute_${GPU_ARCH},code=sm_${GPU_ARCH}")

# ---------------------------------------------------------------------------------------------
# The LibTorch objects of step 2 are the slowest part of the build: compile them all at once, in
# the background, while step 1 builds and runs (they are waited for in step 2).
CXX_FLAGS=(-std=c++17 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI="$TORCH_ABI" -I"$ROOT"
           -isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include"
           -isystem "$CUDA_HOME/include")
# binding + gpu_check, and the float64 reference gpu_check compares against with the method
# layer it reads.
torch_sources=(attention/cuda/binding.cpp tests/cuda/gpu_check.cpp attention/method_tensors.cpp
               attention/method.cpp attention/transforms.cpp attention/parameters.cpp attention/reference.cpp
               attention/learned_bias.cpp)
torch_pids=()
for src in "${torch_sources[@]}"; do
  "$CXX" "${CXX_FLAGS[@]}" -c "$src" -o "$BUILD/$(basename "${src%.cpp}").o" &
  torch_pids+=($!)
done

# The whole harness (CMake + ninja against the same LibTorch), in the background too (not with
# --build-only: the CMake build is what builds the harness there).
GPU_BUILD=${GPU_BUILD:-build-gpu}
if [[ $BUILD_ONLY == 0 ]]; then
  say "2/5 (background) whole harness: scripts/gpu-build.sh --no-tests → $GPU_BUILD/ (log: $BUILD/harness-build.log)"
  GPU_BUILD_DIR="$GPU_BUILD" timeout "$(limit 330)" scripts/gpu-build.sh --no-tests --build-dir "$GPU_BUILD" \
    >"$BUILD/harness-build.log" 2>&1 &
  harness_build_pid=$!
fi

say "1/5 build kernels + torch-free test (nvcc)"
NVCC_FLAGS=(-std=c++17 -O3 -lineinfo "${GENCODE[@]}" -I"$ROOT")
for kernel in fused_attention fused_attention_tc; do
  "$NVCC" "${NVCC_FLAGS[@]}" -Xcompiler -fPIC -c "attention/cuda/$kernel.cu" -o "$BUILD/$kernel.o" \
    || { echo "gpu-check: FAILED to compile attention/cuda/$kernel.cu"; exit 1; }
done
# The test resolves its cases from the method registry (plain C++: method, transforms, parameters).
"$NVCC" "${NVCC_FLAGS[@]}" tests/cuda/fused_attention_test.cu attention/method.cpp attention/transforms.cpp \
  attention/parameters.cpp "$BUILD/fused_attention.o" "$BUILD/fused_attention_tc.o" -o "$BUILD/attention_cuda_test" \
  || { echo "gpu-check: FAILED to build attention_cuda_test"; exit 1; }

if [[ $BUILD_ONLY == 0 ]]; then
  say "1/5 run attention_cuda_test"
  bounded 240 "$BUILD/attention_cuda_test"
  test_status=$?
  case $test_status in
    0) echo "attention_cuda_test: PASSED" ;;
    77) echo "attention_cuda_test: SKIPPED (it sees no CUDA device)"; status=1 ;;
    124) echo "attention_cuda_test: TIMED OUT"; status=1 ;;
    *) echo "attention_cuda_test: FAILED (exit $test_status)"; status=1 ;;
  esac
fi

# ---------------------------------------------------------------------------------------------
say "2/5 build binding + gpu_check against torch's LibTorch"
for n in "${!torch_sources[@]}"; do
  wait "${torch_pids[$n]}" || { echo "gpu-check: FAILED to compile ${torch_sources[$n]}"; exit 1; }
done
reference_objects=("$BUILD/method.o" "$BUILD/method_tensors.o" "$BUILD/transforms.o" "$BUILD/parameters.o" "$BUILD/reference.o"
                   "$BUILD/learned_bias.o")
# Our kernels carry their own (static) CUDA runtime of the local toolkit; torch keeps its own.
"$CXX" "$BUILD/gpu_check.o" "${reference_objects[@]}" "$BUILD/binding.o" "$BUILD/fused_attention.o" \
  "$BUILD/fused_attention_tc.o" -o "$BUILD/gpu_check" \
  -L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" \
  -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,--as-needed \
  -L"$CUDA_HOME/lib64" -L"$CUDA_HOME/lib" -lcudart_static -ldl -lrt -lpthread \
  || { echo "gpu-check: FAILED to link gpu_check"; exit 1; }
if [[ $BUILD_ONLY == 1 ]]; then
  echo "gpu-check --build-only: PASSED (kernels for sm_$GPU_ARCH, attention_cuda_test and gpu_check built in $BUILD/)"
  exit 0
fi

say "2/5 run gpu_check (fwd/bwd vs the float64 reference, then our timings)"
rm -f "$BUILD/ours.csv" "$BUILD/flex.csv"
bounded 240 "$BUILD/gpu_check" --timing-csv "$BUILD/ours.csv"
check_status=$?
[[ $check_status == 0 ]] || { echo "gpu_check: FAILED (exit $check_status)"; status=1; }

# ---------------------------------------------------------------------------------------------
say "2/5 wait for the whole harness build"
if wait "$harness_build_pid"; then
  echo "harness build: done ($(tail -1 "$BUILD/harness-build.log"))"
  # The binaries find the carried libraries through their RPATH: no LD_LIBRARY_PATH here, which
  # would put Debian's libraries before the system's for python below.
  harness_built=1
else
  echo "harness build: FAILED; the last lines of $BUILD/harness-build.log:"
  tail -30 "$BUILD/harness-build.log"
  harness_built=0
  status=1
fi

if [[ $harness_built == 1 ]]; then
  PAPER=sweeps/gpu/paper-162m.yaml
  say "3/5 one step, CUDA kernel against the reference kernel: 2 layers of the paper's width, T = 4096"
  for precision in fp32 bf16; do
    bounded 120 "$GPU_BUILD/bench_kernel_agreement" --config "$PAPER" --set model.layers=2 \
      --set train.precision=$precision --batch 1 \
      || { echo "kernel agreement ($precision): FAILED"; status=1; }
  done

  say "4/5 the 162M model in bf16: step time, MFU, peak memory (bench_train_step)"
  bounded 120 "$GPU_BUILD/bench_train_step" --config "$PAPER" --set train.batch_size=16 \
    --set train.micro_batch_size=8 --steps 8 --warmup 3 \
    || { echo "bench_train_step: FAILED"; status=1; }

  say "4/5 harness train: 162M, bf16, synthetic GPT-2 token shards; stop, resume, validate at 4k/16k/64k"
  SHARDS="$BUILD/shards"
  # Zipf-distributed ids below 50256 in documents of 70,000 tokens (each a 16L validation window
  # fits), each opened by <|endoftext|> as the FineWeb shards are. Speed does not depend on the
  # values; the loss falls only to this distribution's entropy.
  "$PYTHON" - "$SHARDS" <<'PYEOF' || { echo "shards: FAILED"; status=1; }
import os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for name, docs in (("synthetic_train_000001.bin", 64), ("synthetic_val_000000.bin", 4)):
    tokens = np.minimum(rng.zipf(1.3, size=docs * 70000), 50255).astype(np.uint16)
    tokens[::70000] = 50256
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, tokens.size)
    with open(os.path.join(out, name), "wb") as f:
        f.write(header.tobytes()); f.write(tokens.tobytes())
print(f"shards: {out} (64 + 4 documents of 70,000 tokens)")
PYEOF
  STEPS=${GPU_CHECK_TRAIN_STEPS:-20}
  RUNS="$BUILD/runs"
  rm -rf "$RUNS"
  train=("$GPU_BUILD/harness" train --config "$PAPER" --run-dir "$RUNS/paper-162m"
         --set data.corpus="$SHARDS" --set data.data_dir="$BUILD/data" --set train.steps="$STEPS"
         --set train.batch_size=16 --set schedule.warmup_steps=2 --set eval.every=0
         --set eval.windows=2 --set run.checkpoint_every=$((STEPS / 2)))
  bounded 120 "${train[@]}" --stop-after-steps $((STEPS / 2)) || { echo "train (first half): FAILED"; status=1; }
  bounded 180 "${train[@]}" --resume || { echo "train (resumed): FAILED"; status=1; }
  "$PYTHON" - "$RUNS/paper-162m/run.h5" <<'PYEOF' || { echo "run.h5: FAILED"; status=1; }
import sys, h5py
f = h5py.File(sys.argv[1], "r")
state = f["status"].attrs["state"]
state = state.decode() if isinstance(state, bytes) else state
steps, tokens, seconds = f["train/step"][:], f["train/tokens"][:], f["train/seconds"][:]
print(f"run.h5: state {state}, steps {steps[0]}..{steps[-1]} ({len(steps)} rows), "
      f"{tokens[-1] / seconds[-1]:.0f} tokens/s over the run, peak memory "
      f"{f['config'].attrs.get('peak_device_bytes', 0) / 2**30:.1f} GiB")
for T in sorted(f["eval"], key=int):
    print(f"  validation at {T}: loss {f[f'eval/{T}/loss'][-1]:.4f}")
sys.exit(0 if state == "done" and list(steps) == list(range(1, len(steps) + 1)) and len(f["eval"]) == 3 else 1)
PYEOF
fi

# ---------------------------------------------------------------------------------------------
say "5/5 FlexAttention baseline (torch.compile; compiles take a while)"
flex_time=$(( $(remaining) - 20 ))
if (( flex_time < 60 )); then
  echo "flex_bench: skipped, only $(remaining) s left of the 10-minute budget"
else
  # No new configuration after the budget: a compile (1–2 min) must still fit in flex_time.
  flex_budget=$(( flex_time > 180 ? flex_time - 120 : flex_time / 3 ))
  timeout "$flex_time" "$PYTHON" bench/flex_bench.py --csv "$BUILD/flex.csv" --budget-s "$flex_budget"
  flex_status=$?
  [[ $flex_status == 0 ]] || echo "flex_bench: exit $flex_status (the table shows n/a where it has no number)"
fi

say "results"
"$PYTHON" - "$BUILD/ours.csv" "$BUILD/flex.csv" <<'EOF'
import csv, math, os, sys

def load(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {(row["T"], row["dtype"]): row for row in csv.DictReader(f)}

ours, flex = load(sys.argv[1]), load(sys.argv[2])

def cell(table, key, column):
    try:
        value = float(table[key][column])
    except (KeyError, ValueError):
        return "n/a"
    return "n/a" if math.isnan(value) else f"{value:.3f}"

print("causal attention, B=1, H=6, D=128, scale-invariant logits (tau=10); times in ms")
header = ("T", "dtype", "ours fwd", "flex fwd", "ours fwd+bwd", "flex fwd+bwd")
print("%-7s %-6s %10s %10s %14s %14s" % header)
for seq_len in ("1024", "4096", "16384"):
    for dtype in ("fp32", "bf16"):
        key = (seq_len, dtype)
        print("%-7s %-6s %10s %10s %14s %14s" % (seq_len, dtype, cell(ours, key, "fwd_ms"), cell(flex, key, "fwd_ms"),
                                                 cell(ours, key, "fwd_bwd_ms"), cell(flex, key, "fwd_bwd_ms")))
EOF

say "gpu-check: $([[ $status == 0 ]] && echo PASSED || echo FAILED) after ${SECONDS} s"
exit $status
