"""Shared pieces of the trainers: arguments, determinism, data, batches, schedule, progress, export.

Every trainer is deterministic for a seed when run with --steps (not --minutes) on one device type:
Python's, NumPy's and torch's generators are seeded, torch runs with deterministic algorithms, and
the data comes from gsm_synth's fixed seeds.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from pathlib import Path

TRAIN_DIR = Path(__file__).resolve().parent
REPO = TRAIN_DIR.parents[1]
sys.path.insert(0, str(TRAIN_DIR.parent))

import torch  # noqa: E402

import decode  # noqa: E402
import gsm_synth  # noqa: E402
import model as M  # noqa: E402
import tokenizer as T  # noqa: E402

GEN_LENGTH = 48      # answer slots after the prompt: the longest answer is 37 tokens, then EOS fill
BLOCK_LENGTH = 8     # blocks of the semi-autoregressive decoders and of the CDLM student (see README)
MAX_SEQ = 128        # RoPE positions the exported configs announce (prompts stay under 64 tokens)


# ------------------------------------------------------------------------------------ arguments

def base_parser(name: str, description: str, steps: int, batch: int, lr: float) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("run")
    g.add_argument("--out", type=Path, default=REPO / "models" / name, help="exported model folder (default models/%(default)s)")
    g.add_argument("--work-dir", type=Path, default=Path("/tmp/dlm-train") / name, help="caches and the f32 checkpoint")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--device", default="cpu", help="cpu or cuda")
    g.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads; 1 was faster than 2 on a shared 2-core machine (see README)")
    g.add_argument("--steps", type=int, default=steps, help="optimizer steps (the LR schedule spans them)")
    g.add_argument("--minutes", type=float, default=0.0,
                   help="time budget: after 10 steps, shrink --steps to fit it (the run is then not reproducible)")
    g.add_argument("--log-every", type=int, default=10)
    g.add_argument("--eval-every", type=int, default=500, help="steps between validation evaluations (0: only at the end)")
    g.add_argument("--eval-n", type=int, default=128, help="validation problems per periodic evaluation")
    g.add_argument("--final-eval-n", type=int, default=500, help="validation problems evaluated at the end")
    g.add_argument("--eval-batch", type=int, default=128)
    g = ap.add_argument_group("optimization")
    g.add_argument("--batch", type=int, default=batch)
    g.add_argument("--lr", type=float, default=lr)
    g.add_argument("--min-lr-ratio", type=float, default=0.1, help="cosine floor, as a fraction of --lr")
    g.add_argument("--warmup", type=int, default=100, help="linear warm-up steps")
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--grad-clip", type=float, default=1.0)
    g.add_argument("--train-problems", type=int, default=gsm_synth.TRAIN_POOL,
                   help="size of the generated training pool (test2 is disjoint from the default pool only)")
    g.add_argument("--gen-length", type=int, default=GEN_LENGTH)
    g.add_argument("--bucket", action=argparse.BooleanOptionalAction, default=True,
                   help="batch rows of similar length together (less padding; same per-row distribution)")
    return ap


def add_model_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("model (teacher and AR baseline; students copy the teacher's)")
    g.add_argument("--d-model", type=int, default=128)
    g.add_argument("--layers", type=int, default=4)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--kv-heads", type=int, default=4)
    g.add_argument("--mlp", type=int, default=384)
    g.add_argument("--tokenizer", type=Path, default=T.DEFAULT_PATH)


def model_config(args, vocab_rows: int) -> M.ModelConfig:
    return M.ModelConfig(vocab_size=vocab_rows, d_model=args.d_model, n_layers=args.layers, n_heads=args.heads,
                         n_kv_heads=args.kv_heads, mlp_hidden=args.mlp, max_seq=MAX_SEQ)


def embedding_rows(tok) -> int:
    """Embedding rows: the tokenizer's size rounded up to a multiple of 64, with at least one row no
    token uses (Qwen2 readers take the last row as a stand-in mask id)."""
    return (tok.get_vocab_size() // 64 + 1) * 64


# ---------------------------------------------------------------------------------- environment

def setup(args) -> torch.device:
    """Seeds, threads, determinism; returns the device."""
    if args.device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: this torch has no CUDA device")
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    try:
        import numpy as np
        np.random.seed(args.seed)
    except ImportError:
        pass
    # on CUDA, warn instead of failing where an op has no deterministic kernel
    torch.use_deterministic_algorithms(True, warn_only=args.device.startswith("cuda"))
    args.work_dir.mkdir(parents=True, exist_ok=True)
    return torch.device(args.device)


# ----------------------------------------------------------------------------------------- data

@dataclass
class Special:
    eos: int
    mask: int
    pad: int


class Problems:
    """Tokenized problems: prompt ids (the question alone), answer ids (without EOS), final numbers."""

    def __init__(self, problems: list[dict], tok):
        self.raw = problems
        q = tok.encode_batch([p["question"] for p in problems], add_special_tokens=False)
        a = tok.encode_batch([p["answer"] for p in problems], add_special_tokens=False)
        self.prompts = [e.ids for e in q]
        self.answers = [e.ids for e in a]
        self.finals = [p["final"] for p in problems]

    def __len__(self) -> int:
        return len(self.raw)


def load_tokenizer(path: Path):
    tok = T.load(path)
    ids = T.special_ids(tok)
    return tok, Special(eos=ids[T.EOS], mask=ids[T.MASK], pad=ids[T.PAD])


def train_pool(n: int, tok) -> Problems:
    t0 = time.time()
    p = Problems(gsm_synth.split("train", n), tok)
    print(f"train pool: {len(p)} problems (seed {gsm_synth.SPLIT_SEEDS['train']}, disjoint from val/test) "
          f"in {time.time() - t0:.1f} s", flush=True)
    return p


def val_set(tok, n: int) -> Problems:
    return Problems(gsm_synth.read_jsonl(gsm_synth.DATA_DIR / "val.jsonl")[:n], tok)


@dataclass
class Canvas:
    """A padded batch laid out as [prompt | gen_length answer slots | padding] per row."""
    tokens: torch.Tensor      # [B, L] clean tokens (answer + EOS fill in the slots)
    prompt_len: torch.Tensor  # [B]
    valid_len: torch.Tensor   # [B] prompt + slots
    slots: torch.Tensor       # [B, L] bool: the answer slots

    def to(self, device) -> "Canvas":
        return Canvas(*(t.to(device) for t in (self.tokens, self.prompt_len, self.valid_len, self.slots)))


def diffusion_canvas(data: Problems, rows: list[int], gen_length: int, sp: Special) -> Canvas:
    """Diffusion layout: every row has gen_length slots, the answer then EOS up to the end (LLaDA SFT)."""
    P = [len(data.prompts[i]) for i in rows]
    L = max(P) + gen_length
    tokens = torch.full((len(rows), L), sp.pad, dtype=torch.long)
    for r, i in enumerate(rows):
        ans = data.answers[i][:gen_length - 1] + [sp.eos] * (gen_length - min(len(data.answers[i]), gen_length - 1))
        tokens[r, :P[r]] = torch.tensor(data.prompts[i])
        tokens[r, P[r]:P[r] + gen_length] = torch.tensor(ans)
    prompt_len = torch.tensor(P)
    valid_len = prompt_len + gen_length
    pos = torch.arange(L)[None]
    slots = (pos >= prompt_len[:, None]) & (pos < valid_len[:, None])
    return Canvas(tokens, prompt_len, valid_len, slots)


def block_windows(cv: Canvas, gen_length: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A semi-autoregressive decoding state per row: a block index b ~ U{0, gen_length / block - 1};
    returns (current, future) [B, L] bools: the slots of block b, and every slot after it. With the
    slots before block b left clean and `future` masked, a row looks like what the block-wise
    decoders (llada with blocks, fast_dllm, cd4lm) show the model while they fill block b."""
    n_blocks = gen_length // block
    b = torch.randint(0, n_blocks, (cv.tokens.shape[0],), device=cv.tokens.device)
    start = cv.prompt_len + b * block
    pos = torch.arange(cv.tokens.shape[1], device=cv.tokens.device)[None]
    current = cv.slots & (pos >= start[:, None]) & (pos < (start + block)[:, None])
    future = cv.slots & (pos >= (start + block)[:, None])
    return current, future


