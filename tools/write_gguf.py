#!/usr/bin/python3
"""Writes a dlm model folder (models/teacher, models/cdlm, models/cd4lm, or any LLaDA / Dream folder
with config.json, model.safetensors and tokenizer.json) as one GGUF file, laid out as llama.cpp's
convert_hf_to_gguf.py (LLaDAModel, DreamModel) lays it out, with the `gguf` package from PyPI:

  keys     general.architecture "llada" / "dream", {arch}.block_count, .embedding_length,
           .feed_forward_length, .context_length, .attention.head_count(_kv), .rope.freq_base,
           .attention.layer_norm_rms_epsilon, .rope.dimension_count, .attention.causal false,
           diffusion.shift_logits (LLaDA: false), tokenizer.ggml.* (model "gpt2", pre, tokens,
           token_type, merges, bos/eos/mask ids), tokenizer.chat_template when the folder has one,
           and dlm's decoding hints dlm.gen_length / dlm.block_length (config.json dlm_gen_length /
           dlm_block_length)
  tensors  token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
           ffn_up, ffn_down}.weight (+ attn_{q,k,v}.bias), output_norm, output (untied heads);
           LLaDA's attn_q/attn_k rows permuted per head as llama.cpp's converter stores them (for a
           head of d rows, GGUF row 2j + s holds Hugging Face row s*d/2 + j)
  types    --outtype f32, f16, bf16, q8_0 or q4_0 (1-D tensors stay F32, as llama.cpp keeps them).
           K-quants (Q4_K, Q5_K, Q6_K): the gguf package cannot quantize them (its quantize raises
           NotImplementedError); write f32 and run llama.cpp's llama-quantize on it. Every row of a
           quantized matrix must be whole blocks: 32 elements for Q8_0/Q4_0, 256 for K-quants (the
           shipped models, hidden size 128, cannot be K-quantized).

Qwen2ForCausalLM folders (models/ar) are refused: dlm reads GGUF files of llada and dream only.

Set up once:   python3 -m venv build/venv && build/venv/bin/pip install gguf numpy safetensors torch
Usage:         build/venv/bin/python tools/write_gguf.py models/teacher --outtype f32 -o teacher.f32.gguf
"""
import argparse
import json
import os
import sys

try:
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as T
except ImportError as e:
    sys.exit(f"write_gguf.py: {e}; install the packages: "
             "python3 -m venv build/venv && build/venv/bin/pip install gguf numpy safetensors torch")

PARTS = {  # Hugging Face (LLaDA / Qwen2) layer part -> GGUF stem
    "attn_norm": "attn_norm", "q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "attn_out": "attn_output",
    "ff_norm": "ffn_norm", "ff_proj": "ffn_gate", "up_proj": "ffn_up", "ff_out": "ffn_down",
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}
GLOBALS = {
    "model.transformer.wte.weight": "token_embd.weight", "model.transformer.ln_f.weight": "output_norm.weight",
    "model.transformer.ff_out.weight": "output.weight", "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight",
}
TYPES = {"f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q8_0": T.Q8_0, "q4_0": T.Q4_0}
# tokenizer.json Split regexes -> llama.cpp's pre-tokenizer names (dlm's io/gguf_tokenizer.hpp table)
PRE = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
}


def gguf_name(hf):
    if hf in GLOBALS:
        return GLOBALS[hf]
    rest = hf.split(".layers.", 1)[1] if ".layers." in hf else hf.split(".blocks.", 1)[1]
    layer, rest = rest.split(".", 1)
    part, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{PARTS[part]}.{kind}"


