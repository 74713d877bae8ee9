"""Simple batched Python decoders for evaluation during training (dlm's C++ decoder is the real one).

diffusion_generate: LLaDA-style semi-autoregressive decoding of gen_length mask slots in blocks,
greedy (argmax) with low-confidence remasking: each step commits either a fixed number of the most
confident masked slots of the current block (LLaDA's schedule: the block's slots spread evenly over
its steps) or, with a threshold, every slot whose probability reaches it (at least the top one).
Optionally a row stops after the first block that holds an EOS (CDLM). Without a KV cache every step
recomputes the whole row, which gives the same result as an exact block cache under a block-causal
mask. It can also record, per slot, the step that committed it and the top-k distribution then
(the CDLM teacher trajectories).

ar_generate: greedy autoregressive decoding under the causal mask.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import model as M  # noqa: E402
import score  # noqa: E402


@dataclass
class Generation:
    tokens: torch.Tensor               # [N, G] committed tokens (EOS-filled past a stop)
    forwards: torch.Tensor             # [N] model forwards each row took
    commit_step: torch.Tensor | None = None   # [N, G] forward index (0-based) that committed each slot, -1 if none
    topk_prob: torch.Tensor | None = None     # [N, G, K] the committing forward's top-k probabilities
    topk_id: torch.Tensor | None = None       # [N, G, K] and their token ids


def _layout(prompts: list[list[int]], gen_length: int, mask_id: int, pad_id: int):
    P = torch.tensor([len(p) for p in prompts])
    L = int(P.max()) + gen_length
    canvas = torch.full((len(prompts), L), pad_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        canvas[i, :len(p)] = torch.tensor(p)
        canvas[i, len(p):len(p) + gen_length] = mask_id
    return canvas, P, P + gen_length


def _transfer_counts(n_slots: int, steps: int) -> list[int]:
    """LLaDA's schedule: n_slots commits spread over `steps`, the remainder on the first steps."""
    base, extra = divmod(n_slots, steps)
    return [base + (1 if s < extra else 0) for s in range(steps)]


