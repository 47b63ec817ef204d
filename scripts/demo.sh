#!/usr/bin/env bash
# The main job: installs what gatedlm needs and builds it in Release mode
# (scripts/setup.sh; the build is reused), then runs `gatedlm demo` with the arguments
# given here, e.g. --minutes 30, --corpus PATH, --preset medium, --fresh
# (`build/gatedlm demo --help` lists them). Relative paths are taken from the directory
# you run it in; the results go to runs/demo there unless --out says otherwise.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GATEDLM_WITH_DEMO_DEPS=1 "$ROOT/scripts/setup.sh"
# Sleep rather than spin while waiting for work: on a laptop that is also doing other
# things this is much faster, and on an idle one it costs little.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec "$ROOT/${GATEDLM_BUILD_DIR:-build}/gatedlm" demo "$@"
