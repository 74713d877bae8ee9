#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment holding the official `openai` client from PyPI,
# for dlm-server's client tests (tests/server.cmake) and anyone who wants to try the server from
# Python:
#   scripts/setup-openai-venv.sh [VENV_DIR]      # default: build/venv-openai of the source tree
#   build/venv-openai/bin/python -c "import openai; print(openai.__version__)"
# The work is scripts/setup-venv.sh's (its exit status: 1, saying why, when PyPI cannot be reached).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/setup-venv.sh" "${1:-"$here/../build/venv-openai"}" "openai>=1.0"
