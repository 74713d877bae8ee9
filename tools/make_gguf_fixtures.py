#!/usr/bin/python3
"""Writes the GGUF fixtures under tests/data/gguf/ that tests/test_gguf.cpp checks dlm's GGUF reader
and weight source against, with the `gguf` package from PyPI (the writer and quantizer llama.cpp's
own converter uses), never with dlm's code.

  llada_tiny.{f32,f16,bf16}.gguf  tests/data/models/llada_tiny (tools/make_model_fixtures.py) as
                                  llama.cpp's LLaDAModel converter writes it: names blk.N.attn_q ...,
                                  keys llada.*, attn_q/attn_k rows permuted per head for ggml's
                                  adjacent-pair RoPE (written here from the definition below)
  dream_tiny.{f32,bf16}.gguf      tests/data/models/dream_tiny as DreamModel writes it (tied head:
                                  no output.weight; q/k/v biases; no permutation)
  llada_q.<type>.gguf             a random LLaDA-shaped model with rows of 256 (block sizes of every
                                  quantized type divide them), F32 and quantized: q8_0 and q4_0 by
                                  gguf.quants.quantize; q4_k_m and q5_k_m (Q4_K/Q5_K plus Q6_K
                                  tensors) by llama.cpp's llama-quantize when --llama-cpp names a
                                  llama.cpp build (the gguf package cannot quantize K-quants)
  llada_q.json, llada_q.logits.<type>.f32
                                  input ids and reference logits of each llada_q file (and of the
                                  unquantized model, "f32", whose file is not kept): its tensors
                                  dequantized with gguf.quants.dequantize, un-permuted, and run in
                                  f32 through transformers' Llama with bidirectional attention (the
                                  llada_tiny reference of make_model_fixtures.py)
  tokenizer.gguf                  tests/data/tokenizer/tokenizer.json's vocabulary as tokenizer.ggml.*
                                  keys (pre "qwen2"), no tensors: the tokenizer test's input
  lladamoe_tiny/                  a random LLaDA-MoE model in Hugging Face's layout (config.json in
                                  LLaDAMoEConfig's keys, model.safetensors in bf16): every layer
                                  experts, q/k norms, no shared expert and no expert bias, which is
                                  what llama.cpp's llada-moe graph computes
  lladamoe_tiny.{bf16,q8_0}.gguf  that model as llama.cpp's LLaDAMoEModel converter writes it: keys
                                  llada-moe.* (expert_count, expert_used_count,
                                  expert_feed_forward_length; no feed_forward_length, the config has
                                  no intermediate_size), tensors blk.N.{attn_q_norm, attn_k_norm,
                                  ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps} (the
                                  experts stacked into one [experts, rows, cols] tensor each), no q/k
                                  permutation; q8_0: every matrix Q8_0 but the router (F32, as
                                  llama-quantize keeps ffn_gate_inp)
  lladamoe_tiny.q8_0.dequantized.gguf
                                  the q8_0 file's tensors dequantized by the gguf package, in F32:
                                  the reference the Q8_0 experts are checked against
  lladamoe_tiny.json              input ids of those checks
  llada2_tiny.{bf16,q8_0}.gguf    tests/data/families/llada2_tiny (tools/make_family_fixtures.py; f32,
                                  with transformers' logits) as llama.cpp's LLaDA2MoeModel converter
                                  (pull request #17454, a BailingMoeV2Model) writes it with --outtype
                                  bf16 / q8_0: keys llada2.* (expert_count, expert_used_count,
                                  expert_group_count, expert_group_used_count, expert_gating_func 2,
                                  expert_feed_forward_length, expert_shared_feed_forward_length,
                                  expert_shared_count, expert_weights_scale, expert_weights_norm,
                                  leading_dense_block_count, rope.dimension_count = head_dim ·
                                  partial_rotary_factor, rope.scaling.type none, key/value_length),
                                  diffusion.shift_logits false, the pad id; tensors blk.N.attn_qkv
                                  (query_key_value as it is, q, k and v rows stacked, not permuted),
                                  attn_q_norm, attn_k_norm, attn_output, dense ffn_gate/up/down,
                                  ffn_gate_inp, exp_probs_b.bias, stacked ffn_{gate,up,down}_exps,
                                  ffn_{gate,up,down}_shexp; the router and the vectors F32, every
                                  other matrix BF16 or Q8_0. The converter's diffusion decoding keys
                                  (gguf-py Keys.Diffusion BATCH_STRATEGY, EOS_EARLY_STOP, THRESHOLD,
                                  HYBRID_DIFFUSION, which dlm does not read) are not written
  diffusion_gemma_tiny.{bf16,q8_0}.gguf
                                  tests/data/families/diffusion_gemma_tiny as llama.cpp's
                                  DiffusionGemmaModel converter writes it (architecture
                                  "diffusion-gemma", ggml-org/llama.cpp 15ad8f42): Gemma 4's keys
                                  (per-layer head_count_kv, sliding_window_pattern, key_length /
                                  key_length_swa, rope.freq_base / freq_base_swa), diffusion.canvas_length,
                                  the decoder's tensors under Gemma 4's names, self_cond_*,
                                  enc_layer_output_scale, rope_freqs (1 for the rotated pairs, 1e30 for
                                  the rest), no attn_v on the full layer, norms unshifted, a placeholder
                                  "gemma4" vocabulary of 512 tokens (Gemma 4's first four, its 256 byte
                                  tokens, "▁", "▁▁" and their merge); bf16: matrices BF16, vectors and the
                                  router F32 (as the converter's --outtype bf16); q8_0: matrices Q8_0 but
                                  the router (F32) and ffn_down_exps (rows of 24, not whole blocks: BF16),
                                  and tests/data/cli/tokenizer.json's byte-level BPE in place of the
                                  placeholder, so dlm-generate runs the file (the CLI tests)

The names, keys and LLaDA's q/k permutation are tools/write_gguf.py's (for a head of d rows, GGUF row
2j + s holds Hugging Face row s*d/2 + j).

Set up once (CPU wheels from PyPI):
    python3 -m venv build/venv && build/venv/bin/pip install gguf numpy safetensors torch transformers
Usage:
    build/venv/bin/python tools/make_gguf_fixtures.py [--llama-cpp /path/to/llama.cpp] [--only lladamoe|llada2] [output_dir]
"""
import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile

try:
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from safetensors.torch import load_file
except ImportError as e:
    sys.exit(f"make_gguf_fixtures.py: {e}; install the packages: "
             "python3 -m venv build/venv && build/venv/bin/pip install gguf numpy safetensors torch transformers")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from write_gguf import add_tokenizer, config_of, finish, gguf_name, rope_order, to_gguf_tensors, write  # noqa: E402


def from_gguf_tensors(tensors, arch, head_dim):
    """The inverse of to_gguf_tensors' permutation (names stay GGUF's)."""
    out = {}
    for g, w in tensors.items():
        if arch == "llada" and (".attn_q." in g or ".attn_k." in g):
            back = np.empty_like(w)
            back[rope_order(w.shape[0], head_dim)] = w
            w = back
        out[g] = w
    return out


def write_tensors(w, tensors, kind):
    """Adds every tensor as kind(name, t) gives it (an array, or (bytes, raw GGUF type)), then writes the file."""
    for name, t in tensors.items():
        t = kind(name, t)
        if isinstance(t, tuple):
            w.add_tensor(name, t[0], raw_dtype=t[1])
        else:
            w.add_tensor(name, t)
    finish(w)


def read_tensors(path):
    """Every tensor of a GGUF file, dequantized by the gguf package, in [rows, cols] order."""
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        out[t.name] = a.reshape([int(d) for d in reversed(t.shape)]) if t.shape.size > 1 else a.reshape(-1)
    return out, {t.name: t.tensor_type.name for t in r.tensors}


