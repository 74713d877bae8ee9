"""Shared fixtures of dlm's Python tests (tests/python.cmake runs them with the package installed in a
venv): the shipped models and dlm-generate, whose answers the package must reproduce."""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    parser.addoption("--models", default=str(ROOT / "models"), help="the shipped model folders (models/)")
    parser.addoption("--dlm-generate", default=os.environ.get("DLM_GENERATE", ""), help="the dlm-generate program")


@pytest.fixture(scope="session")
def models(request) -> Path:
    return Path(request.config.getoption("--models"))


@pytest.fixture(scope="session")
def dlm_generate(request) -> str:
    path = request.config.getoption("--dlm-generate") or shutil.which("dlm-generate") or ""
    if not path or not os.access(path, os.X_OK):
        pytest.skip("no dlm-generate to compare with (pass --dlm-generate PATH)")
    return path


@pytest.fixture(scope="session")
def llm(models):
    import dlm
    return dlm.LLM(models / "cdlm")
