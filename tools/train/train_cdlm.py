#!/usr/bin/python3
"""Train the CDLM student: a block-causal copy of the teacher, trained on teacher trajectories.

1. Trajectories. The teacher (bidirectional) decodes --traj-prompts training prompts block by block
   (blocks of B = 8 slots), one token per step, greedy with low-confidence remasking. For every slot
   we keep the step that committed it and the teacher's top-k distribution at that step; a row stops
   after the block that holds its first EOS (the later blocks are EOS fill, which the DLM loss covers).
   With --filter-correct (default) only trajectories whose final number is right are kept. They are
   cached in --work-dir, keyed by the teacher's weights and the settings.
2. Student. Same weights as the teacher, block-causal attention with B = 8: the prompt sees the
   prompt; block b sees the prompt and blocks <= b. A training example picks a trajectory, a block b
   it recorded, a step j in [0, B) and a jump k in [1, B - j]. The current state y shows the prompt,
   blocks < b and the block-b slots the teacher committed in its first j steps of the block; the rest
   of block b (and everything after it) is masked. Losses, weighted 1.0 / 0.5 / 0.1:
     distillation  KL(teacher's recorded distribution || student(y)) on the slots newly unmasked
                   from y by the next k steps (k = 1 is the single slot of the next step);
     consistency   KL(stop-grad student at the block-completion state || student(y)) on the slots
                   still masked after those k steps. At the completion state those slots are visible;
                   the student's output there is untrained, so by default (--visible-target onehot) the
                   target is the completed block's token itself, and --visible-target model uses the
                   stop-grad student's output (reported at start-up: how often it equals the token);
     DLM           LLaDA's masked-diffusion loss on ground-truth rows under the block-causal mask.
   Why B = 8: an answer line "a + b = c" is 8 to 11 tokens, so one block holds about one reasoning
   step whose operands are already committed in earlier blocks; 48 slots make 6 blocks (CDLM's 256/32
   has 8), and a typical 23-token answer ends in block 3, where the cdlm decoder stops.
Evaluation: threshold decoding (tau 0.9) inside each block under the block-causal mask, stopping
after the block that holds EOS — the cdlm preset.

    /usr/bin/python3 tools/train/train_cdlm.py                         # exports models/cdlm
    /usr/bin/python3 tools/train/train_cdlm.py --teacher /tmp/smoke-models/teacher --steps 20 \\
        --traj-prompts 64 --out /tmp/smoke-models/cdlm                  # smoke
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import common as C
import decode
import model as M
import score
from train_cd4lm import visible_identity

W_DISTILL, W_CONSIST, W_DLM = 1.0, 0.5, 0.1
EPS = 1e-3


def trajectories(teacher, pool: C.Problems, tok, sp, args, device) -> dict:
    """Teacher trajectories for the first --traj-prompts pool problems (cached)."""
    h = hashlib.sha256((args.teacher / "model.safetensors").read_bytes()).hexdigest()[:12]
    n = min(args.traj_prompts, len(pool))
    path = args.work_dir / f"traj_{h}_n{n}_g{args.gen_length}_b{C.BLOCK_LENGTH}_k{args.topk}.pt"
    if path.is_file():
        print(f"[cdlm] trajectories from cache {path}", flush=True)
        return torch.load(path)
    t0 = time.time()
    parts = []
    bs = args.traj_batch
    for s in range(0, n, bs):
        g = decode.diffusion_generate(teacher, pool.prompts[s:min(n, s + bs)], gen_length=args.gen_length,
                                      block=C.BLOCK_LENGTH, mask_mode="bidirectional", mask_id=sp.mask, eos_id=sp.eos,
                                      pad_id=sp.pad, steps_per_block=C.BLOCK_LENGTH, stop_after_eos_block=True,
                                      record_topk=args.topk, device=device)
        parts.append(g)
        done = min(n, s + bs)
        el = time.time() - t0
        print(f"[cdlm] trajectories {done}/{n}, mean {float(g.forwards.float().mean()):.1f} teacher forwards per prompt, "
              f"elapsed {C.fmt_time(el)} ETA {C.fmt_time(el / done * (n - done))}", flush=True)
    traj = {k: torch.cat([getattr(g, k) for g in parts]) for k in ("tokens", "forwards", "commit_step", "topk_prob", "topk_id")}
    texts = [decode.answer_text(tok, row, sp.eos) for row in traj["tokens"].tolist()]
    traj["correct"] = torch.tensor([score.extract_final(t) == f for t, f in zip(texts, pool.finals[:n])])
    traj["rows"] = torch.arange(n)
    torch.save(traj, path)
    print(f"[cdlm] {n} trajectories in {C.fmt_time(time.time() - t0)}, teacher exact match on them "
          f"{100 * float(traj['correct'].float().mean()):.1f} %, cached at {path}", flush=True)
    return traj


def block_ranks(commit_step: torch.Tensor, block: int) -> torch.Tensor:
    """rank[i, s]: the order in which slot s was committed within its block (0 = first); -1 if never."""
    N, G = commit_step.shape
    cs = commit_step.view(N, G // block, block)
    key = torch.where(cs < 0, torch.full_like(cs, 1 << 30), cs)
    order = key.argsort(dim=-1, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(block)[None, None].expand_as(order))
    return torch.where(cs < 0, torch.full_like(rank, -1), rank).view(N, G)


def main(argv: list[str] | None = None) -> int:
    ap = C.base_parser("cdlm", __doc__, steps=2000, batch=128, lr=5e-4)
    ap.add_argument("--teacher", type=Path, default=C.REPO / "models" / "teacher", help="the exported teacher folder")
    ap.add_argument("--tokenizer", type=Path, default=C.T.DEFAULT_PATH)
    ap.add_argument("--traj-prompts", type=int, default=3072, help="training prompts the teacher decodes")
    ap.add_argument("--traj-batch", type=int, default=256)
    ap.add_argument("--topk", type=int, default=16, help="teacher probabilities kept per slot")
    ap.add_argument("--filter-correct", action=argparse.BooleanOptionalAction, default=True,
                    help="train only on trajectories whose final number is right")
    ap.add_argument("--dlm-batch", type=int, default=32, help="ground-truth rows per step for the DLM loss")
    ap.add_argument("--visible-target", choices=["onehot", "model"], default="onehot")
    ap.add_argument("--eval-threshold", type=float, default=0.9)
    ap.set_defaults(warmup=50)
    args = ap.parse_args(argv)
    device = C.setup(args)
    B = C.BLOCK_LENGTH
    tok, sp = C.load_tokenizer(args.tokenizer)
    teacher, _ = M.load_folder(args.teacher, device)
    teacher.eval().requires_grad_(False)
    pool = C.train_pool(args.train_problems, tok)
    val = C.val_set(tok, max(args.eval_n, args.final_eval_n))
    traj = trajectories(teacher, pool, tok, sp, args, device)
    del teacher
    keep = traj["correct"] if args.filter_correct else torch.ones_like(traj["correct"])
    idx = keep.nonzero().flatten()
    if idx.numel() == 0:
        raise SystemExit("[cdlm] no usable trajectory (the teacher got none right); train the teacher longer "
                         "or pass --no-filter-correct")
    rows = traj["rows"][idx]
    y_star = traj["tokens"][idx].to(device)                    # [N, G] the trajectory's final tokens
    rank = block_ranks(traj["commit_step"][idx], B).to(device)  # [N, G]
    topk_p = traj["topk_prob"][idx].float()
    topk_p = (topk_p / topk_p.sum(-1, keepdim=True).clamp_min(1e-8)).to(device)
    topk_i = traj["topk_id"][idx].long().to(device)
    n_blocks = (rank.view(len(idx), -1, B)[:, :, 0] >= 0).sum(1)  # recorded blocks per trajectory
    print(f"[cdlm] training on {len(idx)} of {len(rows)} trajectories (filter-correct {args.filter_correct}), "
          f"{float(n_blocks.float().mean()):.2f} recorded blocks each", flush=True)

    student, _ = M.load_folder(args.teacher, device)
    probe = C.diffusion_canvas(pool, list(range(min(256, len(pool)))), args.gen_length, sp).to(device)
    print(f"[cdlm] student argmax equals the visible token at "
          f"{100 * visible_identity(student, probe, sp.mask, 'block_causal', B):.1f} % of unmasked answer slots "
          f"(block-causal); consistency targets: {args.visible_target}", flush=True)
    opt = C.make_optimizer(student, args)
    run = C.Run(args, "cdlm")
    prompts = [pool.prompts[int(r)] for r in rows]
    P_all = torch.tensor([len(p) for p in prompts], device=device)
    G = args.gen_length
    slot_ar = torch.arange(G, device=device)
    traj_sampler = C.BatchSampler([len(p) for p in prompts], args.batch, args.bucket)
    dlm_sampler = C.BatchSampler([len(x) for x in pool.prompts], args.dlm_batch, args.bucket)

    evaluate = C.evaluator(student, val, tok, sp, args, device, kind="diffusion", block=B, mask_mode="block_causal",
                           threshold=args.eval_threshold, stop_after_eos_block=True)

    def step_loss(step: int):
        # --- trajectory states
        pick = torch.tensor(traj_sampler(), device=device)
        b = (torch.rand(args.batch, device=device) * n_blocks[pick]).long()
        j = torch.randint(0, B, (args.batch,), device=device)
        k = 1 + (torch.rand(args.batch, device=device) * (B - j)).long()
        P = P_all[pick]
        L = int(P.max()) + G
        blk = slot_ar[None] // B                                    # [1, G]
        r = rank[pick]
        in_b = blk == b[:, None]
        visible_slot = (blk < b[:, None]) | (in_b & (r < j[:, None]))
        distill = in_b & (r >= j[:, None]) & (r < (j + k)[:, None])
        consist = in_b & (r >= (j + k)[:, None])
        cur = torch.where(visible_slot, y_star[pick], torch.full_like(y_star[pick], sp.mask))
        done_state = torch.where(blk <= b[:, None], y_star[pick], torch.full_like(y_star[pick], sp.mask))
        canvas = torch.full((args.batch, L), sp.pad, dtype=torch.long, device=device)
        for i, t in enumerate(pick.tolist()):
            canvas[i, :len(prompts[t])] = torch.tensor(prompts[t], device=device)
        pos = P[:, None] + slot_ar[None]
        sel = torch.zeros((args.batch, L), dtype=torch.bool, device=device)
        sel.scatter_(1, pos, distill | consist)
        # block b sees nothing after itself: cut every row after its block b (same logits, fewer tokens)
        end = P + (b + 1) * B
        Lc = int(end.max())
        cur_canvas, sel = canvas.scatter(1, pos, cur)[:, :Lc], sel[:, :Lc]
        allowed = M.attention_mask("block_causal", P, end, Lc, B)
        logits = student(cur_canvas, allowed, select=sel).float()   # rows in (batch, position) order
        slot_sel = distill | consist
        is_distill = distill[slot_sel]
        logq = torch.log_softmax(logits, dim=-1)
        # distillation: teacher's recorded top-k at the slots the next k steps commit
        tp, ti = topk_p[pick][distill], topk_i[pick][distill]
        ld = logq[is_distill]
        l_distill = (tp * (torch.log(tp.clamp_min(1e-12)) - ld.gather(1, ti))).sum(-1).mean()
        # consistency: the block-completion state's prediction at the still-masked slots
        if consist.any():
            if args.visible_target == "model":
                with torch.no_grad():
                    sel_c = torch.zeros((args.batch, L), dtype=torch.bool, device=device)
                    sel_c.scatter_(1, pos, consist)
                    done_canvas = canvas.scatter(1, pos, done_state)[:, :Lc]
                    target = torch.softmax(student(done_canvas, allowed, select=sel_c[:, :Lc]).float(), -1)
            else:
                target = F.one_hot(y_star[pick][consist], logits.shape[-1]).float()
            l_consist = C.kl_from_probs(target, logits[~is_distill])
            l_consist = l_consist.mean()
        else:
            l_consist = torch.zeros((), device=device)
        # DLM: LLaDA's objective on ground-truth rows, block-causal
        cv = C.diffusion_canvas(pool, dlm_sampler(), G, sp).to(device)
        nb = cv.tokens.shape[0]
        u = (torch.rand(1, device=device) + torch.arange(nb, device=device) / nb) % 1.0
        p = (1 - EPS) * u + EPS
        masked = (torch.rand(cv.tokens.shape, device=device) < p[:, None]) & cv.slots
        inp = torch.where(masked, torch.full_like(cv.tokens, sp.mask), cv.tokens)
        dl = student(inp, M.attention_mask("block_causal", cv.prompt_len, cv.valid_len, cv.tokens.shape[1], B), select=masked)
        ce = F.cross_entropy(dl.float(), cv.tokens[masked], reduction="none")
        l_dlm = (ce / p[:, None].expand_as(masked)[masked]).sum() / (nb * G)
        loss = W_DISTILL * l_distill + W_CONSIST * l_consist + W_DLM * l_dlm
        return loss, {"loss": loss.item(), "distill": l_distill.item(), "consist": l_consist.item(),
                      "dlm": l_dlm.item()}

    final = C.train_loop(student, opt, run, args, step_loss, evaluate)
    C.finish(student, args, run, "llada", {"dlm_block_length": B}, final, "cdlm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