def tiny(name, arch, types, out_dir):
    folder = os.path.join(ROOT, "tests", "data", "models", name)
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    hf = {k: v.float().numpy() for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
    arch_of, cfg = config_of(c)
    assert arch_of == arch, (name, arch_of)
    if c.get("tie_word_embeddings"):
        hf.pop("lm_head.weight", None)
    tensors = to_gguf_tensors(hf, arch, cfg["hidden"] // cfg["heads"])
    for label, qtype in types:
        write(os.path.join(out_dir, f"{name}.{label}.gguf"), arch, cfg, tensors, qtype)


def llada_q(out_dir, llama_cpp):
    import torch
    import transformers
    from make_model_fixtures import run, full, check_rope_theta
    vocab, hidden, ffn, heads, kv_heads, layers = 256, 256, 512, 4, 2, 1
    head_dim = hidden // heads
    cfg = dict(n_layers=layers, hidden=hidden, ffn=ffn, heads=heads, kv_heads=kv_heads, theta=10000.0, eps=1e-5,
               context=256, mask_id=vocab - 1, eos_id=1, vocab=vocab)
    hcfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, rope_theta=10000.0, rms_norm_eps=1e-5, max_position_embeddings=256,
        tie_word_embeddings=False, attention_bias=False, hidden_act="silu")
    hcfg._attn_implementation = "eager"
    check_rope_theta(hcfg, 10000.0)
    rng = np.random.default_rng(14)
    model = transformers.LlamaForCausalLM(hcfg).eval()
    hf = {}
    for name, p in model.state_dict().items():
        shape = tuple(p.shape)
        if name.endswith("norm.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif "embed_tokens" in name:
            a = rng.standard_normal(shape)
        else:
            a = rng.standard_normal(shape) / shape[1] ** 0.5
        hf[name] = a.astype(np.float32)
    tensors = to_gguf_tensors(hf, "llada", head_dim)
    scratch = tempfile.mkdtemp()  # the F32 file (3 MB) is only the quantizers' input and the baseline
    files = {"f32": os.path.join(scratch, "llada_q.f32.gguf")}
    write(files["f32"], "llada", cfg, tensors, T.F32)
    for label, qtype in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0)):
        files[label] = os.path.join(out_dir, f"llada_q.{label}.gguf")
        write(files[label], "llada", cfg, tensors, qtype)
    if llama_cpp:
        exe = os.path.join(llama_cpp, "build", "bin", "llama-quantize")
        for label, kind in (("q4_k_m", "Q4_K_M"), ("q5_k_m", "Q5_K_M")):
            files[label] = os.path.join(out_dir, f"llada_q.{label}.gguf")
            subprocess.run([exe, files["f32"], files[label], kind], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        print("make_gguf_fixtures.py: no --llama-cpp: the K-quant fixtures (q4_k_m, q5_k_m) are not written", file=sys.stderr)

    g = torch.Generator().manual_seed(14)
    prompt, gen = 8, 16
    ids = torch.randint(0, vocab - 1, (prompt + gen,), generator=g)
    ids[prompt + 3:prompt + 9] = vocab - 1
    meta = {"generator": f"tools/make_gguf_fixtures.py (gguf {importlib.metadata.version('gguf')}, "
                         f"torch {torch.__version__}, transformers {transformers.__version__})",
            "input_ids": ids.tolist(), "prompt_length": prompt, "gen_length": gen, "block_length": gen, "cases": {}}
    inverse = {v: k for k, v in ((k, gguf_name(k)) for k in hf)}
    for label, path in files.items():
        deq, kinds = read_tensors(path)
        state = {inverse[n]: torch.from_numpy(w.copy()) for n, w in from_gguf_tensors(deq, "llada", head_dim).items()}
        model.load_state_dict(state)
        logits = run(model, ids, full(prompt + gen))
        out = f"llada_q.logits.{label}.f32"
        with open(os.path.join(out_dir, out), "wb") as f:
            f.write(logits.numpy().astype("<f4").tobytes())
        meta["cases"][label] = {"logits": out, "types": sorted(set(kinds.values()))}
        if label != "f32":
            meta["cases"][label]["gguf"] = os.path.basename(path)
    with open(os.path.join(out_dir, "llada_q.json"), "w") as f:
        json.dump(meta, f, indent=2)


def lladamoe(out_dir):
    """The LLaDA-MoE fixtures (see the top)."""
    import torch
    from safetensors.torch import save_file
    vocab, hidden, heads, layers, experts, used, width = 64, 32, 2, 2, 4, 2, 64
    head_dim = hidden // heads
    config = {"architectures": ["LLaDAMoEModelLM"], "model_type": "lladamoe", "vocab_size": vocab, "hidden_size": hidden,
              "num_attention_heads": heads, "num_key_value_heads": heads, "num_hidden_layers": layers,
              "dense_intermediate_size": 64, "expert_intermediate_size": width, "num_experts": experts,
              "num_experts_per_tok": used, "moe_layer_freq": [1] * layers, "shared_expert_intermediate_size": None,
              "moe_router_enable_expert_bias": False, "moe_router_score_function": "softmax", "norm_topk_prob": False,
              "routed_scaling_factor": 1, "qk_layernorm": True, "attention_bias": False, "hidden_act": "silu",
              "rms_norm_eps": 1e-6, "rope_theta": 50000.0, "rope_scaling": None, "partial_rotary_factor": 1.0,
              "max_position_embeddings": 256, "tie_word_embeddings": False, "mask_token_id": vocab - 1,
              "eos_token_id": vocab - 2, "torch_dtype": "bfloat16"}
    rng = np.random.default_rng(15)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / cols ** 0.5).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    hf = {"model.embed_tokens.weight": rng.standard_normal((vocab, hidden)).astype(np.float32)}
    for l in range(layers):
        p = f"model.layers.{l}."
        hf[p + "input_layernorm.weight"] = norm(hidden)
        for x in "qkvo":
            hf[p + f"self_attn.{x}_proj.weight"] = mat(hidden, hidden)
        hf[p + "self_attn.q_norm.weight"] = norm(head_dim)
        hf[p + "self_attn.k_norm.weight"] = norm(head_dim)
        hf[p + "post_attention_layernorm.weight"] = norm(hidden)
        hf[p + "mlp.gate.weight"] = mat(experts, hidden)
        for e in range(experts):
            hf[p + f"mlp.experts.{e}.gate_proj.weight"] = mat(width, hidden)
            hf[p + f"mlp.experts.{e}.up_proj.weight"] = mat(width, hidden)
            hf[p + f"mlp.experts.{e}.down_proj.weight"] = mat(hidden, width)
    hf["model.norm.weight"] = norm(hidden)
    hf["lm_head.weight"] = mat(vocab, hidden)
    # bf16 values, so the bf16 safetensors, the bf16 GGUF and the quantizer's input are the same numbers
    hf = {k: torch.from_numpy(v).to(torch.bfloat16).float().numpy() for k, v in hf.items()}
    folder = os.path.join(out_dir, "lladamoe_tiny")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    save_file({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in hf.items()}, os.path.join(folder, "model.safetensors"))

    # LLaDAMoEModel's tensors: Qwen2-MoE names, the experts of a layer stacked per matrix, no permutation
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate": "ffn_gate_inp"}
    tensors = {"token_embd.weight": hf["model.embed_tokens.weight"]}
    for l in range(layers):
        for part, stem in names.items():
            tensors[f"blk.{l}.{stem}.weight"] = hf[f"model.layers.{l}.{part}.weight"]
        for part, stem in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
            tensors[f"blk.{l}.{stem}.weight"] = np.stack([hf[f"model.layers.{l}.mlp.experts.{e}.{part}.weight"] for e in range(experts)])
    tensors["output_norm.weight"] = hf["model.norm.weight"]
    tensors["output.weight"] = hf["lm_head.weight"]

    def write_moe(path, kind):
        w = gguf.GGUFWriter(path, "llada-moe")
        w.add_block_count(layers)
        w.add_context_length(config["max_position_embeddings"])
        w.add_embedding_length(hidden)
        w.add_head_count(heads)
        w.add_head_count_kv(heads)
        w.add_rope_freq_base(config["rope_theta"])
        w.add_layer_norm_rms_eps(config["rms_norm_eps"])
        w.add_expert_count(experts)
        w.add_expert_used_count(used)
        w.add_expert_feed_forward_length(width)
        w.add_mask_token_id(config["mask_token_id"])  # the converter writes LLaDA-MoE's 156895; the tiny vocabulary has 64
        w.add_causal_attention(False)
        w.add_diffusion_shift_logits(False)
        w.add_eos_token_id(config["eos_token_id"])
        write_tensors(w, tensors, kind)

    def bf16(name, t):
        return t.astype(np.float32) if t.ndim == 1 else (gguf.quants.quantize(t, T.BF16), T.BF16)

    def q8_0(name, t):
        return t.astype(np.float32) if t.ndim == 1 or "ffn_gate_inp" in name else (gguf.quants.quantize(t, T.Q8_0), T.Q8_0)

    write_moe(os.path.join(out_dir, "lladamoe_tiny.bf16.gguf"), bf16)
    q8 = os.path.join(out_dir, "lladamoe_tiny.q8_0.gguf")
    write_moe(q8, q8_0)
    deq, _ = read_tensors(q8)
    write_moe(os.path.join(out_dir, "lladamoe_tiny.q8_0.dequantized.gguf"), lambda name, t: deq[name].astype(np.float32))

    g = torch.Generator().manual_seed(15)
    ids = torch.randint(0, vocab - 2, (24,), generator=g)
    ids[10:18] = vocab - 1
    with open(os.path.join(out_dir, "lladamoe_tiny.json"), "w") as f:
        json.dump({"generator": f"tools/make_gguf_fixtures.py (gguf {importlib.metadata.version('gguf')}, torch {torch.__version__})",
                   "input_ids": ids.tolist()}, f, indent=2)


