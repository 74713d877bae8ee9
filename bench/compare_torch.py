#!/usr/bin/env python3
"""dlm against a plain PyTorch forward of the same checkpoint (issue 23's PyTorch target).

Writes (or reuses) a random-weight bf16 checkpoint of dlm's 168M shape with dlm-make-checkpoint,
loads the same safetensors into a plain PyTorch LLaDA forward (bidirectional attention, RMSNorm,
SwiGLU, rotate-half RoPE: the module below, no transformers), checks that its logits agree with
dlm's (dlm-dump-logits), then times one full forward of --rows rows on --threads threads in both:
PyTorch in bf16 (torch.set_num_threads, best of --reps after warm-up) and dlm-bench-forward's
"full" case on the same folder (best of --reps). Prints both times and the ratio.

Set up the venv once (CPU torch from PyPI):  scripts/setup-torch-venv.sh
Run:  build/venv-torch/bin/python bench/compare_torch.py --threads 1
Options: --threads N (1), --rows N (128), --reps N (5), --dlm-bench PATH, --dlm-dump PATH,
--make-checkpoint PATH (default build/default/bench/...), --checkpoint DIR (default
build/compare/168M-bf16, written when absent), --shape NAME (168M), --peak (let dlm-bench-forward
measure its peaks too), --skip-check. DLM_ISA in the environment reaches dlm's programs.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "build", "default", "bench")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--shape", default="168M")
    p.add_argument("--checkpoint", default=None, help="model folder (written with --seed when absent)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dlm-bench", default=os.path.join(TOOLS, "dlm-bench-forward"))
    p.add_argument("--dlm-dump", default=os.path.join(TOOLS, "dlm-dump-logits"))
    p.add_argument("--make-checkpoint", default=os.path.join(TOOLS, "dlm-make-checkpoint"))
    p.add_argument("--peak", action="store_true", help="dlm-bench-forward also measures the machine's peaks")
    p.add_argument("--skip-check", action="store_true", help="time only, without the logits agreement check")
    a = p.parse_args()
    if a.threads < 1 or a.rows < 1 or a.reps < 1:
        p.error("--threads, --rows and --reps must be >= 1")
    if a.checkpoint is None:
        a.checkpoint = os.path.join(ROOT, "build", "compare", f"{a.shape}-bf16-seed{a.seed}")
    return a


def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_torch.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


class LLaDA(torch.nn.Module):
    """LLaDA's forward as dlm computes its "full" case: every row attends to every row."""

    def __init__(self, cfg, tensors, dtype):
        super().__init__()
        self.layers, self.heads = cfg["n_layers"], cfg["n_heads"]
        self.kv_heads = cfg.get("n_kv_heads") or self.heads
        self.eps, self.theta = cfg["rms_norm_eps"], cfg["rope_theta"]
        self.w = {k: v.to(dtype) for k, v in tensors.items()}
        self.head_dim = cfg["d_model"] // self.heads
        tied = cfg.get("weight_tying", False)
        self.head = self.w["model.transformer.wte.weight" if tied else "model.transformer.ff_out.weight"]

    def norm(self, x, weight):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * weight.float()).to(x.dtype)

    def rope(self, t, cos, sin):  # t: [heads, rows, head_dim]; dims i and i + d/2 rotate together
        half = t.shape[-1] // 2
        rotated = torch.cat((-t[..., half:], t[..., :half]), dim=-1)
        return (t.float() * cos + rotated.float() * sin).to(t.dtype)

    def forward(self, ids):
        n, d = ids.shape[0], self.head_dim
        inv = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        ang = torch.outer(torch.arange(n, dtype=torch.float64), inv)
        ang = torch.cat((ang, ang), dim=-1)
        cos, sin = ang.cos().float(), ang.sin().float()
        x = F.embedding(ids, self.w["model.transformer.wte.weight"])
        for i in range(self.layers):
            b = f"model.transformer.blocks.{i}."
            h = self.norm(x, self.w[b + "attn_norm.weight"])
            q = F.linear(h, self.w[b + "q_proj.weight"]).view(n, self.heads, d).transpose(0, 1)
            k = F.linear(h, self.w[b + "k_proj.weight"]).view(n, self.kv_heads, d).transpose(0, 1)
            v = F.linear(h, self.w[b + "v_proj.weight"]).view(n, self.kv_heads, d).transpose(0, 1)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if self.kv_heads != self.heads:
                k = k.repeat_interleave(self.heads // self.kv_heads, dim=0)
                v = v.repeat_interleave(self.heads // self.kv_heads, dim=0)
            a = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=False)
            x = x + F.linear(a[0].transpose(0, 1).reshape(n, self.heads * d), self.w[b + "attn_out.weight"])
            h = self.norm(x, self.w[b + "ff_norm.weight"])
            g = F.silu(F.linear(h, self.w[b + "ff_proj.weight"])) * F.linear(h, self.w[b + "up_proj.weight"])
            x = x + F.linear(g, self.w[b + "ff_out.weight"])
        return F.linear(self.norm(x, self.w["model.transformer.ln_f.weight"]), self.head)


def onednn_matmul(cfg, rows, threads):
    """The oneDNN implementation PyTorch runs a bf16 [rows x d] x [d x mlp] product on (AMX or not)."""
    code = (f"import torch, torch.nn.functional as F; torch.set_num_threads({threads}); "
            f"x = torch.ones({rows}, {cfg['d_model']}, dtype=torch.bfloat16); w = torch.ones({cfg['mlp_hidden_size']}, {cfg['d_model']}, dtype=torch.bfloat16)\n"
            "with torch.inference_mode(): F.linear(x, w)")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ONEDNN_VERBOSE="1"), capture_output=True, text=True)
    for line in r.stdout.splitlines():
        f = line.split(",")
        if len(f) > 6 and f[2] == "primitive" and f[3] == "exec" and f[5] == "matmul":
            return f[6]
    return "not oneDNN (no matmul in ONEDNN_VERBOSE's output)"


