#!/usr/bin/env bash
# The Python package installed as a user installs it (docs/python.md, "Install"), offline:
# the wheel built with `python3 -m build --wheel --no-isolation` and with
# `python3 -m pip install .` into a fresh venv made with --system-site-packages, then the
# Python tests (tests/python) run against the installed package, outside the checkout and
# without PYTHONPATH. Both builds take the module already compiled in BUILD_DIR as it is
# (GATEDLM_SKIP_BUILD=1, setup.py): nothing is compiled twice.
#   install_test.sh SOURCE_DIR BUILD_DIR PYTHON GATEDLM_BINARY      (ctest python_wheel)
set -euo pipefail
src=$1 build=$2 python=$3 binary=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gatedlm-wheel-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
unset PYTHONPATH
# No package index: the machines this runs on cannot reach one, and the install must not try.
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 GATEDLM_BUILD_DIR=$build GATEDLM_SKIP_BUILD=1
step() { echo "install_test: $* ($((SECONDS - started)) s)"; }
started=$SECONDS

step "python3 -m build --wheel --no-isolation"
"$python" -m build --wheel --no-isolation --outdir "$tmp/dist" "$src" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; exit 1; }
wheel=$(echo "$tmp"/dist/gatedlm-*.whl)
"$python" - "$wheel" <<'PY'
import sys, sysconfig, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = {"gatedlm/__init__.py", "gatedlm/_gatedlm.pyi", "gatedlm/py.typed",
        "gatedlm/_gatedlm" + sysconfig.get_config_var("EXT_SUFFIX")}
assert want <= names, f"{sys.argv[1]} lacks {sorted(want - names)}: it has {sorted(names)}"
PY

step "python3 -m venv --system-site-packages"
"$python" -m venv --system-site-packages "$tmp/venv"
venv_python=$tmp/venv/bin/python

step "python3 -m pip install SOURCE_DIR"
"$venv_python" -m pip install "$src" >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
step "python3 -m pip install the wheel of python3 -m build"
"$venv_python" -m pip install --force-reinstall --no-deps "$wheel" >"$tmp/pip-wheel.log" 2>&1 ||
  { cat "$tmp/pip-wheel.log"; exit 1; }

# The package imported is the venv's, and its module needs nothing from the build tree.
"$venv_python" - "$tmp/venv" "$build" <<'PY'
import glob, os, subprocess, sys
import gatedlm
venv, build = (os.path.realpath(p) for p in sys.argv[1:])
where = os.path.realpath(gatedlm.__file__)
assert where.startswith(venv + os.sep), f"gatedlm imported from {where}, not from the venv {venv}"
module = glob.glob(os.path.join(os.path.dirname(where), "_gatedlm*.so"))[0]
ldd = subprocess.run(["ldd", module], capture_output=True, text=True, check=True).stdout
assert "not found" not in ldd and build not in ldd, ldd
dynamic = subprocess.run(["readelf", "-d", module], capture_output=True, text=True, check=True).stdout
assert build not in dynamic, f"{module} points into the build tree {build}:\n{dynamic}"
tok = gatedlm.Tokenizer("byte")
print(f"install_test: gatedlm {where}, byte tokenizer of {tok.vocab_size} ids")
PY

step "pytest tests/python against the installed package"
"$venv_python" -m pytest -q -p no:cacheprovider "$src/tests/python" --gatedlm "$binary"
step "done"
