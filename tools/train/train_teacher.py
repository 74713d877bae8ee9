#!/usr/bin/python3
"""Train the teacher: a bidirectional masked-diffusion LM with LLaDA's SFT objective.

Per row: t ~ U(0, 1) (stratified over the batch), p = (1 - eps) t + eps; every answer slot (the
answer and its EOS fill, gen_length slots) is masked with probability p, the prompt never; the loss
is the cross-entropy on the masked slots divided by p, summed and divided by the slots of the row
(LLaDA's SFT normalization), then averaged over the batch. Attention is bidirectional.
Evaluation: LLaDA decoding, one token per step, low-confidence remasking, blocks of 8.

    /usr/bin/python3 tools/train/train_teacher.py                      # exports models/teacher
    /usr/bin/python3 tools/train/train_teacher.py --steps 20 --out /tmp/smoke-models/teacher   # smoke
"""
from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

import common as C
import decode
import model as M

EPS = 1e-3


def main(argv: list[str] | None = None) -> int:
    ap = C.base_parser("teacher", __doc__, steps=4000, batch=128, lr=2e-3)
    C.add_model_args(ap)
    args = ap.parse_args(argv)
    device = C.setup(args)
    tok, sp = C.load_tokenizer(args.tokenizer)
    model = M.Transformer(C.model_config(args, C.embedding_rows(tok))).to(device)
    print(f"[teacher] {model.n_params():,} parameters, {model.c}", flush=True)
    pool = C.train_pool(args.train_problems, tok)
    val = C.val_set(tok, max(args.eval_n, args.final_eval_n))
    opt = C.make_optimizer(model, args)
    run = C.Run(args, "teacher")
    sampler = C.BatchSampler([len(x) for x in pool.prompts], args.batch, args.bucket)

    def evaluate(n: int) -> dict:
        t0 = time.time()
        res = decode.evaluate(model, C.Problems(val.raw[:n], tok), tok, sp, kind="diffusion", gen_length=args.gen_length,
                              batch=args.eval_batch, device=device, block=C.BLOCK_LENGTH, mask_mode="bidirectional",
                              steps_per_block=C.BLOCK_LENGTH)
        model.train()
        return res, time.time() - t0

    model.train()
    step = 0
    while step < run.total:
        lr = run.set_lr(opt, step)
        cv = C.diffusion_canvas(pool, sampler(), args.gen_length, sp).to(device)
        B = cv.tokens.shape[0]
        u = (torch.rand(1, device=device) + torch.arange(B, device=device) / B) % 1.0
        p = (1 - EPS) * u + EPS
        masked = (torch.rand(cv.tokens.shape, device=device) < p[:, None]) & cv.slots
        inp = torch.where(masked, torch.full_like(cv.tokens, sp.mask), cv.tokens)
        allowed = M.attention_mask("bidirectional", cv.prompt_len, cv.valid_len, cv.tokens.shape[1])
        logits = model(inp, allowed, select=masked)
        ce = F.cross_entropy(logits.float(), cv.tokens[masked], reduction="none")
        weight = (1.0 / p)[:, None].expand_as(masked)[masked]
        loss = (ce * weight).sum() / (B * args.gen_length)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        run.end_step(step, lr, {"loss": loss.item(), "masked_ce": ce.mean().item()})
        if run.due_eval(step):
            res, secs = evaluate(args.eval_n)
            run.record_eval(step, res, secs)
        step += 1
    final, secs = evaluate(args.final_eval_n)
    run.record_eval(step - 1, final, secs)
    C.finish(model, args, run, "llada", {"dlm_block_length": C.BLOCK_LENGTH}, final, "teacher")
    return 0


if __name__ == "__main__":
    sys.exit(main())
