#!/usr/bin/env bash
# Builds the whole harness on a GPU machine that has CUDA, CMake and a pip torch but none of the
# harness's other dependencies and no network: those come as Debian 12 .deb files in .gpu-deps/
# (made by scripts/gpu-deps.sh on the Debian machine, copied with the working tree; docs/gpu.md).
# Run from anywhere:
#
#     scripts/gpu-build.sh [--no-tests] [--jobs N] [--build-dir DIR] [--prefix DIR] [--arch SM] [--no-gloo]
#                          [--targets "T1 T2 ..."]
#     scripts/gpu-build.sh --unpack-only PREFIX     # only unpack and relocate the packages
#
#  1. unpacks .gpu-deps/*.deb into PREFIX (default /tmp/harness-deps; never /) and fixes what the
#     move breaks: absolute symlinks, pkg-config files and CMake target files that name /usr;
#  2. checks the pip torch (CUDA build, C++11 ABI) and the tools;
#  3. configures (Release, Ninja, CMAKE_CUDA_ARCHITECTURES of the GPU, default 90) against that
#     torch's LibTorch with -DHARNESS_DEPS_PREFIX=PREFIX, and builds into build-gpu/;
#  4. checks that build-gpu/harness finds every library, and writes build-gpu/env.sh.
#
# --no-tests: HARNESS_TESTS=OFF. --targets: build only these CMake targets (and what they need),
# e.g. "harness bench_kernel_agreement bench_train_step", as scripts/gpu-check.sh does.
# --no-gloo: leave out Debian's Gloo headers (their version is not the one inside the pip torch;
# without them data parallel is NCCL only). Environment: PYTHON,
# NVCC, GPU_DEPS_DIR (.gpu-deps), HARNESS_DEPS_PREFIX, GPU_BUILD_DIR, CMAKE_ARGS (extra arguments).
# Exit code: 0 built, 1 the build failed, 2 something needed is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
DEPS_DIR=${GPU_DEPS_DIR:-.gpu-deps}
PREFIX=${HARNESS_DEPS_PREFIX:-/tmp/harness-deps}
BUILD=${GPU_BUILD_DIR:-build-gpu}
JOBS=$(nproc 2>/dev/null || echo 4)
tests=ON gloo=1 unpack_only=0 arch="" targets=""
UNPACK_VERSION=3  # bump after changing the fixes in unpack_deps: forces a fresh unpack

missing() { echo "gpu-build: MISSING: $*" >&2; exit 2; }
fail() { echo "gpu-build: FAILED: $*" >&2; exit 1; }
say() { printf '\n== %s\n' "$*"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --no-tests) tests=OFF ;;
    --no-gloo) gloo=0 ;;
    --jobs) JOBS=${2:?--jobs N}; shift ;;
    --jobs=*) JOBS=${1#*=} ;;
    --build-dir) BUILD=${2:?--build-dir DIR}; shift ;;
    --prefix) PREFIX=${2:?--prefix DIR}; shift ;;
    --arch) arch=${2:?--arch SM, e.g. 90}; shift ;;
    --targets) targets=${2:?--targets "T1 T2 ..."}; shift ;;
    --unpack-only) unpack_only=1; PREFIX=${2:?--unpack-only PREFIX}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-build: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "gpu-build: --jobs wants a positive number, not '$JOBS'" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
