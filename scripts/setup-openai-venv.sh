#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment holding the official `openai` client from PyPI,
# for dlm-server's client tests (tests/server.cmake) and anyone who wants to try the server from
# Python:
#   scripts/setup-openai-venv.sh [VENV_DIR]      # default: build/venv-openai of the source tree
#   build/venv-openai/bin/python -c "import openai; print(openai.__version__)"
# Needs python3 with the venv module (Debian: python3-venv) and access to PyPI. Idempotent: a venv
# that already imports openai is left as it is. Exit status 1 (and one line saying why) when the
# venv cannot be created or the package cannot be installed; the tests then report themselves skipped.
set -euo pipefail

venv=${1:-"$(cd "$(dirname "$0")/.." && pwd)/build/venv-openai"}
python=${PYTHON:-python3}

die() {
    echo "setup-openai-venv.sh: $*" >&2
    exit 1
}

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import openai" 2>/dev/null; then
    echo "setup-openai-venv.sh: $venv has openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)')"
    exit 0
fi
command -v "$python" >/dev/null || die "no $python to create the venv with"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$python" -m venv "$venv" >"$log" 2>&1 || { cat "$log" >&2; die "cannot create a venv in $venv (Debian: apt-get install python3-venv)"; }
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.0" >"$log" 2>&1 ||
    { tail -n 5 "$log" >&2; die "pip cannot install openai into $venv (no access to PyPI?)"; }
echo "setup-openai-venv.sh: $venv has openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)')"