def llada2_tensors(hf, cfg):
    """LLaDA2MoeModel's tensors of a LLaDA2MoeModelLM state dict (BailingMoeV2's names; the experts of
    a layer stacked per matrix as [experts, rows, cols]; nothing permuted)."""
    names = {"input_layernorm": "attn_norm", "attention.query_key_value": "attn_qkv", "attention.query_layernorm": "attn_q_norm",
             "attention.key_layernorm": "attn_k_norm", "attention.dense": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp",
             "mlp.shared_experts.gate_proj": "ffn_gate_shexp", "mlp.shared_experts.up_proj": "ffn_up_shexp",
             "mlp.shared_experts.down_proj": "ffn_down_shexp"}
    out = {"token_embd.weight": hf["model.word_embeddings.weight"]}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        for part, stem in names.items():
            if p + part + ".weight" in hf:
                out[f"blk.{l}.{stem}.weight"] = hf[p + part + ".weight"]
        if p + "mlp.gate.expert_bias" in hf:  # the converter renames it .expert_bias.bias: exp_probs_b
            out[f"blk.{l}.exp_probs_b.bias"] = hf[p + "mlp.gate.expert_bias"]
        if p + "mlp.experts.0.gate_proj.weight" in hf:
            for part, stem in (("down_proj", "ffn_down_exps"), ("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps")):
                out[f"blk.{l}.{stem}.weight"] = np.stack([hf[f"{p}mlp.experts.{e}.{part}.weight"] for e in range(cfg["num_experts"])])
    out["output_norm.weight"] = hf["model.norm.weight"]
    out["output.weight"] = hf["lm_head.weight"]
    return out


