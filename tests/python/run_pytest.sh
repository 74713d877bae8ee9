#!/usr/bin/env bash
# Runs pytest from the venv that install_package.sh filled (tests/python.cmake):
#   tests/python/run_pytest.sh VENV PYTEST_ARGS...
# Exit 77 (skipped), saying why, when the package is not installed there (the install step was skipped).
set -uo pipefail
venv=$1
shift
if ! "$venv/bin/python" -c "import dlm" 2>/dev/null; then
    echo "skipped: dlm's Python package is not installed in $venv (its install step was skipped: PyPI unreachable?)"
    exit 77
fi
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
