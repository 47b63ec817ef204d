#!/usr/bin/env bash
# The unit tests on 64-bit ARM, on this x86-64 machine: cross-compiles gatedlm and its
# tests with Debian's aarch64 cross compiler against Debian's arm64 oneDNN, SentencePiece
# and GoogleTest (downloaded as packages and unpacked into a sysroot under .cache/, nothing
# installed for arm64 system-wide), then runs them under qemu-user. Correctness only:
# emulation says nothing about speed. On ARM only the generic kernel set is built.
#
# Usage: scripts/test-arm.sh [GTEST_FILTER]   (default: every in-process unit test; the
# tests that start the gatedlm binary as a child process are left out, since the child
# would be an ARM program started outside qemu)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
need=()
for p in g++-aarch64-linux-gnu qemu-user cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

SYSROOT=${GATEDLM_ARM_SYSROOT:-$PWD/.cache/arm64-sysroot}
if [[ ! -f "$SYSROOT/.complete" ]]; then
  echo "test-arm: fetching Debian's arm64 libraries into $SYSROOT" >&2
  lists=$(mktemp -d) debs=$(mktemp -d)
  mkdir -p "$lists/partial" "$SYSROOT"
  apt_arm64=(-oAPT::Architecture=arm64 -oAPT::Architectures=arm64 "-oDir::State::Lists=$lists")
  apt-get "${apt_arm64[@]}" update -qq
  (cd "$debs" && apt-get "${apt_arm64[@]}" download libdnnl2 libdnnl-dev libsentencepiece0 libsentencepiece-dev \
                   libprotobuf-lite32 libgtest-dev libgmock-dev >/dev/null 2>&1)
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
  rm -rf "$lists" "$debs"
  touch "$SYSROOT/.complete"
fi

BUILD=${GATEDLM_ARM_BUILD_DIR:-build-arm64}
export GATEDLM_ARM_SYSROOT=$SYSROOT
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
        -Ddnnl_DIR="$SYSROOT/usr/lib/aarch64-linux-gnu/cmake/dnnl" -DGTest_DIR="$SYSROOT/usr/lib/aarch64-linux-gnu/cmake/GTest" \
        -Dnlohmann_json_DIR=/usr/share/cmake/nlohmann_json -DCLI11_DIR=/usr/share/cmake/CLI11 >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target gatedlm gatedlm_tests

FILTER=${1:-"-*Cli*:TrainRun*:DemoSmoke*:*Resume*:LongCtx*Cli*:*Binary*:FuzzCorpus*"}
file "$BUILD/tests/gatedlm_tests" | grep -q aarch64 || { echo "test-arm: not an aarch64 build" >&2; exit 1; }
# The arm64 C library comes from the cross toolchain's tree, the other libraries from the sysroot.
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export LD_LIBRARY_PATH="$SYSROOT/usr/lib/aarch64-linux-gnu"
OMP_NUM_THREADS=2 GOMP_SPINCOUNT=10000 qemu-aarch64 "$BUILD/tests/gatedlm_tests" --gtest_filter="$FILTER" --gtest_brief=1