def llada2(out_dir):
    """The LLaDA2 fixtures (see the top)."""
    from safetensors.numpy import load_file as load_numpy
    folder = os.path.join(ROOT, "tests", "data", "families", "llada2_tiny")
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    tensors = llada2_tensors(load_numpy(os.path.join(folder, "model.safetensors")), c)
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]

    def write_llada2(path, kind, ftype):
        w = gguf.GGUFWriter(path, "llada2")
        # TextModel.set_gguf_parameters
        w.add_block_count(c["num_hidden_layers"])
        w.add_context_length(c["max_position_embeddings"])
        w.add_embedding_length(c["hidden_size"])
        w.add_feed_forward_length(c["intermediate_size"])
        w.add_head_count(c["num_attention_heads"])
        w.add_head_count_kv(c["num_key_value_heads"])
        w.add_rope_freq_base(c["rope_theta"])
        w.add_layer_norm_rms_eps(c["rms_norm_eps"])
        w.add_expert_used_count(c["num_experts_per_tok"])
        w.add_expert_group_count(c["n_group"])
        w.add_expert_group_used_count(c["topk_group"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)  # score_function "sigmoid"
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_file_type(ftype)
        # BailingMoeV2Model.set_gguf_parameters
        w.add_rope_dimension_count(int(head_dim * c.get("partial_rotary_factor", 0.5)))
        w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
        w.add_leading_dense_block_count(c["first_k_dense_replace"])
        w.add_vocab_size(c["vocab_size"])
        w.add_expert_feed_forward_length(c["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(c.get("moe_shared_expert_intermediate_size", c["moe_intermediate_size"] * c["num_shared_experts"]))
        w.add_expert_weights_scale(c["routed_scaling_factor"])
        w.add_expert_count(c["num_experts"])
        w.add_expert_shared_count(c["num_shared_experts"])
        w.add_expert_weights_norm(c["norm_topk_prob"])
        # LLaDA2MoeModel.set_gguf_parameters (its diffusion decoding keys aside) and the tokenizer's ids
        w.add_pad_token_id(c["pad_token_id"])
        w.add_diffusion_shift_logits(False)
        w.add_mask_token_id(c["mask_token_id"])  # the converter takes LLaDA2's 156895 from the tokenizer; the tiny vocabulary has 300
        w.add_eos_token_id(c["eos_token_id"])
        write_tensors(w, tensors, kind)

    def as_type(qtype):  # the converter's choice: vectors and the router F32, every other matrix qtype
        return lambda name, t: t.astype(np.float32) if t.ndim == 1 or "ffn_gate_inp" in name else (gguf.quants.quantize(t, qtype), qtype)

    write_llada2(os.path.join(out_dir, "llada2_tiny.bf16.gguf"), as_type(T.BF16), gguf.LlamaFileType.MOSTLY_BF16)
    write_llada2(os.path.join(out_dir, "llada2_tiny.q8_0.gguf"), as_type(T.Q8_0), gguf.LlamaFileType.MOSTLY_Q8_0)


def diffusion_gemma(out_dir):
    """tests/data/families/diffusion_gemma_tiny as llama.cpp's DiffusionGemmaModel converter
    (conversion/diffusion_gemma.py on Gemma4Model, ggml-org/llama.cpp 15ad8f42) writes it (see the top)."""
    folder = os.path.join(ROOT, "tests", "data", "families", "diffusion_gemma_tiny")
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    t = c["text_config"]
    hf = {k: v.float().numpy() for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
    n, types = t["num_hidden_layers"], t["layer_types"]
    swa = [x == "sliding_attention" for x in types]
    full = [i for i in range(n) if not swa[i]][0]
    plc = t.get("per_layer_config", {})
    dim = [plc.get(str(i), {}).get("head_dim", t["head_dim"]) for i in range(n)]
    kv = [plc.get(str(i), {}).get("num_key_value_heads", t["num_key_value_heads"]) for i in range(n)]
    # Gemma 4's tensor map on the decoder's names (model.decoder.* -> model.*); norms as they are (no +1)
    names = {"input_layernorm.weight": "attn_norm", "self_attn.q_proj.weight": "attn_q", "self_attn.k_proj.weight": "attn_k",
             "self_attn.v_proj.weight": "attn_v", "self_attn.o_proj.weight": "attn_output", "self_attn.q_norm.weight": "attn_q_norm",
             "self_attn.k_norm.weight": "attn_k_norm", "post_attention_layernorm.weight": "post_attention_norm",
             "pre_feedforward_layernorm.weight": "ffn_norm", "post_feedforward_layernorm.weight": "post_ffw_norm",
             "pre_feedforward_layernorm_2.weight": "pre_ffw_norm_2", "post_feedforward_layernorm_1.weight": "post_ffw_norm_1",
             "post_feedforward_layernorm_2.weight": "post_ffw_norm_2", "mlp.gate_proj.weight": "ffn_gate",
             "mlp.up_proj.weight": "ffn_up", "mlp.down_proj.weight": "ffn_down", "router.proj.weight": "ffn_gate_inp",
             "router.scale": "ffn_gate_inp.scale", "router.per_expert_scale": "ffn_down_exps.scale",
             "experts.gate_up_proj": "ffn_gate_up_exps", "experts.down_proj": "ffn_down_exps", "layer_scalar": "layer_output_scale"}
    tensors = {"token_embd.weight": hf["model.decoder.embed_tokens.weight"], "output_norm.weight": hf["model.decoder.norm.weight"]}
    for part, stem in (("pre_norm", "self_cond_pre_norm"), ("gate_proj", "self_cond_gate"), ("up_proj", "self_cond_up"),
                       ("down_proj", "self_cond_down")):
        tensors[stem + ".weight"] = hf[f"model.decoder.self_conditioning.{part}.weight"]
    pairs = int(dim[full] * t["rope_parameters"]["full_attention"]["partial_rotary_factor"] / 2)
    tensors["rope_freqs.weight"] = np.array([1.0] * pairs + [1e30] * (dim[full] // 2 - pairs), dtype=np.float32)
    for l in range(n):
        for part, stem in names.items():
            if (k := f"model.decoder.layers.{l}.{part}") in hf:
                tensors[f"blk.{l}.{stem}" + ("" if stem.endswith(".scale") else ".weight")] = hf[k]
        tensors[f"blk.{l}.enc_layer_output_scale.weight"] = hf[f"model.encoder.language_model.layers.{l}.layer_scalar"]

    def write_dg(path, kind, tokenizer=None):
        w = gguf.GGUFWriter(path, "diffusion-gemma")
        w.add_block_count(n)
        w.add_context_length(t["max_position_embeddings"])
        w.add_embedding_length(t["hidden_size"])
        w.add_feed_forward_length(t["intermediate_size"])
        w.add_head_count(t["num_attention_heads"])
        w.add_head_count_kv(kv)
        w.add_causal_attention(False)
        w.add_rope_freq_base(t["rope_parameters"]["full_attention"]["rope_theta"])
        w.add_rope_freq_base_swa(t["rope_parameters"]["sliding_attention"]["rope_theta"])
        w.add_layer_norm_rms_eps(t["rms_norm_eps"])
        w.add_expert_count(t["num_experts"])
        w.add_expert_used_count(t["top_k_experts"])
        w.add_final_logit_softcapping(t["final_logit_softcapping"])
        w.add_sliding_window(t["sliding_window"])
        w.add_shared_kv_layers(0)
        w.add_embedding_length_per_layer_input(0)
        w.add_sliding_window_pattern(swa)
        w.add_key_length(dim[full])
        w.add_value_length(dim[full])
        w.add_key_length_swa(t["head_dim"])
        w.add_value_length_swa(t["head_dim"])
        w.add_expert_feed_forward_length(t["moe_intermediate_size"])
        w.add_rope_dimension_count(dim[full])
        w.add_rope_dimension_count_swa(t["head_dim"])
        w.add_uint32("diffusion.canvas_length", c["canvas_length"])
        vocab = t["vocab_size"]
        if tokenizer:  # a byte-level BPE dlm reads, so the programs can run the file
            add_tokenizer(w, tokenizer, vocab)
        else:  # the tiny model has no tokenizer: Gemma 4's first ids, its 256 byte tokens, then placeholders
            w.add_tokenizer_model("gemma4")
            tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581", "\u2581\u2581"]
            types = [3, 3, 3, 2] + [6] * 256 + [1, 1]
            w.add_token_list(tokens + [f"<unused{i}>" for i in range(len(tokens), vocab)])
            w.add_token_scores([0.0] * vocab)
            w.add_token_types(types + [1] * (vocab - len(types)))
            w.add_token_merges(["\u2581 \u2581"])
        w.add_bos_token_id(t["bos_token_id"])
        w.add_eos_token_id(t["eos_token_id"])
        w.add_pad_token_id(t["pad_token_id"])
        w.add_add_space_prefix(False)
        w.add_add_bos_token(True)
        write_tensors(w, tensors, kind)

    def plain(name, a):  # the converter keeps vectors and the router (FFN_GATE_INP) in F32
        return a.ndim == 1 or "ffn_gate_inp" in name

    def bf16(name, a):
        return a.astype(np.float32) if plain(name, a) else (gguf.quants.quantize(a, T.BF16), T.BF16)

    def q8_0(name, a):  # ffn_down_exps' rows of 24 are not whole Q8_0 blocks of 32: kept BF16
        if plain(name, a):
            return a.astype(np.float32)
        return (gguf.quants.quantize(a, T.BF16), T.BF16) if a.shape[-1] % 32 else (gguf.quants.quantize(a, T.Q8_0), T.Q8_0)

    write_dg(os.path.join(out_dir, "diffusion_gemma_tiny.bf16.gguf"), bf16)
    with open(os.path.join(ROOT, "tests", "data", "cli", "tokenizer.json"), encoding="utf-8") as f:
        cli_tokenizer = json.load(f)
    write_dg(os.path.join(out_dir, "diffusion_gemma_tiny.q8_0.gguf"), q8_0, cli_tokenizer)


def tokenizer_fixture(out_dir):
    with open(os.path.join(ROOT, "tests", "data", "tokenizer", "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    w = gguf.GGUFWriter(os.path.join(out_dir, "tokenizer.gguf"), "dream")
    add_tokenizer(w, tok, 0)
    finish(w)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", help="a llama.cpp checkout with build/bin/llama-quantize, for the K-quant fixtures")
    ap.add_argument("--only", choices=["lladamoe", "llada2", "diffusion-gemma"], help="write only these fixtures")
    ap.add_argument("out_dir", nargs="?", default=os.path.join(ROOT, "tests", "data", "gguf"))
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    if a.only == "lladamoe":
        return lladamoe(a.out_dir)
    if a.only == "llada2":
        return llada2(a.out_dir)
    if a.only == "diffusion-gemma":
        return diffusion_gemma(a.out_dir)
    tiny("llada_tiny", "llada", (("f32", T.F32), ("f16", T.F16), ("bf16", T.BF16)), a.out_dir)
    tiny("dream_tiny", "dream", (("f32", T.F32), ("bf16", T.BF16)), a.out_dir)
    tokenizer_fixture(a.out_dir)
    llada_q(a.out_dir, a.llama_cpp)
    lladamoe(a.out_dir)
    llada2(a.out_dir)
    diffusion_gemma(a.out_dir)


if __name__ == "__main__":
    main()
