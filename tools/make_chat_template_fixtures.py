#!/usr/bin/python3
"""Writes tests/data/chat_templates/: conversations rendered by transformers from the chat templates
the published checkpoints ship, so that tests/test_chat_templates.cpp checks dlm's hand-written formats
(include/dlm/io/chat_template.hpp) against them.

Inputs: one FORMAT=TEMPLATE argument per format, TEMPLATE a chat_template.jinja read from a checkout
outside this repository (nothing of it is committed but the lines named below):
  qwen3=<JetAstra/SDAR>/training/model/SDAR-4B-Chat/chat_template.jinja     (SDAR's chat models: Qwen3's)
  qwen2_5=<Satgoy152/DualDiffusion>/FastDLLM_inferencing/Fast_dLLM_v2_7B/chat_template.jinja
                                                                             (Fast-dLLM v2's: Qwen2.5's)

Per format, FORMAT.json holds:
  source, sha256   the template's path as given and its SHA-256;
  lines            the template's lines that name a chat marker, the default system message or
                   enable_thinking, verbatim (what dlm's detection reads; checked here to be lines of it);
  conversations    {"messages", "add_generation_prompt", "enable_thinking" (absent: not passed), "text"}
                   rendered by transformers' render_jinja_template, as apply_chat_template renders them.

Run: python3 -m venv build/venv-chat && build/venv-chat/bin/pip install transformers jinja2
     build/venv-chat/bin/python tools/make_chat_template_fixtures.py tests/data/chat_templates \\
         qwen3=SDAR/training/model/SDAR-4B-Chat/chat_template.jinja \\
         qwen2_5=DualDiffusion/FastDLLM_inferencing/Fast_dLLM_v2_7B/chat_template.jinja
Deterministic.
"""
import hashlib
import json
import os
import sys

MARKERS = ("<|im_start|>", "<|im_end|>", "enable_thinking", "</think>", "You are a helpful assistant.", "last_query_index",
           "<tool_response>")

BASIC = [
    [{"role": "user", "content": "What is 3 + 4?"}],
    [{"role": "system", "content": "You are a careful assistant."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "2+2 is 4."}, {"role": "user", "content": "And 3+3?"}],
    [{"role": "system", "content": "  Be brief.\n"}, {"role": "user", "content": "\tHi there \u3000"},
     {"role": "assistant", "content": "Hello! \n"}, {"role": "system", "content": "A later system note"},
     {"role": "user", "content": "東京 😀 <|im_end|>"}],
    [{"role": "user", "content": "Count: 1 2 3"}, {"role": "assistant", "content": "4"}],
]

# Qwen3's reasoning rules: <think> split off assistant turns, kept only after the last real query.
REASONING = [
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>\nold thought\n</think>\n\nA1"},
     {"role": "user", "content": "Q2"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>\n\nnew thought\n\n</think>\n\n\nA1\n"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "no thought here"},
     {"role": "assistant", "content": "x<think>a</think>b</think>\nc"}],
    [{"role": "user", "content": "Q1"}, {"role": "user", "content": "<tool_response>\n42\n</tool_response>"},
     {"role": "assistant", "content": "<think>t</think>after the tool"}, {"role": "assistant", "content": "plain"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
     {"role": "assistant", "content": "\n\n</think>\n\nonly a close tag"}],
    [{"role": "tool", "content": "first"}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>r</think>call"},
     {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"}, {"role": "developer", "content": "left out"},
     {"role": "tool", "content": "c"}],
]


def lines_of(template):
    return [line for line in template.split("\n") if any(m in line for m in MARKERS)]


def cases(template, conversations, thinking_values):
    from transformers.utils.chat_template_utils import render_jinja_template
    out = []
    for thinking in thinking_values:
        for messages in conversations:
            for gen in (True, False):
                kwargs = {} if thinking is None else {"enable_thinking": thinking}
                rendered, _ = render_jinja_template([messages], chat_template=template, add_generation_prompt=gen, **kwargs)
                case = {"messages": messages, "add_generation_prompt": gen, "text": rendered[0]}
                if thinking is not None:
                    case["enable_thinking"] = thinking
                out.append(case)
    return out


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    for arg in sys.argv[2:]:
        fmt, path = arg.split("=", 1)
        if fmt not in ("qwen3", "qwen2_5"):
            sys.exit(f"unknown format {fmt!r}: qwen3 or qwen2_5")
        template = open(path, encoding="utf-8").read()
        lines = lines_of(template)
        assert lines and all(line in template.split("\n") for line in lines)
        conversations = BASIC + REASONING  # reasoning is plain content to Qwen2.5's template; tool and developer turns matter to both
        thinking = (None, False, True) if fmt == "qwen3" else (None,)
        data = {"format": fmt, "source": path, "sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
                "lines": lines, "conversations": cases(template, conversations, thinking)}
        with open(os.path.join(folder, fmt + ".json"), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{fmt}: {len(data['conversations'])} conversations, {len(lines)} lines from {path}")


if __name__ == "__main__":
    main()
