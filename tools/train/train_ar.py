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
import time

import torch
import torch.nn.functional as F

import common as C
import decode
import model as M


def main(argv: list[str] | None = None) -> int:
    ap = C.base_parser("ar", __doc__, steps=4000, batch=128, lr=2e-3)
    C.add_model_args(ap)
    args = ap.parse_args(argv)
    device = C.setup(args)
    tok, sp = C.load_tokenizer(args.tokenizer)
    model = M.Transformer(C.model_config(args, C.embedding_rows(tok))).to(device)
    print(f"[ar] {model.n_params():,} parameters, {model.c}", flush=True)
    pool = C.train_pool(args.train_problems, tok)
    val = C.val_set(tok, max(args.eval_n, args.final_eval_n))
    opt = C.make_optimizer(model, args)
    run = C.Run(args, "ar")
    sampler = C.BatchSampler([len(p) + len(a) for p, a in zip(pool.prompts, pool.answers)], args.batch, args.bucket)

    def evaluate(n: int):
        t0 = time.time()
        res = decode.evaluate(model, C.Problems(val.raw[:n], tok), tok, sp, kind="ar", gen_length=args.gen_length,
                              batch=args.eval_batch, device=device)
        model.train()
        return res, time.time() - t0

    model.train()
    step = 0
    while step < run.total:
        lr = run.set_lr(opt, step)
        cv = C.ar_canvas(pool, sampler(), sp).to(device)
        L = cv.tokens.shape[1]
        allowed = M.attention_mask("causal", cv.prompt_len, cv.valid_len, L)
        # row p predicts token p + 1: select the rows before each answer token
        target = torch.zeros_like(cv.slots)
        target[:, :-1] = cv.slots[:, 1:]
        logits = model(cv.tokens, allowed, select=target)
        loss = F.cross_entropy(logits.float(), cv.tokens[:, 1:][target[:, :-1]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        run.end_step(step, lr, {"loss": loss.item()})
        if run.due_eval(step):
            res, secs = evaluate(args.eval_n)
            run.record_eval(step, res, secs)
        step += 1
    final, secs = evaluate(args.final_eval_n)
    run.record_eval(step - 1, final, secs)
    C.finish(model, args, run, "qwen2", {}, final, "ar")
    return 0


if __name__ == "__main__":
    sys.exit(main())
