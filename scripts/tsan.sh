#!/usr/bin/env bash
# ThreadSanitizer over the engine's own threads (issue 39): builds the binary, the unit
# tests and the Python module with -fsanitize=thread into build-tsan/, then runs the `fast`
# tests and the Python package's tests against it. Not part of CI (a third build).
#
# OpenMP runs with one thread (OMP_NUM_THREADS=1): libgomp and oneDNN's OpenMP runtime are
# not built with ThreadSanitizer, so the synchronisation of their teams is invisible to it
# and every parallel region would be reported. What is checked is the concurrency of the
# engine's own std::threads: the Python module's threads (generate, train, close, the exit
# hook), the interrupt flags, the server's scheduler, the thread governor.
#   scripts/tsan.sh [CTEST ARGS...]     the report goes to build-tsan/tsan-report.txt
set -euo pipefail
cd "$(dirname "$0")/.."
export GATEDLM_BUILD_DIR=build-tsan
export GATEDLM_CMAKE_ARGS="-DGATEDLM_TSAN=ON ${GATEDLM_CMAKE_ARGS:-}"
export GATEDLM_BUILD_TARGETS="gatedlm gatedlm_tests gatedlm_python"
GATEDLM_WITH_TEST_DEPS=1 scripts/setup.sh
cd build-tsan
jobs=$(OMP_NUM_THREADS= nproc)  # GNU nproc honours OMP_NUM_THREADS: count the cores first
export OMP_NUM_THREADS=1
report=$PWD/tsan-report.txt
rm -f "$report".*
# Reports are collected, not fatal: every one is listed at the end.
export TSAN_OPTIONS="halt_on_error=0:exitcode=0:log_path=$report:second_deadlock_stack=1"
# Left out by default: the tests that set several OpenMP threads themselves (the thread-count
# determinism tests, the fused attention's), where every report is libgomp's invisible
# barriers and each test takes many minutes under the sanitizer.
(($#)) || set -- -L fast -E 'AttentionFast|ThreadCountDeterminism|SameBitsWhatever|KeyBlockSplit' --timeout 300
ctest -j "$jobs" "$@" || status=$?
# The Python interpreter is not instrumented: the runtime is preloaded so that the module's
# threads are seen from their creation.
LD_PRELOAD="$(g++ -print-file-name=libtsan.so)" PYTHONPATH=python \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider ../tests/python --gatedlm ./gatedlm || status=$?
reports=$(cat "$report".* 2>/dev/null | grep -c "^WARNING: ThreadSanitizer" || true)
echo "ThreadSanitizer: $reports report(s) (build-tsan/tsan-report.txt.<pid>)"
exit "${status:-0}"
