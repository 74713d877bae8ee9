#!/usr/bin/python3
"""Renders random and edge-case conversations with each given chat template twice, by transformers
(the reference: render_jinja_template, what apply_chat_template calls) and by dlm's Python package
(LLM.apply_chat_template on a model folder whose chat_template.jinja is that template), and reports
every difference. A template dlm detects as unsupported is only reported as such.

    tools/chat_template_diff.py --hf-python build/venv-chat/bin/python --dlm-python build/venv-python/bin/python \\
        [--model models/cdlm] [--count 20000] [--seed 1] TEMPLATE.jinja ...

The two renderers run in their own interpreters (transformers and the package live in different
venvs: python3 -m venv build/venv-chat && build/venv-chat/bin/pip install transformers jinja2; the
package: tests/python/install_package.sh). The conversations mix system, developer, user, assistant
and tool messages whose contents hold <think>, </think>, <tool_response>, ChatML markers, newlines,
empty strings and non-ASCII text, with and without the generation prompt, enable_thinking unset,
false and true. Exit status 1 when a template dlm writes differs from transformers anywhere.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

ROLES = ["system", "developer", "user", "assistant", "tool"]
PIECES = ["", "\n", "\n\n", " ", "<think>", "</think>", "<tool_response>", "</tool_response>", "hi", "A1", "x", "\t", "東京",
          "😀", "<|im_start|>", "<|im_end|>", "\r\n", "\u3000", "\u0085", "think", "<think>\n", "\n</think>\n\n"]
EDGES = [
    [{"role": "developer", "content": "d"}, {"role": "user", "content": "q"}],
    [{"role": "tool", "content": "t"}],
    [{"role": "user", "content": "q"}, {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"}],
    [{"role": "system", "content": "s"}, {"role": "tool", "content": "a"}],
    [{"role": "assistant", "content": "<think>r</think>c"}],
    [{"role": "user", "content": "<tool_response></tool_response>"}, {"role": "assistant", "content": "<think>r</think>c"}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
    [{"role": "system", "content": "s"}, {"role": "system", "content": "s2"}, {"role": "user", "content": "q"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think></think>"}, {"role": "assistant", "content": "x"}],
]


def conversations(seed, count):
    rng = random.Random(seed)
    out = [{"messages": m, "gen": g, "think": t} for m in EDGES for g in (True, False) for t in (None, False, True)]
    while len(out) < count:
        weights = rng.choice([[1, 1, 3, 3, 2], [2, 0, 3, 3, 0], [1, 1, 2, 2, 3]])
        messages = [{"role": rng.choices(ROLES, weights)[0], "content": "".join(rng.choice(PIECES) for _ in range(rng.choice([0, 1, 2, 4])))}
                    for _ in range(rng.choice([1, 2, 3, 4, 5, 7]))]
        out.append({"messages": messages, "gen": rng.random() < 0.6, "think": rng.choice([None, False, True])})
    return out


def render_hf(template_path, cases_path, out_path):
    from transformers.utils.chat_template_utils import render_jinja_template
    template = open(template_path, encoding="utf-8").read()
    out = []
    for c in json.load(open(cases_path, encoding="utf-8")):
        kwargs = {} if c["think"] is None else {"enable_thinking": c["think"]}
        try:
            out.append({"ok": render_jinja_template([c["messages"]], chat_template=template, add_generation_prompt=c["gen"], **kwargs)[0][0]})
        except Exception as e:  # the reference refuses some conversations (an empty one, ...)
            out.append({"err": type(e).__name__})
    json.dump(out, open(out_path, "w", encoding="utf-8"), ensure_ascii=False)


def render_dlm(folder, cases_path, out_path):
    import dlm
    llm = dlm.LLM(folder, threads=1)
    fmt = llm.model.chat_template
    out = []
    if fmt != "unsupported":
        for c in json.load(open(cases_path, encoding="utf-8")):
            try:
                out.append({"ok": llm.apply_chat_template(c["messages"], c["gen"], c["think"])})
            except dlm.InvalidParameter as e:
                out.append({"err": e.parameter})
    json.dump({"format": fmt, "renderings": out}, open(out_path, "w", encoding="utf-8"), ensure_ascii=False)


def folder_with(model, template_path, where):
    os.makedirs(where)
    for name in os.listdir(model):
        if name not in ("chat_template.jinja", "tokenizer_config.json", "chat_template.json"):
            os.symlink(os.path.abspath(os.path.join(model, name)), os.path.join(where, name))
    with open(os.path.join(where, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(open(template_path, encoding="utf-8").read())
    return where


def compare(name, cases, hf, dlm_out):
    fmt, mine = dlm_out["format"], dlm_out["renderings"]
    if fmt == "unsupported":
        print(f"{name}: unsupported (dlm refuses a chat prompt for it)")
        return 0
    differ, both_refused = [], 0
    for c, h, d in zip(cases, hf, mine):
        if "err" in h and "err" in d:
            both_refused += 1
        elif h != d and not ("err" in h and "ok" in d and not c["messages"]):  # dlm writes an empty conversation's prompt
            differ.append((c, h, d))
    print(f"{name}: {fmt}, {len(cases)} conversations, {len(differ)} differ, {both_refused} refused by both")
    for c, h, d in differ[:3]:
        print("  " + json.dumps(c, ensure_ascii=False) + f"\n    transformers: {h}\n    dlm:          {d}")
    return len(differ)


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--render-hf", "--render-dlm"):
        (render_hf if sys.argv[1] == "--render-hf" else render_dlm)(*sys.argv[2:5])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("templates", nargs="+")
    p.add_argument("--hf-python", required=True, help="a Python with transformers and jinja2")
    p.add_argument("--dlm-python", required=True, help="a Python with dlm's package")
    p.add_argument("--model", default="models/cdlm", help="a model folder the package loads (its weights are not used)")
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    cases = conversations(args.seed, args.count)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases_path = os.path.join(tmp, "cases.json")
        json.dump(cases, open(cases_path, "w", encoding="utf-8"), ensure_ascii=False)
        for i, template in enumerate(args.templates):
            folder = folder_with(args.model, template, os.path.join(tmp, f"model{i}"))
            hf_path, dlm_path = os.path.join(tmp, f"hf{i}.json"), os.path.join(tmp, f"dlm{i}.json")
            subprocess.run([args.hf_python, __file__, "--render-hf", template, cases_path, hf_path], check=True,
                           env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"}, stderr=subprocess.DEVNULL)
            subprocess.run([args.dlm_python, __file__, "--render-dlm", folder, cases_path, dlm_path], check=True)
            failed += compare(template, cases, json.load(open(hf_path, encoding="utf-8")),
                              json.load(open(dlm_path, encoding="utf-8")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
