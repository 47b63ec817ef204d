#!/usr/bin/env bash
# The main job: installs what gatedlm needs and builds it in Release mode
# (scripts/setup.sh; the build is reused), then runs `gatedlm demo` with the arguments
# given here, e.g. --minutes 30, --corpus PATH, --preset medium, --fresh
# (`build/gatedlm demo --help` lists them). Relative paths are taken from the directory
# you run it in; the results go to runs/demo there unless --out says otherwise.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Build output goes to stderr with the demo's progress; stdout is left for the table.
GATEDLM_WITH_DEMO_DEPS=1 "$ROOT/scripts/setup.sh" >&2
# With other programs on the same cores gatedlm runs fewer OpenMP threads by itself
# (docs/cpus-and-threads.md, "Shared cores"); OMP_NUM_THREADS or OMP_WAIT_POLICY set here are passed on.
exec "$ROOT/${GATEDLM_BUILD_DIR:-build}/gatedlm" demo "$@"
