#!/usr/bin/python3
"""Train the autoregressive baseline: the teacher's architecture and size, causal attention,
next-token cross-entropy on the answer and its EOS (the prompt is context only). Exported in
Qwen2ForCausalLM's layout (zero q/k/v biases), which dlm reads as an autoregressive model.
Evaluation: greedy decoding until EOS.

    /usr/bin/python3 tools/train/train_ar.py                           # exports models/ar
    /usr/bin/python3 tools/train/train_ar.py --steps 20 --out /tmp/smoke-models/ar   # smoke
"""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import common as C
import model as M


def main(argv: list[str] | None = None) -> int:
    r = C.from_scratch("ar", __doc__, argv)
    args, device, sp, model, pool = r.args, r.device, r.sp, r.model, r.pool
    sampler = C.BatchSampler([len(p) + len(a) for p, a in zip(pool.prompts, pool.answers)], args.batch, args.bucket)
    evaluate = C.evaluator(model, r.val, r.tok, sp, args, device, kind="ar")

    def step_loss(step: int):
        cv = C.ar_canvas(pool, sampler(), sp).to(device)
        L = cv.tokens.shape[1]
        allowed = M.attention_mask("causal", cv.prompt_len, cv.valid_len, L)
        # row p predicts token p + 1: select the rows before each answer token
        target = torch.zeros_like(cv.slots)
        target[:, :-1] = cv.slots[:, 1:]
        logits = model(cv.tokens, allowed, select=target)
        loss = F.cross_entropy(logits.float(), cv.tokens[:, 1:][target[:, :-1]])
        return loss, {"loss": loss.item()}

    final = C.train_loop(model, r.opt, r.run, args, step_loss, evaluate)
    C.finish(model, args, r.run, "qwen2", {}, final, "ar")
    return 0


if __name__ == "__main__":
    sys.exit(main())
