#!/usr/bin/env bash
# Gathers, on this Debian 12 machine, the .deb files of every dependency of the harness other than
# LibTorch and CUDA, for a GPU machine that has neither these packages nor a network
# (scripts/gpu-build.sh unpacks them there; docs/gpu.md). Run from anywhere, as root:
#
#     scripts/gpu-deps.sh            # -> .gpu-deps/*.deb (ignored by git), prints the total size
#
# What it takes: the -dev packages (headers, .so links, CMake and pkg-config files) and their
# libraries, then the run-time closure of those libraries as ldd resolves it here, less what every
# machine (or torch) has: glibc, the GCC run-time, zlib. Idempotent: a .deb already there is
# kept, one no longer wanted is removed. Exit 2 when something needed is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEST=${GPU_DEPS_DIR:-.gpu-deps}
MAX_MIB=${GPU_DEPS_MAX_MIB:-40}  # the working tree travels with it: at most 64 MiB in all

die() { echo "gpu-deps: $*" >&2; exit 2; }

# Headers, .so links, CMake configs (GTest, benchmark: static libraries and configs only).
dev_packages=(
  libyaml-cpp-dev libspdlog-dev libfmt-dev
  libhdf5-dev                                        # hdf5/serial: headers, libhdf5.so links
  libboost1.74-dev libboost-program-options1.74-dev  # program_options needs the common headers
  libsentencepiece-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev                                        # headers only: c10d's Gloo is in libtorch_cpu
  pkgconf-bin libpkgconf3                            # pkg-config, for machines without one
)
# The shared libraries the harness links (their closure is added below).
runtime_packages=(
  libyaml-cpp0.7 libspdlog1.10 libfmt9 libhdf5-103-1 libhdf5-cpp-103-1
  libboost-program-options1.74.0 libsentencepiece0 libbenchmark1debian
)
# Never carried: on every machine (glibc, GCC run-time, zlib) or bundled by torch (libgomp).
excluded_packages=(libc6 libstdc++6 libgcc-s1 zlib1g libgomp1 libcrypt1)

[ "$(id -u)" = 0 ] || die "run as root (apt-get download and, if needed, apt-get install)"
for tool in apt-get dpkg dpkg-query ldd; do
  command -v "$tool" >/dev/null || die "missing: $tool (this script runs on Debian 12)"
done

# ldd needs the libraries installed here; install the missing ones (they are what
# scripts/install-deps.sh installs anyway).
missing=()
for p in "${runtime_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-deps: installing ${missing[*]} (to compute their run-time closure)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The run-time closure: every library that ldd resolves for the packages' shared objects, mapped
# to its package. dpkg lists a file under /lib or /usr/lib (merged /usr): try both.
owner_of() {
  local real candidate
  real=$(readlink -f "$1")
  for candidate in "$real" "${real#/usr}" "/usr${real}"; do
    dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}
declare -A closure=()
while read -r lib; do
  [[ $lib == NOTFOUND:* ]] && die "ldd cannot resolve ${lib#NOTFOUND:} here"
  owner=$(owner_of "$lib") || die "no package owns $lib (needed by a harness dependency)"
  closure[$owner]=1
done < <(
  for p in "${runtime_packages[@]}"; do dpkg -L "$p"; done | grep -E '\.so(\.|$)' | sort -u |
    while read -r f; do [ -f "$f" ] && [ ! -L "$f" ] && ldd "$f"; done |
    awk '/=> \// {print $3} /not found/ {print "NOTFOUND:" $1}' | sort -u
)
declare -A wanted=()
for p in "${dev_packages[@]}" "${runtime_packages[@]}" "${!closure[@]}"; do wanted[$p]=1; done
for p in "${excluded_packages[@]}"; do unset "wanted[$p]"; done
mapfile -t packages < <(printf '%s\n' "${!wanted[@]}" | sort)

mkdir -p "$DEST"
# Drop the .debs of packages no longer wanted (a package's file is <name>_<version>_<arch>.deb).
for deb in "$DEST"/*.deb; do
  [ -e "$deb" ] || continue
  name=$(basename "$deb"); name=${name%%_*}
  [ -n "${wanted[$name]:-}" ] || { echo "gpu-deps: removing $(basename "$deb") (no longer needed)"; rm -f "$deb"; }
done
# Download what is not there yet (any version of it: the set is what matters, not the newest).
todo=()
for p in "${packages[@]}"; do
  compgen -G "$DEST/${p}_*.deb" >/dev/null || todo+=("$p")
done
if [ ${#todo[@]} -gt 0 ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # apt's sandbox user must be able to write there, else apt warns and downloads as root.
  chown _apt "$tmp" 2>/dev/null || true
  echo "gpu-deps: downloading ${#todo[@]} package(s): ${todo[*]}"
  if ! (cd "$tmp" && apt-get download -qq "${todo[@]}" >/dev/null 2>&1); then
    apt-get update -qq
    (cd "$tmp" && apt-get download -qq "${todo[@]}" >/dev/null) ||
      die "apt-get download failed for some of: ${todo[*]}"
  fi
  mv "$tmp"/*.deb "$DEST"/
fi

# A manifest beside them: package, version, size (for the record and for gpu-build.sh's checks).
{
  echo "# scripts/gpu-deps.sh on $(. /etc/os-release && echo "$PRETTY_NAME"), $(date -u +%Y-%m-%dT%H:%MZ)"
  for deb in "$DEST"/*.deb; do
    printf '%s\t%s\t%s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" "$(stat -c %s "$deb")"
  done
} >"$DEST/MANIFEST"

count=$(find "$DEST" -maxdepth 1 -name '*.deb' | wc -l)
bytes=$(find "$DEST" -maxdepth 1 -name '*.deb' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
echo "gpu-deps: $count packages, $mib MiB in $DEST/ (limit ${MAX_MIB} MiB)"
awk -v b="$bytes" -v m="$MAX_MIB" 'BEGIN {exit !(b > m * 1048576)}' &&
  die "$DEST/ is $mib MiB, over the ${MAX_MIB} MiB that may travel beside the source tree"
exit 0
