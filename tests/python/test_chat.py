"""Chat prompts from Python: LLM.apply_chat_template renders a conversation as transformers renders the
published template (SDAR's, Qwen3's: tests/data/chat_templates, tools/make_chat_template_fixtures.py),
LLM.chat decodes conversations as generate() decodes their prompts, enable_thinking's three states, and
the refusals: a template dlm does not write, and malformed messages, named as Python spells them."""

import json

import pytest

import dlm
from conftest import ROOT

FIXTURES = ROOT / "tests" / "data" / "chat_templates"
LING_TEMPLATE = ("{%- for message in messages %}{{- '<role>HUMAN</role>' + message.content + '<|role_end|>' }}{%- endfor %}"
                 "{{- '<role>ASSISTANT</role>' }}")
QUESTION = "What is 3 + 4?"
FLAGS = dict(gen_length=16, block_length=8, seed=3)


def _folder(models, tmp_path, template):
    """The shipped cdlm student with `template` as its chat_template.jinja."""
    for f in (models / "cdlm").iterdir():
        (tmp_path / f.name).symlink_to(f.resolve())
    (tmp_path / "chat_template.jinja").write_text(template)
    return dlm.LLM(tmp_path, threads=1)


@pytest.fixture(scope="module")
def qwen3(models, tmp_path_factory):
    """A folder whose template is SDAR's own marker lines (what dlm's detection reads)."""
    lines = json.loads((FIXTURES / "qwen3.json").read_text())["lines"]
    return _folder(models, tmp_path_factory.mktemp("qwen3"), "\n".join(lines) + "\n")


def test_apply_chat_template_renders_every_conversation_as_transformers_renders_sdars_template(qwen3):
    assert qwen3.model.chat_template == "qwen3"
    cases = json.loads((FIXTURES / "qwen3.json").read_text())["conversations"]
    for c in cases:
        got = qwen3.apply_chat_template(c["messages"], c["add_generation_prompt"], c.get("enable_thinking"))
        assert got == c["text"], c
    assert {c.get("enable_thinking") for c in cases} == {None, False, True}


def test_chat_decodes_a_conversation_as_generate_decodes_its_prompt(qwen3):
    one = [{"role": "user", "content": QUESTION}]
    assert qwen3.chat(one, **FLAGS)[0].text == qwen3.generate(QUESTION, chat=True, **FLAGS)[0].text
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "<think>greeting</think>Hello."}, {"role": "user", "content": QUESTION}]
    ids = qwen3.encode(qwen3.apply_chat_template(turns, think=False))
    batch = qwen3.chat([turns, one], think=False, **FLAGS)
    assert batch[0].tokens.tolist() == qwen3.generate(ids, **FLAGS)[0].tokens.tolist()
    assert batch[0].prompt_tokens.tolist() == ids


def test_think_false_is_qwen3s_empty_thought_and_none_the_templates_default(qwen3):
    unset, on, off = (qwen3.encode("Hi", chat=True, think=t) for t in (None, True, False))
    assert unset == on
    assert qwen3.decode(off, False) == qwen3.decode(unset, False) + "<think>\n\n</think>\n\n"
    for kwargs in (dict(chat=True, think="no"), dict(think=False), dict(think=True)):  # a bool, and with chat=True only
        with pytest.raises(dlm.InvalidParameter) as e:
            qwen3.encode("Hi", **kwargs)
        assert e.value.parameter == "think"
    with pytest.raises(dlm.InvalidParameter) as e:  # chat() writes the template itself
        qwen3.chat([{"role": "user", "content": "Hi"}], chat=True)
    assert e.value.parameter == "chat"


def test_a_chat_template_dlm_does_not_write_is_refused_by_name(models, tmp_path):
    llm = _folder(models, tmp_path, LING_TEMPLATE)
    assert llm.model.chat_template == "unsupported" and llm.model.has_chat_template
    one = [{"role": "user", "content": QUESTION}]
    for call, name in ((lambda: llm.generate(QUESTION, chat=True), "chat"), (lambda: llm.encode(QUESTION, chat=True), "chat"),
                       (lambda: llm.engine().add(QUESTION, chat=True), "chat"), (lambda: llm.chat(one), "messages"),
                       (lambda: llm.apply_chat_template(one), "messages")):
        with pytest.raises(dlm.InvalidParameter) as e:
            call()
        assert e.value.parameter == name and "not one dlm writes" in e.value.rule
    plain = dlm.LLM(models / "cdlm", threads=1)  # the plain path is unchanged by the template
    assert llm.generate(QUESTION, **FLAGS)[0].text == plain.generate(QUESTION, **FLAGS)[0].text


@pytest.mark.parametrize("messages, name", [
    ("Hi", "messages"),
    ([], "messages"),
    ([{"role": "user", "content": "Hi"}, "Hi"], "messages[1]"),
    ([{"role": "user"}], "messages[0].content"),
    ([{"content": "Hi"}], "messages[0].role"),
    ([{"role": "user", "content": 3}], "messages[0].content"),
    ([{"role": "narrator", "content": "Hi"}], "messages[0].role"),
    ([{"role": "assistant", "content": "A", "reasoning_content": "r"}], "messages[0].reasoning_content"),
    ([[{"role": "user", "content": "Hi"}], [{"role": 1, "content": "Hi"}]], "messages[1][0].role"),
])
def test_malformed_messages_are_refused_naming_the_field(qwen3, messages, name):
    with pytest.raises(dlm.InvalidParameter) as e:
        qwen3.chat(messages, **FLAGS)
    assert e.value.parameter == name