def ar_canvas(data: Problems, rows: list[int], sp: Special) -> Canvas:
    """Autoregressive layout: prompt, answer, one EOS; `slots` marks the answer and its EOS."""
    seqs = [(data.prompts[i], data.answers[i] + [sp.eos]) for i in rows]
    L = max(len(p) + len(a) for p, a in seqs)
    tokens = torch.full((len(rows), L), sp.pad, dtype=torch.long)
    for r, (p, a) in enumerate(seqs):
        tokens[r, :len(p) + len(a)] = torch.tensor(p + a)
    prompt_len = torch.tensor([len(p) for p, _ in seqs])
    valid_len = torch.tensor([len(p) + len(a) for p, a in seqs])
    pos = torch.arange(L)[None]
    slots = (pos >= prompt_len[:, None]) & (pos < valid_len[:, None])
    return Canvas(tokens, prompt_len, valid_len, slots)


class BatchSampler:
    """Random batches whose rows have similar lengths, so little of a padded batch is padding.

    Rows are grouped by length in bins `width` tokens wide; a step draws a bin with probability
    proportional to its size, then `batch` rows of it uniformly. Every row is therefore as likely as
    under uniform sampling; only the rows sharing a batch are correlated in length. bucket=False
    samples the whole pool uniformly."""

    def __init__(self, lengths: list[int], batch: int, bucket: bool = True, width: int = 4):
        self.batch = batch
        if not bucket:
            self.bins = [torch.arange(len(lengths))]
        else:
            keys = sorted({n // width for n in lengths})
            index = {k: i for i, k in enumerate(keys)}
            members: list[list[int]] = [[] for _ in keys]
            for row, n in enumerate(lengths):
                members[index[n // width]].append(row)
            self.bins = [torch.tensor(m) for m in members]
        self.weights = torch.tensor([float(len(b)) for b in self.bins])

    def __call__(self) -> list[int]:
        rows = self.bins[int(torch.multinomial(self.weights, 1))]
        return rows[torch.randint(0, len(rows), (self.batch,))].tolist()


# ------------------------------------------------------------------------------------- training

def make_optimizer(model: torch.nn.Module, args) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and p.requires_grad]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 and p.requires_grad]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98), eps=1e-8)


