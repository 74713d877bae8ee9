#!/usr/bin/env python3
"""dlm-server's prompt cache (--prompt-cache) with a real client on 127.0.0.1 (tests/server.cmake).

The autoregressive model answers 12 requests that share a few-shot prefix longer than a cache block (32
tokens), one at a time, on a server with the cache and on one without: every answer must be the same
(the cache reuses exact K/V), the cached server's /metrics must count hit tokens (vLLM's
vllm:prefix_cache_hits_total and dlm's own) and the bytes it holds within its bound; and a preset whose
K/V are not exact (llada) must refuse the flag at start, naming it. Exit status 0 pass, 1 fail.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client_test import Server, check  # noqa: E402

PREFIX = ("Tom has 3 apples. He buys 4 more. How many apples does he have now?\n3 + 4 = 7\n#### 7\n"
          "Kim has 9 pens. She gives away 2. How many pens does she have now?\n9 - 2 = 7\n#### 7\n")
QUESTIONS = ["Sam has 5 cards. He gets 6 more. How many cards does he have now?",
             "Ann has 8 cups. She breaks 3. How many cups does she have now?",
             "Joe has 4 bags. He buys 4 more. How many bags does he have now?"]


def answers(server, model, *flags):
    out, metrics = [], ""
    with Server(server, model, *flags) as s:
        for i in range(12):
            st, _, text = s.post("/v1/completions", {"prompt": PREFIX + QUESTIONS[i % 3], "max_tokens": 16})
            check(st == 200, f"request {i}: status {st}: {text[:300]}")
            out.append(json.loads(text)["choices"][0]["text"])
        _, _, metrics = s.request("GET", "/metrics")
    return out, metrics


def value(metrics, name):
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", metrics, re.M)
    return float(m.group(1)) if m else None


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True, help="an autoregressive model folder (models/ar)")
    args = p.parse_args()
    plain, plain_metrics = answers(args.server, args.model)
    cached, metrics = answers(args.server, args.model, "--prompt-cache", "4")
    check(cached == plain, f"answers differ with the prompt cache: {cached} against {plain}")
    check(value(plain_metrics, "vllm:prefix_cache_hits_total") is None, "a server without the cache reports prefix cache metrics")
    hits, queries = value(metrics, "vllm:prefix_cache_hits_total"), value(metrics, "vllm:prefix_cache_queries_total")
    check(hits is not None and hits >= 11 * 32, f"vllm:prefix_cache_hits_total is {hits}: the shared prefix was not reused")
    check(queries is not None and queries > hits, f"vllm:prefix_cache_queries_total {queries} against hits {hits}")
    check(value(metrics, "dlm_prompt_cache_hit_tokens_total") == hits, "dlm's hit counter disagrees with vLLM's")
    held, bound = value(metrics, "dlm_prompt_cache_bytes"), value(metrics, "dlm_prompt_cache_capacity_bytes")
    check(bound == 4 << 20 and held is not None and 0 < held <= bound, f"the cache holds {held} bytes of {bound}")
    r = subprocess.run([args.server, "-m", args.model, "--port", "0", "--preset", "llada", "--block-length", "8", "--prompt-cache", "4"], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 2 and "--prompt-cache" in r.stderr and "prompt_cache_bytes" in r.stderr,
          f"llada with --prompt-cache: status {r.returncode}, {r.stderr[-400:]}")
    print(f"prompt cache: 12 answers identical with and without it, {hits:.0f} of {queries:.0f} prompt tokens reused, "
          f"{held:.0f} bytes held of {bound:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
