#!/usr/bin/env bash
# The test command: installs what the tests need, builds, and runs the whole suite
# (GoogleTest unit tests and the PyTorch reference comparisons) through ctest.
#   scripts/test.sh [CTEST ARGS...]             Release build in build/
#   scripts/test.sh --sanitize [CTEST ARGS...]  the same suite built with ASan + UBSan in build-sanitize/;
#                                               by default only the labels `fast` and `cli` (our code
#                                               under the sanitizers; the PyTorch, llama.cpp and qemu
#                                               comparisons gain nothing from them), and only the
#                                               targets those need
# CTEST ARGS such as `-L fast` (the in-process unit tests, about a minute) pick a part of it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--sanitize" ]]; then
  shift
  export GATEDLM_BUILD_DIR=${GATEDLM_BUILD_DIR:-build-sanitize}
  export GATEDLM_CMAKE_ARGS="-DGATEDLM_SANITIZE=ON ${GATEDLM_CMAKE_ARGS:-}"
  export GATEDLM_BUILD_TARGETS=${GATEDLM_BUILD_TARGETS:-gatedlm gatedlm_tests gatedlm_cli_tests}
  # Not the MpiSignals tests: under the sanitizers two of them took 290 s each (28-44 s in Release,
  # where they run), mostly ranks of sanitized processes starting and waiting; over a quarter of
  # the sanitized pass's test time (bench/RESULTS.md, "CI time" of the fifteenth session).
  # Nor the binary's long runs of code that shorter tests already take it through, whose
  # point is bits or time, not memory (the Release pass runs them): training on one and two
  # threads (ThreadCountDeterminism.*, 163 s here; resume after SIGKILL is also
  # TrainRunTest's), the thread governor beside busy threads (74 s of timing), the MoE
  # demo preset (84 s; MoeTraining trains MoE) and an interrupted sweep (104 s; SweepCliTest's
  # other tests run sweeps, SignalsDuringEvaluation interrupts), and two of the MPI training
  # runs over other model kinds (44 s and 26 s sanitized: the exchange they go through is the
  # one MpiTraining.TwoRanksGiveOneProcessResult and the refusals test take under ASan).
  (($#)) || set -- -L 'fast|cli' -E '^(MpiSignals\.|ThreadCountDeterminism\.|ThreadGovernorCliTest\.TrainingBesideBusyThreads|DemoSmokeTest\.MoePreset|SweepCliTest\.AnInterruptedSweep|MpiTraining\.(MoeGlobalLoadBalance|HybridModelOnTwoRanks))'
  # Stop at the first report, with a stack, by abort(): an exit status of 128 + SIGABRT,
  # which no test mistakes for a refusal (the tests also fail on a report in the output of
  # the binary they run, tests/support/cli_runner.cpp). Leaks are reported at exit; the
  # libraries' allocations for the process's life are suppressed (tests/sanitize/lsan.supp).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0}
  # fast_unwind_on_malloc=0: the libraries have no frame pointers, and with the fast
  # unwinder their allocations' stacks stop at malloc, where no suppression can match them.
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}
fi
started=$SECONDS
GATEDLM_WITH_TEST_DEPS=1 scripts/setup.sh
# How long the install and build took, beside ctest's own total: CI's time budget is spent
# in these two (bench/RESULTS.md, "CI time").
echo "test.sh: install and build of ${GATEDLM_BUILD_DIR:-build} took $((SECONDS - started)) s" >&2
cd "${GATEDLM_BUILD_DIR:-build}"
# As many tests at a time as there are cores, each on one OpenMP thread (tests/CMakeLists.txt
# says why): most tests are short processes that wait on
# their start-up more than they compute, and the few whose timing matters run alone
# (RUN_SERIAL in tests/CMakeLists.txt). A -j in CTEST ARGS overrides this one.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} ctest --output-on-failure -j "$(OMP_NUM_THREADS= nproc)" "$@"