# 1. Unpack and relocate. A stamp records which .debs PREFIX holds: same set, nothing to do.
unpack_deps() {
  local prefix=$1 deb debs stamp tmp data link target
  [[ $prefix == /* ]] || prefix="$ROOT/$prefix"
  prefix=$(realpath -m "$prefix")
  case "$prefix" in
    /|/usr) echo "gpu-build: refusing to unpack into $prefix (a folder of its own, e.g. /tmp/harness-deps)" >&2; exit 2 ;;
  esac
  PREFIX=$prefix
  shopt -s nullglob
  debs=("$DEPS_DIR"/*.deb)
  shopt -u nullglob
  [ ${#debs[@]} -gt 0 ] || missing "$DEPS_DIR/*.deb: run scripts/gpu-deps.sh on the Debian machine (the folder is ignored by git: copy it along)"
  if ! command -v dpkg-deb >/dev/null; then
    command -v ar >/dev/null || missing "dpkg-deb, or ar (binutils) and tar, to unpack the .deb files"
    command -v tar >/dev/null || missing "tar"
  fi
  stamp=$( (for deb in "${debs[@]}"; do printf '%s %s\n' "$(basename "$deb")" "$(stat -c %s "$deb")"; done
            echo "gloo=$gloo unpack=$UNPACK_VERSION") | sha256sum | cut -c1-16)
  if [ -f "$prefix/.harness-deps" ] && [ "$(cat "$prefix/.harness-deps")" = "$stamp" ]; then
    echo "gpu-build: $prefix already holds these ${#debs[@]} packages"
    return
  fi
  if [ -e "$prefix" ]; then
    # Only ever remove a folder this script made (it carries the stamp file) or an empty one.
    if [ -f "$prefix/.harness-deps" ] || [ -z "$(ls -A "$prefix" 2>/dev/null)" ]; then
      rm -rf "$prefix"
    else
      echo "gpu-build: $prefix exists and was not made by gpu-build.sh: remove it or choose --prefix" >&2
      exit 2
    fi
  fi
  mkdir -p "$prefix"
  echo "gpu-build: unpacking ${#debs[@]} packages into $prefix"
  for deb in "${debs[@]}"; do
    if [ $gloo = 0 ] && [[ $(basename "$deb") == libgloo-dev_* ]]; then continue; fi
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else
      tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$(cd "$ROOT" && realpath "$deb")")
      data=$(ls "$tmp"/data.tar.* 2>/dev/null | head -1)
      [ -n "$data" ] || fail "no data.tar.* in $deb"
      tar -xf "$data" -C "$prefix"
      rm -rf "$tmp"
    fi
  done
  # Some Debian 12 packages still ship /lib/<arch>/*.so (libcom-err2, libkeyutils1): merge /lib into
  # /usr/lib as a merged-/usr system has it, where the RPATH and LD_LIBRARY_PATH look.
  if [ -d "$prefix/lib" ] && [ ! -L "$prefix/lib" ]; then
    cp -a "$prefix/lib/." "$prefix/usr/lib/"
    rm -rf "$prefix/lib"
    ln -s usr/lib "$prefix/lib"
  fi
  # Absolute symlinks point into / once moved: point them into the prefix.
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /* ]] && ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l -print0)
  # pkg-config files: prefix=/usr, libdir=/usr/..., -I/usr/..., -L/usr/...
  find "$prefix" -name '*.pc' -path '*/pkgconfig/*' -exec \
    sed -i -E "s#(=|-I|-L)/usr(/|\$)#\\1$prefix/usr\\2#g" {} +
  # CMake target files that name /usr outright (most compute their prefix from their own place;
  # the "cross-prefix symlink" guards that also name /usr are left as they are: inert here).
  find "$prefix" -name '*.cmake' -path '*/cmake/*' -exec \
    sed -i -E "/(IMPORTED_LOCATION|INTERFACE_INCLUDE_DIRECTORIES|INTERFACE_LINK_LIBRARIES|_cmake_import_check_files)/ s#\"/usr/#\"$prefix/usr/#g" {} +
  # pkg-config for a machine without one: pkgconf from the packages, with its library.
  if [ -x "$prefix/usr/bin/pkgconf" ]; then
    mkdir -p "$prefix/bin"
    cat >"$prefix/bin/pkg-config" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$prefix/usr/bin/pkgconf" "\$@"
EOF
    chmod +x "$prefix/bin/pkg-config"
  fi
  check_closure "$prefix"
  echo "$stamp" >"$prefix/.harness-deps"
  echo "gpu-build: $(du -sh "$prefix" | cut -f1) unpacked into $prefix"
}

# Every library the packages need must be among them, or be one every machine has (glibc, the GCC
# run-time, zlib): scripts/gpu-deps.sh left those out on purpose.
check_closure() {
  local libdir="$1/usr/lib/x86_64-linux-gnu" f needed lacking=""
  command -v readelf >/dev/null || { echo "gpu-build: no readelf: library closure not checked"; return; }
  local system=" ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libutil.so.1 libstdc++.so.6 libgcc_s.so.1 libz.so.1 libgomp.so.1 libcrypt.so.1 "
  while IFS= read -r -d '' f; do
    for needed in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ $system == *" $needed "* ]] || [ -e "$libdir/$needed" ] || lacking+=" $needed($(basename "$f"))"
    done
  done < <(find "$libdir" -maxdepth 3 -type f -name '*.so*' -print0)
  [ -z "$lacking" ] || missing "libraries that the unpacked ones need:$lacking (add their packages in scripts/gpu-deps.sh)"
}

unpack_deps "$PREFIX"
[ $unpack_only = 1 ] && exit 0

# ---------------------------------------------------------------------------------------------
say "2. tools and torch"
command -v cmake >/dev/null || missing "cmake"
GENERATOR=Ninja
command -v ninja >/dev/null || missing "ninja (pip install ninja, or put it on PATH)"
CXX=${CXX:-$(command -v g++ || command -v c++ || true)}
[ -n "$CXX" ] || missing "a C++ compiler (g++)"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || missing "nvcc (not on PATH, not at /usr/local/cuda/bin/nvcc; set NVCC=...)"

PYTHON_FOUND=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; do
  command -v "$candidate" >/dev/null || continue
  if "$candidate" -c 'import torch' 2>/dev/null; then PYTHON_FOUND=$(command -v "$candidate"); break; fi
done
[ -n "$PYTHON_FOUND" ] || missing "a python3 with torch (tried: ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; set PYTHON=...)"
PYTHON=$PYTHON_FOUND
eval "$("$PYTHON" "$ROOT/scripts/torch_env.py")" || missing "could not query torch with $PYTHON"
echo "python: $PYTHON, torch $TORCH_VERSION (CUDA ${TORCH_CUDA_VERSION:-none}, C++11 ABI $TORCH_ABI) at $TORCH_DIR"
echo "nvcc: $NVCC ($("$NVCC" --version | tail -1)); cmake $(cmake --version | head -1 | awk '{print $3}'); $CXX $("$CXX" -dumpfullversion)"
# Debian's C++ libraries use the C++11 ABI (std::string, std::list): so must LibTorch.
[ "$TORCH_ABI" = 1 ] || missing "a torch built with the C++11 ABI (this one has torch._C._GLIBCXX_USE_CXX11_ABI False; Debian's libraries in $DEPS_DIR need it: pip torch 2.x wheels for Linux have it)"
[ -n "$TORCH_CUDA_VERSION" ] || echo "gpu-build: warning: torch $TORCH_VERSION is a CPU build: the CUDA binding and NCCL are not built"

if [ -z "$arch" ]; then
  arch=$GPU_ARCH
  [ -n "$arch" ] || arch=$( (nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true) | head -1 | tr -d ' .')
  [ -n "$arch" ] || { arch=90; echo "gpu-build: no GPU visible: CUDA architecture $arch"; }
fi
[[ $arch =~ ^[0-9]+$ ]] || { echo "gpu-build: --arch wants e.g. 90, not '$arch'" >&2; exit 2; }
echo "CUDA architecture: sm_$arch"

# ---------------------------------------------------------------------------------------------
say "3. configure and build ($BUILD/, Release, $JOBS jobs, tests $tests)"
cmake_args=(
  -S "$ROOT" -B "$BUILD" -G "$GENERATOR"
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CXX_COMPILER="$CXX"
  -DCMAKE_CUDA_COMPILER="$NVCC"
  -DCMAKE_CUDA_ARCHITECTURES="$arch"
  -DHARNESS_PYTHON="$PYTHON"  # its torch's LibTorch, found as the project's .venv is in CI (cmake/find-torch.cmake)
  -DHARNESS_DEPS_PREFIX="$PREFIX"
  -DHARNESS_TESTS="$tests"
  -DPYTHON_EXECUTABLE="$PYTHON"  # some LibTorch configs run it
)
if [ -n "$CUDNN_HEADER" ] && [ -n "$CUDNN_LIB" ] && [ ! -e /usr/include/cudnn.h ]; then
  cmake_args+=(-DCUDNN_INCLUDE_PATH="$(dirname "$CUDNN_HEADER")" -DCUDNN_LIBRARY_PATH="$CUDNN_LIB")
fi
# CMake 4 refuses config files that declare compatibility with CMake < 3.5 (some Debian ones do).
cmake_major=$(cmake --version | head -1 | awk '{print $3}' | cut -d. -f1)
[ "$cmake_major" -ge 4 ] && cmake_args+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
# shellcheck disable=SC2206
[ -n "${CMAKE_ARGS:-}" ] && cmake_args+=(${CMAKE_ARGS})

echo "cmake ${cmake_args[*]}"
cmake "${cmake_args[@]}" || fail "configure (see the messages above; $BUILD/CMakeFiles/CMakeConfigureLog.yaml or CMakeError.log)"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$JOBS" ${targets:+--target $targets} || fail "build${targets:+ of $targets}"

# ---------------------------------------------------------------------------------------------
say "4. run-time check"
torch_lib="$TORCH_DIR/lib"
deps_lib="$PREFIX/usr/lib/x86_64-linux-gnu"
cat >"$BUILD/env.sh" <<EOF
# Written by scripts/gpu-build.sh. The binaries in $BUILD/ carry an RPATH to these folders and
# need no environment; this is for whatever loads the harness's libraries otherwise. Source it only
# in the shell that runs the harness: its Debian 12 libraries must not shadow this system's for
# other programs (cmake, python).
export HARNESS_DEPS_PREFIX="$PREFIX"
export LD_LIBRARY_PATH="$deps_lib:$deps_lib/hdf5/serial:$torch_lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
[ -x "$BUILD/harness" ] || fail "no $BUILD/harness after the build"
for binary in "$BUILD/harness" "$BUILD"/libharness_sentencepiece.so; do
  [ -e "$binary" ] || continue
  unresolved=$(env -u LD_LIBRARY_PATH ldd "$binary" | grep 'not found' || true)
  [ -z "$unresolved" ] || fail "$binary does not find: $unresolved"
done
env -u LD_LIBRARY_PATH ldd "$BUILD/harness" | grep -E "$PREFIX|torch/lib" | sed 's/^/  /' || true
env -u LD_LIBRARY_PATH "$BUILD/harness" --version || fail "$BUILD/harness --version"
echo
echo "gpu-build: built $BUILD/harness$( [ $tests = ON ] && echo " and the tests (ctest --test-dir $BUILD)")"
echo "gpu-build: no environment is needed to run them (RPATH); for other loaders: source $BUILD/env.sh"