def rope_order(rows, head_dim):
    """Indices such that w[rope_order(...)] is w with each head's rows interleaved: position 2j + s of a
    head takes row s*d/2 + j."""
    half = head_dim // 2
    return np.array([h * head_dim + s * half + j for h in range(rows // head_dim) for j in range(half) for s in (0, 1)])


def to_gguf_tensors(hf, arch, head_dim):
    """Hugging Face tensors (name -> f32 array) under their GGUF names, LLaDA's q/k rows permuted."""
    out = {}
    for name, w in hf.items():
        if name.endswith("rotary_emb.inv_freq"):
            continue
        g = gguf_name(name)
        if arch == "llada" and (".attn_q." in g or ".attn_k." in g):
            w = w[rope_order(w.shape[0], head_dim)]
        out[g] = np.ascontiguousarray(w.astype(np.float32))
    return out


def config_of(c):
    """The GGUF architecture and sizes of a config.json (LLaDA or Dream)."""
    kind = c.get("model_type", "").lower()
    if kind == "llada":
        return "llada", dict(n_layers=c["n_layers"], hidden=c["d_model"], ffn=c["mlp_hidden_size"], heads=c["n_heads"],
                             kv_heads=c.get("n_kv_heads") or c["n_heads"], theta=c.get("rope_theta", 10000.0),
                             eps=c.get("rms_norm_eps", 1e-5), context=c.get("max_sequence_length", 4096),
                             mask_id=c.get("mask_token_id", 126336), eos_id=c.get("eos_token_id"),
                             vocab=c.get("embedding_size") or c["vocab_size"])
    if kind == "dream":
        eos = c.get("eos_token_id")
        return "dream", dict(n_layers=c["num_hidden_layers"], hidden=c["hidden_size"], ffn=c["intermediate_size"],
                             heads=c["num_attention_heads"], kv_heads=c.get("num_key_value_heads") or c["num_attention_heads"],
                             theta=c.get("rope_theta", 10000.0), eps=c.get("rms_norm_eps", 1e-6),
                             context=c.get("max_position_embeddings", 32768), mask_id=c.get("mask_token_id", 151666),
                             eos_id=eos[0] if isinstance(eos, list) else eos, vocab=c["vocab_size"])
    sys.exit(f"write_gguf.py: model_type '{c.get('model_type')}' is not supported; dlm reads GGUF files of "
             "'llada' (LLaDAModelLM) and 'dream' (DreamModel)")


def add_tokenizer(w, tok, vocab_size):
    """tokenizer.json (parsed) as tokenizer.ggml.* keys, every id below vocab_size named."""
    model = tok["model"]
    if model.get("type") != "BPE":
        sys.exit("write_gguf.py: tokenizer.json's model is not BPE; dlm's GGUF tokenizer is byte-level BPE ('gpt2')")
    pre = tok.get("pre_tokenizer") or {}
    regexes = [p["pattern"]["Regex"] for p in pre.get("pretokenizers", []) if p.get("type") == "Split"]
    if len(regexes) != 1 or regexes[0] not in PRE:
        sys.exit(f"write_gguf.py: the pre-tokenizer's regex {regexes} is not one of llama.cpp's names dlm knows "
                 f"({', '.join(sorted(set(PRE.values())))})")
    ids = dict(model["vocab"])
    special = {}
    for t in tok.get("added_tokens", []):
        ids.setdefault(t["content"], t["id"])
        special[t["id"]] = t.get("special", False)
    n = max(vocab_size, max(ids.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in ids.items():
        tokens[i] = text
        types[i] = gguf.TokenType.NORMAL if i not in special else (
            gguf.TokenType.CONTROL if special[i] else gguf.TokenType.USER_DEFINED)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(PRE[regexes[0]])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])


def write(path, arch, cfg, tensors, qtype, tokenizer=None, extra=None, chat_template=None):
    """One GGUF file. cfg: n_layers, hidden, ffn, heads, kv_heads, theta, eps, context, mask_id, eos_id,
    vocab. extra: further uint32 keys."""
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(cfg["n_layers"])
    w.add_context_length(cfg["context"])
    w.add_embedding_length(cfg["hidden"])
    w.add_feed_forward_length(cfg["ffn"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv_heads"])
    w.add_rope_freq_base(cfg["theta"])
    w.add_layer_norm_rms_eps(cfg["eps"])
    w.add_rope_dimension_count(cfg["hidden"] // cfg["heads"])
    w.add_causal_attention(False)
    if arch == "llada":
        w.add_vocab_size(cfg["vocab"])
        w.add_diffusion_shift_logits(False)
    if tokenizer is not None:
        add_tokenizer(w, tokenizer, cfg["vocab"])
    w.add_mask_token_id(cfg["mask_id"])
    if cfg.get("eos_id") is not None:
        w.add_eos_token_id(cfg["eos_id"])
    if chat_template:
        w.add_chat_template(chat_template)
    for key, value in (extra or {}).items():
        w.add_uint32(key, value)
    for name, t in tensors.items():
        if t.ndim == 1 or qtype == T.F32:
            w.add_tensor(name, t.astype(np.float32))
        elif qtype == T.F16:
            w.add_tensor(name, t.astype(np.float16))
        else:
            if t.shape[-1] % gguf.GGML_QUANT_SIZES[qtype][0] != 0:
                sys.exit(f"write_gguf.py: {name}: rows of {t.shape[-1]} are not whole {qtype.name} blocks of "
                         f"{gguf.GGML_QUANT_SIZES[qtype][0]}")
            w.add_tensor(name, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
    finish(w)


def finish(w):
    """Writes out everything added to a GGUFWriter and closes it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--outtype", choices=sorted(TYPES) + ["q4_k", "q5_k", "q6_k"], default="f32")
    ap.add_argument("-o", "--outfile", required=True)
    a = ap.parse_args()
    if a.outtype not in TYPES:
        sys.exit(f"write_gguf.py: the gguf package cannot quantize {a.outtype.upper()} (gguf.quants.quantize raises "
                 "NotImplementedError for K-quants); write --outtype f32 and run llama.cpp's llama-quantize on it")
    from safetensors.torch import load_file
    with open(os.path.join(a.model_dir, "config.json")) as f:
        c = json.load(f)
    arch, cfg = config_of(c)
    hf = {}
    for name in sorted(os.listdir(a.model_dir)):
        if name.endswith(".safetensors"):
            hf.update({k: v.float().numpy() for k, v in load_file(os.path.join(a.model_dir, name)).items()})
    if c.get("weight_tying", c.get("tie_word_embeddings", False)):
        hf.pop("model.transformer.ff_out.weight", None)
        hf.pop("lm_head.weight", None)
    tokenizer = None
    if os.path.exists(os.path.join(a.model_dir, "tokenizer.json")):
        with open(os.path.join(a.model_dir, "tokenizer.json"), encoding="utf-8") as f:
            tokenizer = json.load(f)
    template = None
    if os.path.exists(os.path.join(a.model_dir, "tokenizer_config.json")):
        with open(os.path.join(a.model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            template = json.load(f).get("chat_template")
    extra = {key: c[hint] for key, hint in (("dlm.gen_length", "dlm_gen_length"), ("dlm.block_length", "dlm_block_length"))
             if c.get(hint)}
    write(a.outfile, arch, cfg, to_gguf_tensors(hf, arch, cfg["hidden"] // cfg["heads"]), TYPES[a.outtype],
          tokenizer=tokenizer, extra=extra, chat_template=template if isinstance(template, str) else None)
    print(f"write_gguf.py: wrote {a.outfile} ({arch}, {a.outtype}, {len(hf)} tensors)")


if __name__ == "__main__":
    main()
