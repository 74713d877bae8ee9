"""lm-evaluation-harness, offline, on the first rows of the shipped test set (tools/lm_eval/dlm_gsm_synth.yaml):
its `dlm` model (python -m dlm.harness) and its own local-completions model against dlm-server both
score the rows as dlm-eval scores them; the dlm model's log-likelihood is LLaDA's Monte Carlo estimate, and it
decodes a DiffusionGemma folder in Gemma 4's thinking mode as dlm-generate does."""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed in this venv (tests/python.cmake installs it)")

ROOT = Path(__file__).resolve().parents[2]
ROWS = 40
OFFLINE = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
sys.path.insert(0, str(ROOT / "tests" / "server"))
from client_test import Server  # noqa: E402  (starts and stops dlm-server on a free port)


def dlm_eval_correct(dlm_eval, model, tmp_path):
    out = tmp_path / "dlm-eval.json"
    subprocess.run([dlm_eval, "-m", str(model), "--limit", str(ROWS), "--no-progress", "--json", str(out)], check=True,
                   capture_output=True, timeout=240)
    figures = json.loads(out.read_text())
    assert figures["problems"] == ROWS
    return figures["correct"]


def harness(tmp_path, *args):
    """Runs the harness's command line on the task for the first ROWS rows; the task's accuracy."""
    out = tmp_path / "lm-eval"
    p = subprocess.run([sys.executable, *args, "--include_path", str(ROOT / "tools" / "lm_eval"), "--tasks", "dlm_gsm_synth",
                        "--limit", str(ROWS), "--output_path", str(out)], cwd=ROOT, env=OFFLINE, capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = glob.glob(str(out / "**" / "results*.json"), recursive=True)
    assert len(results) == 1, results
    return json.loads(Path(results[0]).read_text())["results"]["dlm_gsm_synth"]["acc,none"]


def test_the_dlm_model_scores_as_dlm_eval(models, dlm_eval, tmp_path):
    correct = dlm_eval_correct(dlm_eval, models / "cdlm", tmp_path)
    acc = harness(tmp_path, "-m", "dlm.harness", "run", "--model", "dlm", "--model_args", f"pretrained={models / 'cdlm'},preset=cdlm")
    assert round(acc * ROWS) == correct and 0 < correct < ROWS


def test_local_completions_through_dlm_server_scores_as_dlm_eval(models, dlm_eval, dlm_server, tmp_path):
    correct = dlm_eval_correct(dlm_eval, models / "cdlm", tmp_path)
    with Server(dlm_server, str(models / "cdlm")) as s:
        acc = harness(tmp_path, "-m", "lm_eval", "run", "--model", "local-completions", "--model_args",
                      f"model=cdlm,base_url={s.url}/v1/completions,tokenizer_backend=None,tokenized_requests=False,num_concurrent=1,max_retries=1")
    assert round(acc * ROWS) == correct and 0 < correct < ROWS


class _Request:
    def __init__(self, *args):
        self.args = args


def test_loglikelihood(models):
    from dlm.harness import HarnessModel
    model = HarnessModel(pretrained=str(models / "cdlm"), mc_num=32, mc_batch=8)
    q = "There are 8 cups with 5 marbles in each. How many marbles are there now?"
    right, wrong = model.loglikelihood([_Request(q, "8 x 5 = 40\n#### 40"), _Request(q, "8 x 5 = 13\n#### 13")])
    assert right[0] > wrong[0], "the model's own answer is the likelier one"
    assert right[0] < 0 and isinstance(right[1], bool)
    again = model.loglikelihood([_Request(q, "8 x 5 = 40\n#### 40")])
    assert again[0][0] == right[0], "seeded: the same estimate"
    with pytest.raises(NotImplementedError, match="loglikelihood_rolling"):
        model.loglikelihood_rolling([_Request("text")])


def test_an_empty_context_conditions_on_the_end_of_text_token_as_lm_evals_hflm_does(fast_dllm_v2):
    # lm-eval's HFLM conditions an empty context on one token (its prefix_token_id: BOS, else EOS), so
    # that a shifted model (Fast-dLLM v2 predicts slot p from row p - 1) has a row for the first
    # continuation token; without it, row -1 would wrap to the canvas's last row.
    from dlm.harness import HarnessModel
    model = HarnessModel(pretrained=str(fast_dllm_v2), mc_num=4, mc_batch=2)
    assert model.llm.model.logits_shift
    eot = model.llm.model.eos_ids[0]
    assert model.prefix_token_id == eot
    continuation = "What is 3 + 4?"
    prefix, target = model._encode_pair("", continuation)
    assert prefix == [eot] and target.tolist() == model.llm.encode(continuation)
    canvases = []
    forward = model.llm.forward
    model.llm.forward = lambda tokens, mask="bidirectional": canvases.append(list(tokens)) or forward(tokens, mask)
    (ll, greedy), = model.loglikelihood([_Request("", continuation)])
    assert canvases and all(c[0] == eot and len(c) == 1 + len(target) for c in canvases)
    assert ll < 0 and isinstance(greedy, bool)


def test_the_dlm_model_decodes_diffusion_gemma_with_thinking_as_dlm_generate(diffusion_gemma, dlm_generate):
    import dlm
    from dlm.harness import HarnessModel
    prompt, flags = "Tom has 3 apples", dict(gen_length=32, steps=6, seed=5)

    def cli(*extra):
        p = subprocess.run([dlm_generate, "-m", str(diffusion_gemma), "-p", prompt, "-n", "32", "--steps", "6", "--seed", "5", "--chat",
                            *extra], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stdout[:-1]

    thinking = HarnessModel(pretrained=str(diffusion_gemma), chat=True, think=True, **flags)
    plain = HarnessModel(pretrained=str(diffusion_gemma), chat=True, **flags)
    request = _Request(prompt, {"until": []})
    assert thinking.generate_until([request]) == [cli("--think")]
    assert plain.generate_until([request]) == [cli()] != [cli("--think")]
    with pytest.raises(dlm.InvalidParameter) as e:  # think without chat=True or --apply_chat_template
        HarnessModel(pretrained=str(diffusion_gemma), think=True, **flags).generate_until([request])
    assert e.value.parameter == "think"
    with pytest.raises(NotImplementedError, match="uniform-state"):
        thinking.loglikelihood([_Request(prompt, " 4")])


def _chat_folder(models, tmp_path):
    """The shipped cdlm student with SDAR's (Qwen3's) template lines as its chat template."""
    folder = tmp_path / "cdlm-qwen3"
    folder.mkdir()
    for f in (models / "cdlm").iterdir():
        (folder / f.name).symlink_to(f.resolve())
    lines = json.loads((ROOT / "tests" / "data" / "chat_templates" / "qwen3.json").read_text())["lines"]
    (folder / "chat_template.jinja").write_text("\n".join(lines) + "\n")
    return folder


def test_apply_chat_template_writes_the_prompts_dlm_eval_chat_writes(models, dlm_eval, tmp_path):
    import dlm
    from dlm.harness import HarnessModel
    folder = _chat_folder(models, tmp_path)
    out = tmp_path / "dlm-eval-chat.json"
    subprocess.run([dlm_eval, "-m", str(folder), "--limit", str(ROWS), "--no-progress", "--chat", "--json", str(out)], check=True,
                   capture_output=True, timeout=240)
    correct = json.loads(out.read_text())["correct"]
    acc = harness(tmp_path, "-m", "dlm.harness", "run", "--model", "dlm", "--model_args", f"pretrained={folder},preset=cdlm",
                  "--apply_chat_template", "--log_samples")
    assert round(acc * ROWS) == correct
    samples = glob.glob(str(tmp_path / "lm-eval" / "**" / "samples_dlm_gsm_synth*.jsonl"), recursive=True)
    first = json.loads(Path(samples[0]).read_text().splitlines()[0])
    assert first["arguments"]["gen_args_0"]["arg_0"].startswith("<|im_start|>user\n"), first["arguments"]
    model = HarnessModel(pretrained=str(folder), think=False, gen_length=16, block_length=8)
    history = [{"role": "user", "content": "Q"}]
    context = model.apply_chat_template(history)
    assert context == "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    answer = model.generate_until([_Request(context, {"until": []})])  # the context is the template's text already
    assert answer == [model.llm.generate(model.llm.encode(context), "cdlm", gen_length=16, block_length=8, seed=0)[0].text]
    assert model.chat_template(True) == "qwen3" and model.tokenizer_name == "cdlm-qwen3__qwen3"
    with pytest.raises(dlm.InvalidParameter) as e:  # chat=True and --apply_chat_template would wrap twice
        HarnessModel(pretrained=str(folder), chat=True).apply_chat_template(history)
    assert e.value.parameter == "chat"


def test_contexts_and_continuations_split_as_lm_eval_splits_them(models):
    """The harness model's split is lm-eval's own (TemplateLM._encode_pair, run with the model's tokenizer):
    trailing whitespace of the context moves to the continuation."""
    from types import SimpleNamespace

    from lm_eval.api.model import TemplateLM

    from dlm.harness import HarnessModel

    m = HarnessModel(pretrained=str(models / "teacher"), preset="llada")
    ref = SimpleNamespace(backend="causal", tok_encode=lambda s, **kw: m.llm.encode(s))
    pairs = [("Question: 2+2?\nAnswer:", " 4"), ("Question: 2+2?\nAnswer: ", "4"), ("Question: 2+2?\nAnswer:\n", "4"),
             ("Q: hi\n\n", "A: yes"), ("Tom has 3 apples.", " He buys 4 more.")]
    for context, continuation in pairs:
        want_context, want_target = TemplateLM._encode_pair(ref, context, continuation)
        got_context, got_target = m._encode_pair(context, continuation)
        assert list(got_context) == list(want_context) and list(got_target) == list(want_target), (context, continuation)
    assert m.llm.decode(m._encode_pair("Answer: ", "4")[1].tolist()) == " 4"


def test_an_overlong_context_is_cut_from_the_left_as_hflm_cuts_it_and_an_empty_one_is_decoded(models):
    """generate_until keeps a context's last tokens beside the generation length (an empty context is the
    end-of-text token); loglikelihood keeps the last context tokens beside the continuation. Nothing aborts the run."""
    from types import SimpleNamespace

    from dlm.harness import HarnessModel

    m = HarnessModel(pretrained=str(models / "cdlm"), preset="cdlm")
    context = "Tom has 3 apples. " * 40 + "He buys 4 more. How many apples does he have now?"
    room = m.llm.model.max_context - m.llm.settings("cdlm").gen_length
    ids = m.llm.encode(context)
    assert len(ids) > room
    texts = m.generate_until([SimpleNamespace(args=(c, {"until": ["\n\n"]})) for c in (context, "", "What is 3 + 4?")])
    assert texts[0] == m.llm.generate(ids[-room:])[0].text.split("\n\n")[0]
    assert texts[1] == m.llm.generate([m.prefix_token_id])[0].text.split("\n\n")[0]
    assert texts[2] == m.llm.generate("What is 3 + 4?")[0].text.split("\n\n")[0]
    (ll, _), = m.loglikelihood([SimpleNamespace(args=(context, " 7"))])
    assert np.isfinite(ll) and ll < 0
    with pytest.raises(ValueError, match="loglikelihood request 0: its continuation of"):
        m.loglikelihood([SimpleNamespace(args=("Q:", " 7" * 200))])


def test_model_args_are_read_strictly_and_a_mask_token_in_scored_text_is_refused(models):
    from types import SimpleNamespace

    import dlm
    from dlm.harness import HarnessModel

    for kwargs, name in ((dict(chat="no"), "chat"), (dict(think="off"), "think"), (dict(seed=1.5), "seed"), (dict(mc_num="x"), "mc_num"),
                         (dict(mc_num=30, mc_batch=8), "mc_num"), (dict(mc_batch=0), "mc_batch"), (dict(batch_size="x"), "batch_size"),
                         (dict(batch_size=0), "batch_size")):
        with pytest.raises(dlm.InvalidParameter) as e:
            HarnessModel(pretrained=str(models / "cdlm"), preset="cdlm", **kwargs)
        assert e.value.parameter == name
    assert HarnessModel(pretrained=str(models / "cdlm"), preset="cdlm", batch_size="auto:4").batch == 1  # lm-eval's GPU search
    assert HarnessModel(pretrained=str(models / "cdlm"), preset="cdlm", batch_size="8").batch == 8
    m = HarnessModel(pretrained=str(models / "teacher"), preset="llada", chat=False, seed=3)
    with pytest.raises(ValueError, match="request 0: its text holds the mask token"):
        m.loglikelihood([SimpleNamespace(args=("Q: 3 + 4 =", " <|mdm_mask|>"))])


def test_an_empty_context_is_conditioned_on_the_tokenizers_bos_and_the_continuation_gets_no_added_tokens(bos_plain):
    """As lm-eval's HFLM: prefix_token_id is the BOS the tokenizer puts in front of a text; the continuation of an empty
    context is encoded without it (add_special_tokens=False); a chat context of a folder without a template is plain."""
    from dlm.harness import HarnessModel

    d, bos = bos_plain
    m = HarnessModel(pretrained=str(d), preset="cdlm")
    assert m.prefix_token_id == bos
    prefix, target = m._encode_pair("", "hello there")
    assert prefix == [bos] and target.tolist() == m.llm.encode("hello there", special=False)
    chat = HarnessModel(pretrained=str(d), preset="cdlm", chat=True)
    text = chat.llm.apply_chat_template([{"role": "user", "content": "Q?"}])
    assert chat._encode(text) == chat.llm.encode("Q?", chat=True) == [bos] + chat.llm.encode("Q?", special=False)