@torch.no_grad()
def diffusion_generate(model: M.Transformer, prompts: list[list[int]], *, gen_length: int, block: int, mask_mode: str,
                       mask_id: int, eos_id: int, pad_id: int, steps_per_block: int | None = None,
                       threshold: float | None = None, stop_after_eos_block: bool = False, record_topk: int = 0,
                       device: torch.device | str = "cpu") -> Generation:
    if gen_length % block:
        raise ValueError(f"gen_length {gen_length} is not a multiple of the block length {block}")
    if (steps_per_block is None) == (threshold is None):
        raise ValueError("give exactly one of steps_per_block (fixed commits per step) and threshold")
    model.eval()
    canvas, P, V = _layout(prompts, gen_length, mask_id, pad_id)
    canvas, P, V = canvas.to(device), P.to(device), V.to(device)
    N, G = len(prompts), gen_length
    forwards = torch.zeros(N, dtype=torch.long, device=device)
    done = torch.zeros(N, dtype=torch.bool, device=device)
    commit_step = torch.full((N, G), -1, dtype=torch.long, device=device) if record_topk else None
    topk_prob = torch.zeros((N, G, record_topk), dtype=torch.float16, device=device) if record_topk else None
    topk_id = torch.zeros((N, G, record_topk), dtype=torch.int16, device=device) if record_topk else None
    ar = torch.arange(block, device=device)
    counts = _transfer_counts(block, steps_per_block) if steps_per_block else None
    for b in range(G // block):
        step = 0
        while True:
            slot_pos = P[:, None] + b * block + ar[None, :]                  # [N, block]
            still = canvas.gather(1, slot_pos) == mask_id                    # [N, block]
            active = (~done & still.any(1)).nonzero().flatten()
            if active.numel() == 0:
                break
            rows = canvas[active]
            Lr = int(V[active].max())
            rows = rows[:, :Lr]
            allowed = M.attention_mask(mask_mode, P[active], V[active], Lr, block)
            logits = model(rows, allowed)                                    # [A, Lr, vocab]
            pos = slot_pos[active]
            lg = logits.gather(1, pos[:, :, None].expand(-1, -1, logits.shape[-1])).float()
            probs = torch.softmax(lg, dim=-1)
            conf, tok = probs.max(-1)                                        # [A, block]
            masked = still[active]
            conf = torch.where(masked, conf, torch.full_like(conf, -1.0))
            if threshold is not None:
                commit = masked & (conf >= threshold)
                top = conf.argmax(1)
                commit[torch.arange(len(active), device=device), top] = True
            else:
                k = counts[min(step, len(counts) - 1)] if step < len(counts) else int(masked.sum(1).max())
                k = max(1, k)
                order = conf.argsort(dim=1, descending=True, stable=True)
                rank = torch.empty_like(order)
                rank.scatter_(1, order, ar[None, :].expand(len(active), -1))
                commit = masked & (rank < k)
            new_rows = torch.where(commit, tok, canvas[active].gather(1, pos))
            canvas[active[:, None], pos] = new_rows
            if record_topk:
                tp, ti = probs.topk(record_topk, dim=-1)
                slot_idx = b * block + ar[None, :].expand(len(active), -1)
                r_idx, s_idx = active[:, None].expand(-1, block)[commit], slot_idx[commit]
                commit_step[r_idx, s_idx] = forwards[active][:, None].expand(-1, block)[commit]
                topk_prob[r_idx, s_idx] = tp[commit].half()
                topk_id[r_idx, s_idx] = ti[commit].to(torch.int16)
            forwards[active] += 1
            step += 1
        if stop_after_eos_block:
            slot_pos = P[:, None] + b * block + ar[None, :]
            done |= (canvas.gather(1, slot_pos) == eos_id).any(1)
        if bool(done.all()):
            break
    slots = P[:, None] + torch.arange(G, device=device)[None, :]
    out = canvas.gather(1, slots)
    out = torch.where(out == mask_id, torch.full_like(out, eos_id), out)  # rows stopped early
    return Generation(out.cpu(), forwards.cpu(), commit_step.cpu() if record_topk else None,
                      topk_prob.cpu() if record_topk else None, topk_id.cpu() if record_topk else None)


@torch.no_grad()
def ar_generate(model: M.Transformer, prompts: list[list[int]], *, gen_length: int, eos_id: int, pad_id: int,
                device: torch.device | str = "cpu") -> Generation:
    model.eval()
    canvas, P, V = _layout(prompts, gen_length, pad_id, pad_id)
    canvas, P, V = canvas.to(device), P.to(device), V.to(device)
    N = len(prompts)
    forwards = torch.zeros(N, dtype=torch.long, device=device)
    done = torch.zeros(N, dtype=torch.bool, device=device)
    for t in range(gen_length):
        active = (~done).nonzero().flatten()
        if active.numel() == 0:
            break
        Lr = int((P[active] + t).max())  # rows need their prompt and t generated tokens
        rows = canvas[active, :Lr]
        allowed = M.attention_mask("causal", P[active], P[active] + t, Lr)
        last = (P[active] + t - 1)[:, None]
        logits = model(rows, allowed)
        nxt = logits.gather(1, last[:, :, None].expand(-1, -1, logits.shape[-1]))[:, 0].argmax(-1)
        canvas[active, P[active] + t] = nxt
        forwards[active] += 1
        done[active] |= nxt == eos_id
    slots = P[:, None] + torch.arange(gen_length, device=device)[None, :]
    return Generation(canvas.gather(1, slots).cpu(), forwards.cpu())


def answer_text(tok, ids: list[int], eos_id: int) -> str:
    if eos_id in ids:
        ids = ids[:ids.index(eos_id)]
    return tok.decode(ids, skip_special_tokens=False)


def exact_match(tok, gen: Generation, finals: list[str], eos_id: int) -> tuple[float, list[str]]:
    texts = [answer_text(tok, row, eos_id) for row in gen.tokens.tolist()]
    correct = sum(score.extract_final(t) == f for t, f in zip(texts, finals))
    return correct / max(1, len(finals)), texts


def evaluate(model, data, tok, sp, *, kind: str, gen_length: int, batch: int, device, block: int = 8,
             mask_mode: str = "bidirectional", steps_per_block: int | None = None, threshold: float | None = None,
             stop_after_eos_block: bool = False) -> dict:
    """Exact match and mean forwards over `data` (common.Problems) with one decoder."""
    tokens, forwards = [], []
    for s in range(0, len(data), batch):
        prompts = data.prompts[s:s + batch]
        if kind == "ar":
            g = ar_generate(model, prompts, gen_length=gen_length, eos_id=sp.eos, pad_id=sp.pad, device=device)
        else:
            g = diffusion_generate(model, prompts, gen_length=gen_length, block=block, mask_mode=mask_mode,
                                   mask_id=sp.mask, eos_id=sp.eos, pad_id=sp.pad, steps_per_block=steps_per_block,
                                   threshold=threshold, stop_after_eos_block=stop_after_eos_block, device=device)
        tokens.append(g.tokens)
        forwards.append(g.forwards)
    gen = Generation(torch.cat(tokens), torch.cat(forwards))
    acc, texts = exact_match(tok, gen, data.finals, sp.eos)
    return {"exact_match": round(acc, 4), "forwards": round(float(gen.forwards.float().mean()), 2),
            "n": len(data), "sample": texts[0].replace("\n", " | ")}
