#!/usr/bin/python3
"""Train the CD4LM student: discrete-space consistency distillation with nested masks.

The student starts as a copy of the teacher (bidirectional, same size). Per row of ground-truth
data: a student mask ratio r_s ~ U(0.4, 0.9) and a teacher ratio r_t = clip(r_s * U(0.3, 0.7),
0.1, 0.6); the student masks n_s = max(floor(r_s G), 2, ceil(0.1 G)) of the G answer slots, the
teacher the first n_t = min(floor(r_t G), n_s) of the same random order, so the teacher's masked
set is a subset of the student's. The frozen teacher reads the lighter-masked input, the student the
heavier one; on every student-masked slot

    loss = lambda * T^2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - lambda) * CE(student, data)

with T = 2 and lambda 0.9 for the first 10 % of the steps, then a cosine to 0.5. At slots the teacher
sees unmasked, its target is, by default, the one-hot data token (--visible-target onehot) rather than
the teacher's output there, which the LLaDA objective never trains; --visible-target model uses the
teacher's output as the CD4LM reference code does (the start-up line reports how often the teacher's
argmax already equals the visible token).

Block rows (--block-frac of the rows, default 0.5) draw the same nested masks inside one block of 8
slots (G = 8, r_s up to 1.125 so that 17 % of them mask the whole block), with the blocks before it clean and every later slot masked for both models: the
state the block-wise adaptive decoder is in (see train_teacher.py for why the teacher needs it too).
Evaluation: confidence-threshold decoding (tau 0.95) in blocks of 8, like CD4LM's adaptive decoder.

    /usr/bin/python3 tools/train/train_cd4lm.py                        # exports models/cd4lm
    /usr/bin/python3 tools/train/train_cd4lm.py --teacher /tmp/smoke-models/teacher --steps 20 \\
        --out /tmp/smoke-models/cd4lm                                   # smoke
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import common as C
import model as M


def lambda_at(step: int, total: int, start: float = 0.9, end: float = 0.5, hold: float = 0.1) -> float:
    frac = step / max(1, total)
    if frac < hold:
        return start
    progress = (frac - hold) / (1 - hold)
    return end + (start - end) * 0.5 * (1 + math.cos(math.pi * progress))


def random_ranks(slots: torch.Tensor) -> torch.Tensor:
    """A uniformly random order of each row's slots: rank[b, p] in [0, n_slots) on slots, >= n_slots elsewhere."""
    r = torch.rand(slots.shape, device=slots.device)
    r = torch.where(slots, r, torch.full_like(r, 2.0))
    order = r.argsort(dim=1)
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(slots.shape[1], device=slots.device)[None].expand_as(order))
    return rank


