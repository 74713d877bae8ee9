#!/usr/bin/env bash
# Installs dlm's Python package from the source tree into a venv, for the Python tests (tests/python.cmake):
#   tests/python/install_package.sh VENV SOURCE_DIR
# The venv comes from scripts/setup-venv.sh (nanobind, scikit-build-core, numpy, pytest from PyPI); the package is
# built once by `pip install --no-build-isolation .`, its CMake build kept in SOURCE_DIR/build/python/, so a
# second run rebuilds only what changed. Exit 77 (skipped), saying why, when PyPI cannot be reached.
set -uo pipefail
(($# == 2)) || { echo "usage: install_package.sh VENV SOURCE_DIR" >&2; exit 2; }
venv=$1
src=$2
if ! "$src/scripts/setup-venv.sh" "$venv" nanobind scikit-build-core numpy pytest; then
    echo "skipped: no venv with nanobind, scikit-build-core, numpy and pytest (PyPI unreachable?), so the Python package cannot be built"
    exit 77
fi
start=$(date +%s)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps "$src" || {
    echo "install_package.sh: pip install $src failed" >&2
    exit 1
}
echo "install_package.sh: built and installed in $(($(date +%s) - start)) s"
"$venv/bin/python" -c "import dlm; print('dlm', dlm.__version__, 'from', dlm.__file__)"
