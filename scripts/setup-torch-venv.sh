#!/usr/bin/env bash
# Creates (or reuses) the venv bench/compare_torch.py runs in: PyTorch, safetensors and numpy (torch warns
# without it) from PyPI.
#   scripts/setup-torch-venv.sh [VENV_DIR]            # default build/venv-torch
#   TORCH_SPEC=torch==2.15.0 scripts/setup-torch-venv.sh   # another torch (default: the one issue 23 measured)
# PyPI's torch wheel for Linux is the CUDA build: it brings its CUDA libraries along (a few GB of
# downloads) and runs on the CPU as well; PyTorch's CPU-only wheel index is not reachable from the
# project's machines. Idempotent, like scripts/setup-venv.sh, which does the work.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-build/venv-torch}
"$here/setup-venv.sh" "$venv" "${TORCH_SPEC:-torch==2.15.0}" "${SAFETENSORS_SPEC:-safetensors==0.8.0}" "${NUMPY_SPEC:-numpy}"
"$venv/bin/python" -c 'import torch; print(f"setup-torch-venv.sh: torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")'
