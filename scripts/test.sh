#!/usr/bin/env bash
# The test command: installs what the tests need, builds, and runs the whole suite
# (GoogleTest unit tests and the PyTorch reference comparisons) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
GATEDLM_WITH_TEST_DEPS=1 scripts/setup.sh
cd "${GATEDLM_BUILD_DIR:-build}"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} ctest --output-on-failure "$@"