def canvas(rows, vocab):
    return torch.tensor([(i * 7919) % (vocab - 1) for i in range(rows)], dtype=torch.long)  # dlm-bench-forward's


def agreement(name, ours, ref):
    """One line of how far `ours` is from dlm's logits `ref` ([rows, vocab], f32)."""
    diff = (ours.float() - ref).abs()
    scale = ref.abs().max().item()
    rel = diff.max().item() / scale
    top1 = (ours.float().argmax(-1) == ref.argmax(-1)).float().mean().item()
    # top-1 of one side inside the other's top-5: near-ties of random weights swap places, wrong math does not
    top5 = ref.topk(5, dim=-1).indices
    in5 = (top5 == ours.float().argmax(-1, keepdim=True)).any(-1).float().mean().item()
    print(f"  {name:<34} max |diff| {diff.max().item():.4g} ({rel:.2g} of max |logit| {scale:.3g}), "
          f"mean |diff| {diff.mean().item():.3g}, top-1 equal {100 * top1:.1f} %, in dlm's top-5 {100 * in5:.1f} %")
    return rel, in5


def dlm_logits(args, cfg, ids, dtype):
    """dlm's logits of the canvas `ids` (dlm-dump-logits), weights held as stored or widened to f32."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.f32")
        cmd = [args.dlm_dump, "-m", args.checkpoint, "--out", out, "--dtype", dtype, "--tokens", ",".join(map(str, ids.tolist()))]
        print("  " + run(cmd, args.threads).strip())
        with open(out, "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).view(len(ids), cfg["vocab_size"])


def check(args, model_f32, model_bf16, cfg, ids):
    """The same math first (both in f32 on the bf16 weights widened: rounding of f32 sums only), then
    the two timed forwards, dlm's bf16 path (AMX tiles round activations to bf16) and PyTorch's bf16."""
    ref32, ref16 = dlm_logits(args, cfg, ids, "f32"), dlm_logits(args, cfg, ids, "keep")
    with torch.inference_mode():
        ours32, ours16 = model_f32(ids), model_bf16(ids)
        rel, in5 = agreement("PyTorch f32 vs dlm f32", ours32, ref32)
        rel16, in5_16 = agreement("PyTorch f32 vs dlm bf16 (timed)", ours32, ref16)
        agreement("PyTorch bf16 (timed) vs dlm bf16", ours16, ref16)
    # Measured on the 168M shape: f32 against f32 agrees to a few 1e-6 of the largest logit, the bf16
    # paths to a percent or two; a wrong RoPE, norm or weight layout is tens of percent.
    if rel > 1e-3 or in5 < 0.99 or rel16 > 0.05 or in5_16 < 0.95:
        sys.exit("compare_torch.py: PyTorch's logits do not agree with dlm's: the two forwards differ, timing them proves nothing")


def time_torch(model, ids, reps):
    with torch.inference_mode():
        for _ in range(2):
            model(ids)
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            model(ids)
            best = min(best, time.perf_counter() - t0)
    return best


def time_dlm(args):
    cmd = [args.dlm_bench, "-m", args.checkpoint, "--canvas", str(args.rows), "--threads", str(args.threads),
           "--reps", str(args.reps), "--block", "1", "--cache", "0"] + ([] if args.peak else ["--no-peak"])
    out = run(cmd, args.threads)
    kernels = re.search(r"kernels (\S+)", out)
    full = re.search(r"full\s+(\d+) rows x\s+\d+ keys, (\d+) thread\(s\):\s+([\d.]+) ms(.*)", out)
    if not full:
        sys.exit(f"compare_torch.py: no 'full' line in dlm-bench-forward's output:\n{out}")
    return float(full.group(3)) / 1e3, kernels.group(1) if kernels else "?", full.group(0).strip(), " ".join(cmd)


def main():
    args = parse_args()
    if not os.path.exists(os.path.join(args.checkpoint, "model.safetensors")):
        os.makedirs(os.path.dirname(args.checkpoint), exist_ok=True)
        run([args.make_checkpoint, "--shape", args.shape, "--out", args.checkpoint, "--dtype", "bf16", "--seed", str(args.seed)], 1)
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llada":
        sys.exit(f"compare_torch.py: {args.checkpoint} is a {cfg.get('model_type')} model; this script computes LLaDA's layout")
    tensors = load_file(os.path.join(args.checkpoint, "model.safetensors"))
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'}), {args.threads} thread(s)")
    print(f"model: {args.checkpoint} ({cfg['d_model']} wide, {cfg['n_layers']} layers, {cfg['n_heads']} heads, "
          f"MLP {cfg['mlp_hidden_size']}, vocabulary {cfg['vocab_size']}, bf16 weights)")
    print(f"PyTorch's bf16 matrix products: {onednn_matmul(cfg, args.rows, args.threads)}")
    ids = canvas(args.rows, cfg["vocab_size"])
    model = LLaDA(cfg, tensors, torch.bfloat16)
    if not args.skip_check:
        print(f"agreement with dlm's logits ({args.rows} rows, bidirectional):")
        check(args, LLaDA(cfg, tensors, torch.float32), model, cfg, ids)
    del tensors
    t_torch = time_torch(model, ids, args.reps)
    t_dlm, kernels, line, cmd = time_dlm(args)
    print(f"full forward, {args.rows} rows, bidirectional, logits of every row, {args.threads} thread(s), best of {args.reps}:")
    print(f"  {'PyTorch bf16':<22}{1e3 * t_torch:9.2f} ms")
    print(f"  {'dlm (' + kernels + ')':<22}{1e3 * t_dlm:9.2f} ms   [{cmd}]")
    print(f"  dlm is {t_torch / t_dlm:.2f}x PyTorch's speed (issue 23's target: >= 2x)")


if __name__ == "__main__":
    main()