def lr_at(step: int, total: int, args) -> float:
    """Linear warm-up to --lr, then cosine down to --lr * --min-lr-ratio at `total`."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
    floor = args.lr * args.min_lr_ratio
    return floor + (args.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


class Run:
    """The step loop's bookkeeping: LR schedule, --minutes budget, progress lines with ETA."""

    def __init__(self, args, name: str):
        self.args, self.name = args, name
        self.total = args.steps
        self.t0 = time.time()
        self.t_last = self.t0
        self.step_times: list[float] = []
        self.eval_time = 0.0
        self.history: list[dict] = []

    def set_lr(self, opt, step: int) -> float:
        lr = lr_at(step, self.total, self.args)
        for g in opt.param_groups:
            g["lr"] = lr
        return lr

    def end_step(self, step: int, lr: float, losses: dict[str, float]) -> None:
        now = time.time()
        self.step_times.append(now - self.t_last)
        self.t_last = now
        if step == 9 and self.args.minutes > 0:
            per = sum(self.step_times[2:]) / len(self.step_times[2:])
            fit = int(self.args.minutes * 60 / per)
            if fit < self.total:
                print(f"--minutes {self.args.minutes}: {per:.2f} s/step, so {fit} steps instead of {self.total} "
                      f"(the LR schedule shrinks with them)", flush=True)
                self.total = max(fit, step + 2)
        if (step + 1) % self.args.log_every == 0 or step + 1 == self.total:
            recent = self.step_times[-self.args.log_every:]
            per = sum(recent) / len(recent)
            eta = per * (self.total - step - 1)
            parts = " ".join(f"{k} {v:.4f}" for k, v in losses.items())
            print(f"[{self.name}] step {step + 1}/{self.total} {parts} lr {lr:.2e} {per:.2f} s/step "
                  f"elapsed {fmt_time(now - self.t0)} ETA {fmt_time(eta)}", flush=True)

    def due_eval(self, step: int) -> bool:
        e = self.args.eval_every
        return e > 0 and (step + 1) % e == 0 and step + 1 < self.total

    def record_eval(self, step: int, result: dict, seconds: float) -> None:
        self.eval_time += seconds
        self.t_last += seconds  # evaluation time is not step time
        entry = {"step": step + 1, **result, "eval_seconds": round(seconds, 1)}
        self.history.append(entry)
        print(f"[{self.name}] eval at step {step + 1}: " + " ".join(f"{k} {v}" for k, v in result.items()) +
              f" ({seconds:.0f} s)", flush=True)

    def mean_step_seconds(self) -> float:
        t = self.step_times[2:] or self.step_times
        return sum(t) / max(1, len(t))


