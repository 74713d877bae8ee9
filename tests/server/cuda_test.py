#!/usr/bin/env python3
"""dlm-server --device cuda with real clients on 127.0.0.1 (tests/server.cmake).

On a machine with a GPU and a dlm-server built with CUDA: the server loads the model onto the GPU and
answers through the same engine and scheduler as on the CPU. For a preset with a device step (cdlm:
sampling and selection on the GPU) and one without (sdar: the GPU model's logits sampled on
the host): requests sent one at a time get the same answer each time, a streamed answer's deltas make
the answer the same request gets whole, eight concurrent requests are all answered with a finish
reason, and /metrics counts them. (Concurrent answers equal to lone ones are printed, not required: on
the GPU a sequence's logits may change in their last bits with the batch, docs/determinism.md.)
Elsewhere it exits 77 (skipped), saying why: a dlm-server built without CUDA, or no usable GPU.
Exit status 0 pass, 1 fail, 77 skipped.
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client_test import Server, check, sse_texts  # noqa: E402

PROMPTS = ["Tom has 3 apples. He buys 4 more. How many apples does he have now?",
           "Kim fills 5 boxes with 3 muffins each. She bakes 18 more. How many muffins does Kim have now?",
           "Ann has 8 cups. She breaks 3. How many cups does she have now?",
           "Joe has 4 bags. He buys 4 more. How many bags does he have now?"]


def skip_reason(server, model):
    """Why --device cuda cannot run here (None when it can): starts it once and reads how it ends."""
    p = subprocess.Popen([server, "-m", model, "--port", "0", "-t", "1", "--device", "cuda"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = ""
    for line in p.stdout:
        seen += line
        if "listening on" in line:
            p.terminate()
            p.wait(timeout=30)
            return None
    p.wait(timeout=30)
    if "built without CUDA" in seen:
        return "this dlm-server was built without CUDA"
    if "CUDA" in seen or "cuda" in seen:
        return "no usable GPU: " + seen.strip().splitlines()[-1]
    raise SystemExit(f"FAIL: dlm-server --device cuda ended without serving and without a CUDA reason:\n{seen}")


def complete(s, prompt):
    """The answer's text and finish reason."""
    status, _, text = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 32}, timeout=120)
    check(status == 200, f"status {status}: {text}")
    choice = json.loads(text)["choices"][0]
    check(choice.get("finish_reason") in ("stop", "length"), f"no finish reason in {text}")
    return choice["text"]


def check_preset(server, model, preset, device):
    with Server(server, model, "--device", device, "--preset", preset, "--parallel", "8") as s:
        alone = [complete(s, p) for p in PROMPTS]
        check([complete(s, p) for p in PROMPTS] == alone, f"{preset}: the same lone requests answered differently")
        check(any(a.strip() for a in alone), f"{preset}: every answer is empty")
        status, _, raw = s.post("/v1/completions", {"prompt": PROMPTS[1], "max_tokens": 32, "stream": True}, timeout=120)
        check(status == 200, f"{preset}: streamed status {status}")
        check(sse_texts(raw)[0] == alone[1], f"{preset}: the streamed deltas do not make the whole answer")
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda i: complete(s, PROMPTS[i % len(PROMPTS)]), range(8)))
        same = sum(text == alone[i % len(PROMPTS)] for i, text in enumerate(together))
        _, _, metrics = s.request("GET", "/metrics")
        served = sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("vllm:request_success_total{"))
        check(served >= 17, f"{preset}: /metrics counted {served} finished requests of 17")
    print(f"{preset}: 17 requests on the {device}; {same} of 8 concurrent answers equal to the lone ones")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda", help="cuda (the test); cpu runs the same checks on the CPU, as a control")
    args = ap.parse_args()
    why = skip_reason(args.server, args.model) if args.device == "cuda" else None
    if why:
        print(f"skipped: {why}")
        sys.exit(77)
    for preset in ("cdlm", "sdar"):
        check_preset(args.server, args.model, preset, args.device)


if __name__ == "__main__":
    main()
