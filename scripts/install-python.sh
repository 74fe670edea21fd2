#!/usr/bin/env bash
# The project's Python environment, .venv/: a pinned pip torch (its LibTorch is the one the build
# links; its torchrun launches the data-parallel tests), h5py and numpy. Idempotent: a stamp in
# .venv/ records what was installed, and a second run with the same pins does nothing.
#
#   scripts/install-python.sh [--venv DIR]      (default .venv; PYTHON: the interpreter to use)
#
# torch 2.11.0: the first release whose default Linux wheels on PyPI are CUDA 13.0 builds, the CUDA
# major of the machines' toolkit (/usr/local/cuda, 13.0) and the torch of the lent GPU machine, so
# one build serves both. The wheel needs CUDA's libraries at load time, even on the CPU. Where the
# toolkit has them (cuDNN 9.19 and NCCL 2.28.9 match this torch's pins exactly), torch goes in
# without its nvidia-* wheels (gigabytes: cuDNN, cuBLAS, NCCL, ...), and only the three libraries
# the toolkit lacks come from PyPI (cuSPARSELt, NVSHMEM, cuFile: ~230 MB); elsewhere torch's full
# dependencies are installed.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly TORCH=torch==2.11.0
# The libraries libtorch_cuda.so needs that CUDA 13.0's toolkit does not ship, and their wheels
# (the versions torch 2.11.0 requires).
readonly -A EXTRA_WHEELS=(
  [libcusparseLt.so.0]=nvidia-cusparselt-cu13==0.8.0
  [libnvshmem_host.so.3]=nvidia-nvshmem-cu13==3.4.5
  [libcufile.so.0]=nvidia-cufile==1.15.1.6
)

venv=.venv
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv=${2:?--venv DIR}; shift ;;
    *) echo "install-python: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

stamp_file="$venv/.harness-python"
stamp="$TORCH $(sha256sum scripts/python-requirements.txt "$0" | sha256sum | cut -c1-16)"
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] && [ -x "$venv/bin/python" ]; then
  echo "install-python: $venv up to date ($TORCH)"
  exit 0
fi

python=${PYTHON:-$(command -v python3 || true)}
[ -n "$python" ] || { echo "install-python: no python3 (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  echo "install-python: creating $venv with $python ($("$python" --version 2>&1))"
  "$python" -m venv "$venv" || { echo "install-python: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)

echo "install-python: $TORCH and scripts/python-requirements.txt into $venv"
"${pip[@]}" install --no-deps "$TORCH"
"${pip[@]}" install --no-deps -r scripts/python-requirements.txt  # every dependency is pinned there

# What libtorch_cuda.so still cannot load decides which CUDA wheels are needed.
torch_lib=$("$venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null) ||
  torch_lib=$(ls -d "$venv"/lib/python3*/site-packages/torch/lib | head -1)
unresolved() { ldd "$torch_lib/libtorch_cuda.so" | awk '/not found/ {print $1}' | sort -u; }
wheels=() full=0
for lib in $(unresolved); do
  if [ -n "${EXTRA_WHEELS[$lib]:-}" ]; then wheels+=("${EXTRA_WHEELS[$lib]}"); else full=1; fi
done
if [ $full = 1 ]; then
  echo "install-python: no CUDA 13 toolkit libraries found ($(unresolved | tr '\n' ' ')): installing torch's own nvidia-* wheels (gigabytes)"
  "${pip[@]}" install "$TORCH"
elif [ ${#wheels[@]} -gt 0 ]; then
  echo "install-python: CUDA libraries from the toolkit; from PyPI: ${wheels[*]}"
  "${pip[@]}" install --no-deps "${wheels[@]}"
fi
left=$(unresolved | tr '\n' ' ')
[ -z "$left" ] || { echo "install-python: libtorch_cuda.so still cannot load: $left" >&2; exit 1; }
"$venv/bin/python" -c 'import torch, h5py, numpy' || { echo "install-python: the new $venv cannot import torch, h5py and numpy" >&2; exit 1; }
echo "$stamp" >"$stamp_file"
echo "install-python: $venv ready: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
