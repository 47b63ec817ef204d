"""The wheel of the Python package gatedlm (docs/python.md, "Install"), offline, from Debian's
setuptools and CMake:

    python3 -m venv --system-site-packages ~/venvs/gatedlm && . ~/venvs/gatedlm/bin/activate
    python3 -m pip install .                  # or: python3 -m build --wheel --no-isolation

The extension gatedlm._gatedlm is built by CMake (python/CMakeLists.txt, target gatedlm_python)
in the build directory GATEDLM_BUILD_DIR (default build/, the one scripts/setup.sh makes),
configured in Release mode for this interpreter when it is not configured yet; an up-to-date
build directory builds nothing new. GATEDLM_SKIP_BUILD=1 takes the module already built there
as it is (the ctest python_wheel, which must not run a second build in the tree it tests).

There is deliberately no pyproject.toml: with one, pip 23 (Debian 12's) builds in an isolated
environment whose setuptools and wheel it downloads from the package index. Without one, pip
runs this file with the setuptools and wheel of the environment (Debian's python3-setuptools
and python3-wheel, visible in a venv made with --system-site-packages), so nothing is fetched.
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(gatedlm VERSION ([0-9.]+)", f.read()).group(1)


def cmake_build_dir():
    path = os.environ.get("GATEDLM_BUILD_DIR") or "build"
    return os.path.abspath(os.path.join(ROOT, path))  # relative to the checkout, as in scripts/setup.sh


def base_interpreter():
    """The interpreter a venv was made from (the venv's own may be deleted; the ABI is the same)."""
    return getattr(sys, "_base_executable", None) or sys.executable


class CMakeBuild(build_ext):
    """Builds the one extension with CMake and copies it where setuptools packs it."""

    def build_extension(self, ext):
        build_dir = cmake_build_dir()
        if os.environ.get("GATEDLM_SKIP_BUILD") != "1":
            if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
                generator = ["-G", "Ninja"] if shutil.which("ninja") else []
                # An sdist (MANIFEST.in) has no tests/; a checkout keeps them, for scripts/test.sh.
                tests = os.path.isfile(os.path.join(ROOT, "tests", "CMakeLists.txt"))
                self.run_cmake(["cmake", "-S", ROOT, "-B", build_dir, *generator, "-DCMAKE_BUILD_TYPE=Release",
                                f"-DPython_EXECUTABLE={base_interpreter()}",
                                f"-DGATEDLM_BUILD_TESTS={'ON' if tests else 'OFF'}"])
            self.run_cmake(["cmake", "--build", build_dir, "--target", "gatedlm_python",
                            "-j", str(os.cpu_count() or 1)])
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build_dir, "python", "gatedlm", "_gatedlm" + suffix)
        if not os.path.isfile(built):
            sys.exit(f"gatedlm: {built} is missing: {build_dir} has no Python module built for "
                     f"{sys.executable} ({suffix}); build it there (cmake --build {build_dir} --target "
                     "gatedlm_python), or name another build directory with GATEDLM_BUILD_DIR, which is "
                     "then configured for this interpreter")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)
        shutil.copymode(built, dest)

    @staticmethod
    def run_cmake(cmd):
        print("gatedlm:", " ".join(cmd), flush=True)
        if subprocess.call(cmd) != 0:
            sys.exit(f"gatedlm: {' '.join(cmd)} failed (scripts/setup.sh installs the build dependencies)")


# setuptools' scratch files (build/lib..., build/bdist..., the egg-info) go to a directory of
# this run's own, not into the checkout's build/ (CMake's) or python/, and are removed at exit.
scratch = tempfile.mkdtemp(prefix="gatedlm-setup-")
atexit.register(shutil.rmtree, scratch, True)

setup(
    name="gatedlm",
    version=project_version(),
    description="Gated-attention language models (Qiu et al., NeurIPS 2025): train, probe and run them "
                "on a CPU with the gatedlm C++ engine",
    license="see the checkout",
    python_requires=">=3.9",
    install_requires=["numpy"],
    package_dir={"": "python"},
    packages=["gatedlm"],
    package_data={"gatedlm": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("gatedlm._gatedlm", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    options={"build": {"build_base": os.path.join(scratch, "build")},
             "egg_info": {"egg_base": scratch}},
)