def nested_masks(region: torch.Tensor, size: int, hi: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """(student, teacher) masks inside `region` (size slots per row), the teacher's a subset."""
    B, device = region.shape[0], region.device
    r_s = torch.empty(B, device=device).uniform_(0.4, hi)
    r_t = (r_s * torch.empty(B, device=device).uniform_(0.3, 0.7)).clamp(0.1, 0.6)
    n_s = torch.maximum((r_s * size).floor().long(), torch.tensor(max(2, math.ceil(0.1 * size)), device=device))
    n_s = n_s.clamp(max=size)
    n_t = torch.minimum((r_t * size).floor().long(), n_s)
    rank = random_ranks(region)
    return region & (rank < n_s[:, None]), region & (rank < n_t[:, None])


@torch.no_grad()
def visible_identity(model, cv: C.Canvas, mask_id: int, mask_mode: str = "bidirectional", block: int = 0) -> float:
    """How often the model's argmax at an unmasked answer slot equals that slot's token (half the slots masked)."""
    masked = (torch.rand(cv.tokens.shape, device=cv.tokens.device) < 0.5) & cv.slots
    visible = cv.slots & ~masked
    inp = torch.where(masked, torch.full_like(cv.tokens, mask_id), cv.tokens)
    logits = model(inp, M.attention_mask(mask_mode, cv.prompt_len, cv.valid_len, cv.tokens.shape[1], block), select=visible)
    return float((logits.argmax(-1) == cv.tokens[visible]).float().mean())


def main(argv: list[str] | None = None) -> int:
    ap = C.base_parser("cd4lm", __doc__, steps=1500, batch=128, lr=5e-4)
    ap.add_argument("--teacher", type=Path, default=C.REPO / "models" / "teacher", help="the exported teacher folder")
    ap.add_argument("--tokenizer", type=Path, default=C.T.DEFAULT_PATH)
    ap.add_argument("--temperature", type=float, default=2.0)
    ap.add_argument("--lambda-start", type=float, default=0.9)
    ap.add_argument("--lambda-end", type=float, default=0.5)
    ap.add_argument("--visible-target", choices=["onehot", "model"], default="onehot")
    ap.add_argument("--eval-threshold", type=float, default=0.95)
    ap.add_argument("--block-frac", type=float, default=0.5,
                    help="fraction of the rows trained in the block-wise decoding state (0: i.i.d. nested masks only)")
    ap.set_defaults(warmup=50)
    args = ap.parse_args(argv)
    device = C.setup(args)
    tok, sp = C.load_tokenizer(args.tokenizer)
    teacher, _ = M.load_folder(args.teacher, device)
    teacher.eval().requires_grad_(False)
    student, _ = M.load_folder(args.teacher, device)
    print(f"[cd4lm] student from {args.teacher}: {student.n_params():,} parameters, {student.c}", flush=True)
    pool = C.train_pool(args.train_problems, tok)
    val = C.val_set(tok, max(args.eval_n, args.final_eval_n))
    probe = C.diffusion_canvas(pool, list(range(min(256, len(pool)))), args.gen_length, sp).to(device)
    print(f"[cd4lm] teacher argmax equals the visible token at {100 * visible_identity(teacher, probe, sp.mask):.1f} % "
          f"of unmasked answer slots; visible-slot targets: {args.visible_target}", flush=True)
    opt = C.make_optimizer(student, args)
    run = C.Run(args, "cd4lm")
    sampler = C.BatchSampler([len(x) for x in pool.prompts], args.batch, args.bucket)
    T = args.temperature

    evaluate = C.evaluator(student, val, tok, sp, args, device, kind="diffusion", block=C.BLOCK_LENGTH,
                           mask_mode="bidirectional", threshold=args.eval_threshold)

    def step_loss(step: int):
        lam = lambda_at(step, run.total, args.lambda_start, args.lambda_end)
        cv = C.diffusion_canvas(pool, sampler(), args.gen_length, sp).to(device)
        s_mask, t_mask = nested_masks(cv.slots, args.gen_length)
        current, future = C.block_windows(cv, args.gen_length, C.BLOCK_LENGTH)
        s_blk, t_blk = nested_masks(current, C.BLOCK_LENGTH, hi=1.0 + 1.0 / C.BLOCK_LENGTH)  # whole block too
        block_row = (torch.rand(cv.tokens.shape[0], device=device) < args.block_frac)[:, None]
        s_mask, t_mask = torch.where(block_row, s_blk, s_mask), torch.where(block_row, t_blk, t_mask)
        hidden = block_row & future   # masked for both models and not scored
        allowed = M.attention_mask("bidirectional", cv.prompt_len, cv.valid_len, cv.tokens.shape[1])
        mask_tok = torch.full_like(cv.tokens, sp.mask)
        with torch.no_grad():
            t_logits = teacher(torch.where(t_mask | hidden, mask_tok, cv.tokens), allowed, select=s_mask)
            target = torch.softmax(t_logits.float() / T, dim=-1)
            if args.visible_target == "onehot":
                seen = (~t_mask)[s_mask]  # student-masked slots the teacher reads unmasked
                onehot = F.one_hot(cv.tokens[s_mask], target.shape[-1]).float()
                target = torch.where(seen[:, None], onehot, target)
        s_logits = student(torch.where(s_mask | hidden, mask_tok, cv.tokens), allowed, select=s_mask).float()
        kl = C.kl_from_probs(target, s_logits / T).mean() * T * T
        ce = F.cross_entropy(s_logits, cv.tokens[s_mask])
        loss = lam * kl + (1 - lam) * ce
        return loss, {"loss": loss.item(), "kl": kl.item(), "ce": ce.item(), "lambda": lam}

    final = C.train_loop(student, opt, run, args, step_loss, evaluate)
    C.finish(student, args, run, "llada", {"dlm_block_length": C.BLOCK_LENGTH}, final, "cd4lm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
