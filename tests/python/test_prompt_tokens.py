"""Which special tokens a prompt gets (docs/models.md, "Prompt tokens"): a plain prompt the tokenizer's own (what its
post-processor adds, as Gemma 4's tokenizer adds <bos>), a templated chat prompt none (its template writes its own), in
Python, dlm-generate and dlm-server alike. The folders (conftest.py's bos_chatml, bos_plain) are the shipped cdlm model
with a tokenizer whose post-processor opens every text with <|pad|>, standing for a BOS, with a ChatML template or none."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import dlm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))
from harness import Server  # noqa: E402  (starts and stops dlm-server on a free port)

# A prompt whose answer <|pad|> in front changes (so an answer shows which tokens the prompt had).
PROMPT = "Lily has 34 dollars. She pays Mia 11 dollars. Then her money doubles. She earns 15 dollars. How much money does she have now?"


def test_a_plain_prompt_gets_the_tokenizers_own_tokens_and_a_templated_one_none(bos_chatml, models):
    d, bos = bos_chatml
    llm, plain = dlm.LLM(d), dlm.LLM(models / "cdlm").encode(PROMPT)
    assert llm.encode(PROMPT) == [bos] + plain
    assert llm.encode(PROMPT, special=False) == plain
    chat = llm.encode(PROMPT, chat=True)
    assert bos not in chat and chat == llm.encode(llm.apply_chat_template([{"role": "user", "content": PROMPT}]), special=False)
    assert llm.encode(PROMPT, chat=True, special=True) == [bos] + chat
    assert llm.chat([{"role": "user", "content": PROMPT}])[0].tokens.tolist() == llm.generate(PROMPT, chat=True)[0].tokens.tolist()
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.encode(PROMPT, special="yes")
    assert e.value.parameter == "special"


def test_dlm_generate_and_dlm_server_tokenize_a_prompt_as_python_does(bos_chatml, dlm_generate, dlm_server):
    d, _ = bos_chatml
    llm = dlm.LLM(d)
    want = llm.generate(PROMPT)[0].text
    without = llm.generate(llm.encode(PROMPT, special=False))[0].text
    assert want != without, "the added token does not change the answer here, so this test cannot see it"
    p = subprocess.run([dlm_generate, "-m", str(d), "-t", "1", "-p", PROMPT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout[:-1] == want, p.stderr
    with Server(dlm_server, str(d)) as s:
        st, _, text = s.post("/v1/completions", {"prompt": PROMPT})
        got = json.loads(text)
        assert st == 200 and got["choices"][0]["text"] == want and got["usage"]["prompt_tokens"] == len(llm.encode(PROMPT)), text
        st, _, text = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": PROMPT}]})
        got = json.loads(text)
        assert st == 200 and got["usage"]["prompt_tokens"] == len(llm.encode(PROMPT, chat=True)), text


def test_a_folder_without_a_template_writes_a_chat_prompt_as_a_plain_one_everywhere(bos_plain):
    d, bos = bos_plain
    llm = dlm.LLM(d)
    chat = llm.encode(PROMPT, chat=True)
    assert chat == llm.encode(PROMPT) and chat[0] == bos
    conversation = [{"role": "user", "content": PROMPT}]
    assert llm.chat(conversation)[0].tokens.tolist() == llm.generate(PROMPT, chat=True)[0].tokens.tolist()
    assert llm.chat(conversation)[0].prompt_tokens.tolist() == chat
