"""Shared fixtures of dlm's Python tests (tests/python.cmake runs them with the package installed in a
venv): the shipped models and dlm-generate, whose answers the package must reproduce."""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    parser.addoption("--models", default=str(ROOT / "models"), help="the shipped model folders (models/)")
    parser.addoption("--diffusion-gemma", default="", help="a DiffusionGemma folder with a tokenizer (tests/diffusion_gemma.cmake makes one)")
    parser.addoption("--fast-dllm-v2", default="", help="a Fast-dLLM v2 folder with a tokenizer, a shifted model (tests/families.cmake makes one)")
    for program in ("dlm-generate", "dlm-eval", "dlm-server"):
        parser.addoption(f"--{program}", default="", help=f"the {program} program")


def program(request, name) -> str:
    path = request.config.getoption(f"--{name}") or shutil.which(name) or ""
    if not path or not os.access(path, os.X_OK):
        pytest.skip(f"no {name} to compare with (pass --{name} PATH)")
    return path


@pytest.fixture(scope="session")
def models(request) -> Path:
    return Path(request.config.getoption("--models"))


@pytest.fixture(scope="session")
def dlm_generate(request) -> str:
    return program(request, "dlm-generate")


@pytest.fixture(scope="session")
def dlm_eval(request) -> str:
    return program(request, "dlm-eval")


@pytest.fixture(scope="session")
def dlm_server(request) -> str:
    return program(request, "dlm-server")


@pytest.fixture(scope="session")
def llm(models):
    import dlm
    return dlm.LLM(models / "cdlm")


@pytest.fixture(scope="session")
def diffusion_gemma(request) -> Path:
    folder = request.config.getoption("--diffusion-gemma")
    if not folder or not (Path(folder) / "config.json").is_file():
        pytest.skip("no DiffusionGemma folder (pass --diffusion-gemma DIR)")
    return Path(folder)


@pytest.fixture(scope="session")
def fast_dllm_v2(request) -> Path:
    folder = request.config.getoption("--fast-dllm-v2")
    if not folder or not (Path(folder) / "config.json").is_file():
        pytest.skip("no Fast-dLLM v2 folder (pass --fast-dllm-v2 DIR)")
    return Path(folder)


BOS = "<|pad|>"  # stands for a tokenizer's BOS in the folders below
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def bos_folder(models: Path, folder: Path, template: bool):
    """The shipped cdlm model with a tokenizer whose post-processor opens every text with <|pad|> (as Gemma 4's opens
    it with <bos>), and a ChatML template or none; returns (folder, the id of <|pad|>)."""
    import json
    for f in ("config.json", "model.safetensors"):
        shutil.copy(models / "cdlm" / f, folder / f)
    tok = json.loads((models / "cdlm" / "tokenizer.json").read_text())
    bos = next(t["id"] for t in tok["added_tokens"] if t["content"] == BOS)
    tok["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [], "special_tokens": {BOS: {"id": BOS, "ids": [bos], "tokens": [BOS]}}}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    if template:
        (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML, "eos_token": "<|endoftext|>"}))
    return folder, bos


@pytest.fixture(scope="session")
def bos_chatml(models, tmp_path_factory):
    return bos_folder(models, tmp_path_factory.mktemp("bos_chatml"), True)


@pytest.fixture(scope="session")
def bos_plain(models, tmp_path_factory):
    return bos_folder(models, tmp_path_factory.mktemp("bos_plain"), False)
