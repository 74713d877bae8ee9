#!/usr/bin/python3
"""Train the teacher: a bidirectional masked-diffusion LM with LLaDA's SFT objective.

Per row: t ~ U(0, 1) (stratified over the batch), p = (1 - eps) t + eps; every answer slot (the
answer and its EOS fill, gen_length slots) is masked with probability p, the prompt never; the loss
is the cross-entropy on the masked slots divided by p, summed and divided by the slots of the row
(LLaDA's SFT normalization), then averaged over the batch. Attention is bidirectional.

Block rows (--block-frac of the rows, default 0.5): the same objective restricted to one block of 8
slots, in the state the semi-autoregressive decoders show the model: the blocks before it clean,
the block masked with probability p, every later slot masked; the loss is the block's masked
cross-entropy divided by p and by the block's 8 slots. With i.i.d. masks alone (--block-frac 0)
the model almost always sees some of the EOS fill and so learns where the answer ends from it;
decoded block by block it never sees the fill, and the first teacher so trained did not stop: at
blocks of 8 it solved 18.8 % of the test set, decoded over the whole canvas 68.6 % (docs/results.md).
The shipped teacher is that run (stage 1) fine-tuned 400 steps with block rows (stage 2).
Evaluation: LLaDA decoding, one token per step, low-confidence remasking, blocks of 8.

    /usr/bin/python3 tools/train/train_teacher.py --block-frac 0 --out /tmp/dlm-train/teacher_stage1
    /usr/bin/python3 tools/train/train_teacher.py --init /tmp/dlm-train/teacher_stage1 --steps 400 \
        --lr 5e-4 --warmup 20 --eval-every 200 --final-eval-n 256      # exports models/teacher
    /usr/bin/python3 tools/train/train_teacher.py --steps 20 --out /tmp/smoke-models/teacher   # smoke
"""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import common as C
import model as M

EPS = 1e-3


def main(argv: list[str] | None = None) -> int:
    r = C.from_scratch("teacher", __doc__, argv, extra=lambda ap: ap.add_argument(
        "--block-frac", type=float, default=0.5,
        help="fraction of the rows trained in the block-wise decoding state (0: LLaDA's i.i.d. masks only)"))
    args, device, sp, model, pool = r.args, r.device, r.sp, r.model, r.pool
    sampler = C.BatchSampler([len(x) for x in pool.prompts], args.batch, args.bucket)
    evaluate = C.evaluator(model, r.val, r.tok, sp, args, device, kind="diffusion", block=C.BLOCK_LENGTH,
                           mask_mode="bidirectional", steps_per_block=C.BLOCK_LENGTH)

    def masked_ce(cv: C.Canvas, masked: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
        """Cross-entropy at the scored slots, the masked slots reading the mask token."""
        inp = torch.where(masked, torch.full_like(cv.tokens, sp.mask), cv.tokens)
        allowed = M.attention_mask("bidirectional", cv.prompt_len, cv.valid_len, cv.tokens.shape[1])
        logits = model(inp, allowed, select=scored)
        return F.cross_entropy(logits.float(), cv.tokens[scored], reduction="none")

    def step_loss(step: int):
        cv = C.diffusion_canvas(pool, sampler(), args.gen_length, sp).to(device)
        B = cv.tokens.shape[0]
        u = (torch.rand(1, device=device) + torch.arange(B, device=device) / B) % 1.0
        p = (1 - EPS) * u + EPS
        drawn = (torch.rand(cv.tokens.shape, device=device) < p[:, None])
        if args.block_frac == 0:  # LLaDA's i.i.d. masks only, bit for bit as before block rows existed
            masked = drawn & cv.slots
            ce = masked_ce(cv, masked, masked)
            weight = (1.0 / p)[:, None].expand_as(masked)[masked]
            loss = (ce * weight).sum() / (B * args.gen_length)
            return loss, {"loss": loss.item(), "masked_ce": ce.mean().item()}
        block_row = torch.rand(B, device=device) < args.block_frac
        current, future = C.block_windows(cv, args.gen_length, C.BLOCK_LENGTH)
        scored = torch.where(block_row[:, None], drawn & current, drawn & cv.slots)   # loss slots
        ce = masked_ce(cv, scored | (block_row[:, None] & future), scored)
        slots = torch.where(block_row, torch.full_like(p, C.BLOCK_LENGTH), torch.full_like(p, args.gen_length))
        weight = (1.0 / (p * slots))[:, None].expand_as(scored)[scored]
        loss = (ce * weight).sum() / B
        return loss, {"loss": loss.item(), "masked_ce": ce.mean().item()}

    final = C.train_loop(model, r.opt, r.run, args, step_loss, evaluate)
    C.finish(model, args, r.run, "llada", {"dlm_block_length": C.BLOCK_LENGTH}, final, "teacher")
    return 0


if __name__ == "__main__":
    sys.exit(main())
