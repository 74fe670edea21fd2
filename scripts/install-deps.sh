#!/usr/bin/env bash
# Installs what the harness needs on Debian 12, the project's Python environment (.venv/: the
# pinned pip torch whose LibTorch the build links, scripts/install-python.sh) and the default
# corpus. Idempotent and non-interactive; run as root, or as a user with passwordless sudo.
#   scripts/install-deps.sh [--no-corpus] [--bench] [--data-dir DIR]
#     --no-corpus  skip the default corpus (the test suite is offline and needs none)
#     --bench      accepted for older callers (the benchmarks' Python peer is the same .venv)
set -euo pipefail
cd "$(dirname "$0")/.."

corpus=1 bench=0 data_dir="${HARNESS_DATA_DIR:-data}"
while [ $# -gt 0 ]; do
  case "$1" in
    --no-corpus) corpus=0 ;;
    --bench) bench=1 ;;
    --data-dir) data_dir="$2"; shift ;;
    *) echo "install-deps: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  python3 python3-venv                        # .venv/: LibTorch (pip torch), torchrun, h5py, numpy
  libgloo-dev                                 # the headers of c10d's Gloo backend (data parallel)
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-program-options-dev
  libhdf5-dev hdf5-tools                      # results files and h5dump
  zlib1g-dev                                  # CRC-32 of checkpoints
  libsentencepiece-dev                        # BPE tokenizer
  gnuplot-nox                                 # figures (harness export curves)
  tidy chromium                               # harness report: the HTML validator, the browser test
  libgtest-dev libbenchmark-dev
  slurm-wlm munge                             # the Slurm integration test runs a one-node cluster
  iproute2                                    # ip netns: the two-hosts data-parallel test
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
  else echo "install-deps: need root (or passwordless sudo) to run: $*" >&2; exit 1
  fi
}

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all packages present"
fi

scripts/install-python.sh

if [ "$corpus" = 1 ]; then
  scripts/fetch-corpus.sh "$data_dir"
fi
