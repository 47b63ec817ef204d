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
# OpenMP threads sleep rather than spin while they wait: with other programs on the same
# cores, spinning threads slow everything down (training ran twice as fast this way on a
# shared, loaded 2-core machine). Set OMP_WAIT_POLICY to override.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec "$ROOT/${GATEDLM_BUILD_DIR:-build}/gatedlm" demo "$@"
