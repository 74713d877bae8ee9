#!/usr/bin/env bash
# Builds dlm's Python package once and installs it into the venvs of the Python tests (tests/python.cmake):
#   tests/python/install_package.sh build VENV SOURCE_DIR
#       VENV from scripts/setup-venv.sh with the build tools and pytest (nanobind, scikit-build-core, numpy, pytest);
#       `pip wheel --no-build-isolation .` builds the wheel into SOURCE_DIR/build/python/dist (the CMake build kept in
#       SOURCE_DIR/build/python/, so a second run rebuilds only what changed) and installs it
#   tests/python/install_package.sh venv VENV SOURCE_DIR PACKAGE...
#       VENV with PACKAGE... from PyPI (e.g. "lm-eval[api]==0.4.13" numpy pytest), without the package: it needs no
#       wheel, so ctest runs it while the wheel builds
#   tests/python/install_package.sh install VENV SOURCE_DIR PACKAGE...
#       the same VENV (made now if the venv step has not), and the wheel the build made
# Exit 77 (skipped), saying why, when PyPI cannot be reached.
set -uo pipefail
(($# >= 3)) || { echo "usage: install_package.sh build|venv|install VENV SOURCE_DIR [PACKAGE...]" >&2; exit 2; }
mode=$1 venv=$2 src=$3
shift 3
dist=$src/build/python/dist
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

case $mode in
build) packages=(nanobind scikit-build-core numpy pytest) ;;
venv | install) packages=("$@") ;;
*) echo "install_package.sh: unknown mode $mode" >&2; exit 2 ;;
esac
if ! "$src/scripts/setup-venv.sh" "$venv" "${packages[@]}"; then
    echo "skipped: no venv with ${packages[*]} (PyPI unreachable?), so dlm's Python package cannot be tested there"
    exit 77
fi
[[ $mode == venv ]] && exit 0
if [[ $mode == build ]]; then
    start=$(date +%s)
    rm -rf "$dist"
    # The compiler by the name CMake finds first in the test build (c++): ccache keys objects by that name too,
    # so the wheel reuses that build's kernels object (CMakeLists.txt, DLM_CCACHE).
    CXX=${CXX:-c++} "${pip[@]}" wheel --quiet --no-build-isolation --no-deps -w "$dist" "$src" || { echo "install_package.sh: building the wheel failed" >&2; exit 1; }
    echo "install_package.sh: built $(basename "$dist"/dlm-*.whl) in $(($(date +%s) - start)) s"
fi
wheel=$(ls "$dist"/dlm-*.whl 2>/dev/null | head -n 1)
[[ -n $wheel ]] || { echo "install_package.sh: no wheel in $dist (the build step did not run)" >&2; exit 1; }
"${pip[@]}" install --quiet --no-deps --force-reinstall "$wheel" || exit 1
"$venv/bin/python" -c "import dlm; print('install_package.sh: dlm', dlm.__version__, 'in', dlm.__file__)"
