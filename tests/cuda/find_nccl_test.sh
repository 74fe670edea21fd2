#!/usr/bin/env bash
# Where the harness's build finds nccl.h when the CUDA toolkit is left out of the search
# (cmake/find-nccl.cmake): a pip torch's layout, site-packages/{torch,nvidia/nccl/include}, made in
# a scratch folder from this machine's torch (a link) and a copy of the toolkit's nccl.h, as the
# lent GPU machine has it (pip nvidia-nccl-cu13, possibly no nccl.h in its toolkit).
#   1. configured with HARNESS_NCCL_SEARCH_TOOLKIT=OFF, the cache names the pip folder, and the
#      probe object's dependencies (ninja -t deps) name that folder's nccl.h, not the toolkit's
#      /usr/local/cuda/include/nccl.h that is on the same include line;
#   2. without the pip copy, the same configure fails and says nccl.h was not found (so step 1's
#      answer did not come from the toolkit).
# Usage: find_nccl_test.sh SCRATCH_DIR PYTHON. Exit 0 passed, 1 failed, 77 skipped (no CUDA torch
# with c10d NCCL, or no nvcc, or no nccl.h to copy).
set -uo pipefail
SCRATCH=${1:?scratch folder}
PYTHON=${2:?python with torch}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
fail() { echo "find_nccl_test: FAILED: $*"; exit 1; }
skip() { echo "find_nccl_test: SKIPPED: $*"; exit 77; }

[[ -x $NVCC ]] || skip "no nvcc at $NVCC"
torch_dir=$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) || skip "no torch in $PYTHON"
grep -q USE_C10D_NCCL "$torch_dir/share/cmake/Caffe2/Caffe2Targets.cmake" 2>/dev/null || skip "torch at $torch_dir has no c10d NCCL"
header=$(ls /usr/local/cuda/include/nccl.h "$(dirname "$torch_dir")"/nvidia/nccl/include/nccl.h 2>/dev/null | head -1)
[[ -n $header ]] || skip "no nccl.h on this machine to copy into the pip layout"

rm -rf "$SCRATCH"
site="$SCRATCH/site-packages"
mkdir -p "$site/nvidia/nccl/include"
ln -s "$torch_dir" "$site/torch"
cp "$header" "$site/nvidia/nccl/include/nccl.h"
configure() {  # build folder, then extra arguments
  local build=$1; shift
  cmake -S "$HERE/find_nccl" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTorch_DIR="$site/torch/share/cmake/Torch" -DHARNESS_NCCL_SEARCH_TOOLKIT=OFF "$@"
}

echo "== 1. pip layout, toolkit left out of the search"
configure "$SCRATCH/build" >"$SCRATCH/configure.log" 2>&1 || { tail -30 "$SCRATCH/configure.log"; fail "configure"; }
found=$(sed -n 's/^HARNESS_NCCL_INCLUDE_DIR:PATH=//p' "$SCRATCH/build/CMakeCache.txt")
[[ $found == "$site/nvidia/nccl/include" ]] || fail "HARNESS_NCCL_INCLUDE_DIR is '$found', not $site/nvidia/nccl/include"
echo "cache: HARNESS_NCCL_INCLUDE_DIR=$found"
ninja -C "$SCRATCH/build" nccl_probe >"$SCRATCH/build.log" 2>&1 || { tail -30 "$SCRATCH/build.log"; fail "the probe did not compile"; }
included=$(ninja -C "$SCRATCH/build" -t deps | grep -E '/nccl\.h$' | sed 's/^ *//')
echo "probe includes: $included"
[[ $included == "$site/nvidia/nccl/include/nccl.h" ]] || fail "the probe compiled against '$included'"
grep -q -- "-isystem /usr/local/cuda/include\|-isystem /usr/local/cuda-[0-9.]*/include" "$SCRATCH/build/build.ninja" \
  && echo "(the toolkit's include folder is on the same command line, after it)"

echo "== 2. no pip copy: the configure fails, naming nccl.h"
rm "$site/nvidia/nccl/include/nccl.h"
if configure "$SCRATCH/build-none" >"$SCRATCH/configure-none.log" 2>&1; then
  fail "configured without any nccl.h in the search (HARNESS_NCCL_SEARCH_TOOLKIT=OFF): found $(sed -n 's/^HARNESS_NCCL_INCLUDE_DIR:PATH=//p' "$SCRATCH/build-none/CMakeCache.txt")"
fi
grep -q "nccl.h not found" "$SCRATCH/configure-none.log" || { tail -20 "$SCRATCH/configure-none.log"; fail "the configure failed for another reason"; }
echo "configure failed as it should: $(grep -m1 -o 'nccl.h not found[^.]*' "$SCRATCH/configure-none.log")"
echo "find_nccl_test: PASSED"