def evaluator(model, val: Problems, tok, sp: Special, args, device, **decode_args):
    """evaluate(n) -> (result, seconds): decode.evaluate on the first n validation problems with the
    run's gen_length and eval batch (decode_args: kind, block, mask_mode, threshold, ...), then back
    to training mode."""
    def evaluate(n: int):
        t0 = time.time()
        res = decode.evaluate(model, Problems(val.raw[:n], tok), tok, sp, gen_length=args.gen_length,
                              batch=args.eval_batch, device=device, **decode_args)
        model.train()
        return res, time.time() - t0
    return evaluate


def train_loop(model, opt, run: Run, args, step_loss, evaluate) -> dict:
    """The optimizer loop every trainer shares. Per step: the LR of the schedule, `step_loss(step)`
    -> (loss, {name: value} to log), backward, gradient clipping, the update, the progress line, and
    a validation evaluation every --eval-every steps; then the final evaluation, which it returns."""
    model.train()
    step = 0
    while step < run.total:
        lr = run.set_lr(opt, step)
        loss, logged = step_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        run.end_step(step, lr, {k: float(v) for k, v in logged.items()})
        if run.due_eval(step):
            res, secs = evaluate(args.eval_n)
            run.record_eval(step, res, secs)
        step += 1
    final, secs = evaluate(args.final_eval_n)
    run.record_eval(step - 1, final, secs)
    return final


def from_scratch(name: str, description: str, argv: list[str] | None, extra=None):
    """The setup of a model trained from scratch (teacher, AR baseline): arguments (4000 steps,
    batch 128, lr 2e-3, the model-size flags), determinism, tokenizer, a fresh model, the training
    pool, the validation set, the optimizer and the Run."""
    ap = base_parser(name, description, steps=4000, batch=128, lr=2e-3)
    add_model_args(ap)
    ap.add_argument("--init", type=Path, default=None,
                    help="start from this exported model folder instead of random weights (fine-tuning)")
    if extra:
        extra(ap)
    args = ap.parse_args(argv)
    device = setup(args)
    tok, sp = load_tokenizer(args.tokenizer)
    if args.init:
        model = M.load_folder(args.init, device)[0]
    else:
        model = M.Transformer(model_config(args, embedding_rows(tok))).to(device)
    print(f"[{name}] {model.n_params():,} parameters, {model.c}", flush=True)
    pool = train_pool(args.train_problems, tok)
    val = val_set(tok, max(args.eval_n, args.final_eval_n))
    return SimpleNamespace(args=args, device=device, tok=tok, sp=sp, model=model, pool=pool, val=val,
                           opt=make_optimizer(model, args), run=Run(args, name))


def fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def kl_from_probs(target: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(target || softmax(logits)) per row; target are probabilities (rows sum to 1)."""
    logq = torch.log_softmax(logits.float(), dim=-1)
    t = target.float()
    return (t * (torch.log(t.clamp_min(1e-12)) - logq)).sum(-1)


# --------------------------------------------------------------------------------------- export

def finish(model, args, run: Run, layout: str, extra: dict, final_eval: dict, name: str) -> None:
    """Export the model folder and a training.json next to its weights; save the f32 state."""
    tok, sp = load_tokenizer(args.tokenizer)
    special = T.special_ids(tok)
    extra = {"dlm_gen_length": args.gen_length, **extra}
    M.export(model, args.out, layout, args.tokenizer, special, extra)
    torch.save(model.state_dict(), args.work_dir / "final_f32.pt")
    def rel(v):
        if isinstance(v, Path):
            v = v.resolve()
            return v.relative_to(REPO).as_posix() if v.is_relative_to(REPO) else v.as_posix()
        return v

    info = {
        "model": name,
        "command": " ".join(["/usr/bin/python3", rel(Path(sys.argv[0]))] + sys.argv[1:]),
        "args": {k: rel(v) for k, v in vars(args).items()},
        "steps_run": len(run.step_times),
        "mean_step_seconds": round(run.mean_step_seconds(), 3),
        "train_minutes": round((time.time() - run.t0 - run.eval_time) / 60, 1),
        "eval_minutes": round(run.eval_time / 60, 1),
        "final_val": final_eval,
        "evals": run.history,
        "parameters": model.n_params(),
        "torch": torch.__version__, "python": platform.python_version(), "device": str(args.device),
        "threads": args.threads,
    }
    init = getattr(args, "init", None)
    if init and (init / "training.json").exists():  # fine-tuned: keep the record of what it started from
        with open(init / "training.json", encoding="utf-8") as f:
            info["init_training"] = json.load(f)
    with open(args.out / "training.json", "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    print(f"[{name}] exported {args.out} ({layout} layout): final validation {final_eval}", flush=True)


__all__ = ["asdict"]
