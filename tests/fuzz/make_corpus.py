#!/usr/bin/env python3
"""Writes the seed corpora of dlm's fuzz targets into tests/fuzz/corpus/<target>/ (committed; rerun
only to change the seeds). Small by design: a few valid inputs per target and a few near misses;
libFuzzer mutates from there. Uses only the standard library and files already in tests/data/. Files named regression_* are
inputs of past findings, committed as found; this script leaves them alone."""
import json
import pathlib
import shutil
import struct

here = pathlib.Path(__file__).resolve().parent
data = here.parent / "data"
out = here / "corpus"


def put(target, name, content):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())


# ---- safetensors: the 8-byte length, the JSON header, the data area ----
def safetensors(header, data_bytes, claimed=None):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h) if claimed is None else claimed) + h + data_bytes


t = "safetensors"
put(t, "f32_2x3", safetensors({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}},
                              struct.pack("<6f", 1, 2, 3, 4, 5, 6)))
put(t, "three_dtypes_metadata_gap", safetensors(
    {"__metadata__": {"format": "pt"},
     "a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
     "b": {"dtype": "F16", "shape": [], "data_offsets": [8, 10]},
     "z": {"dtype": "F32", "shape": [0, 5], "data_offsets": [10, 10]},
     "c": {"dtype": "F32", "shape": [1, 1, 1], "data_offsets": [12, 16]}}, bytes(16)))
put(t, "overlap", safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
put(t, "truncated_data", safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(6)))
put(t, "huge_shape", safetensors({"a": {"dtype": "BF16", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}, b""))
put(t, "length_past_end", safetensors({}, b"", claimed=4096))


# ---- gguf: GGUF v3 files (keys, tensor infos, data), a tiny LLaDA model with a tokenizer, near misses ----
def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: (key, type id, packed value); tensors: (name, ggml shape, type id, data bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, value in kvs:
        out += gguf_str(key) + struct.pack("<I", vtype) + value
    offset, blob = 0, b""
    for name, shape, ttype, payload in tensors:
        blob += bytes(-len(blob) % alignment)
        out += gguf_str(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", ttype, len(blob))
        blob += payload
    return out + bytes(-len(out) % alignment) + blob if tensors else out


def u32(key, v):
    return (key, 4, struct.pack("<I", v))


def strings(key, items):
    return (key, 9, struct.pack("<IQ", 8, len(items)) + b"".join(gguf_str(x) for x in items))


t = "gguf"
H, F, V, L = 8, 16, 6, 1
model_kvs = [("general.architecture", 8, gguf_str("llada")), u32("llada.block_count", L), u32("llada.embedding_length", H),
             u32("llada.feed_forward_length", F), u32("llada.attention.head_count", 2), u32("llada.attention.head_count_kv", 1),
             ("llada.rope.freq_base", 6, struct.pack("<f", 10000.0)), u32("tokenizer.ggml.mask_token_id", V - 1),
             ("tokenizer.ggml.model", 8, gguf_str("gpt2")), ("tokenizer.ggml.pre", 8, gguf_str("qwen2")),
             strings("tokenizer.ggml.tokens", ["a", "b", "ab", "\u0120", "<|endoftext|>", "<|mdm_mask|>"]),
             ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, V) + struct.pack("<6i", 1, 1, 1, 1, 3, 3)),
             strings("tokenizer.ggml.merges", ["a b"])]
f32 = lambda n: struct.pack(f"<{n}f", *[0.5] * n)
model_tensors = [("token_embd.weight", [H, V], 0, f32(H * V)), ("output_norm.weight", [H], 0, f32(H))]
for name, shape in (("attn_norm", [H]), ("attn_q", [H, H]), ("attn_k", [H, H // 2]), ("attn_v", [H, H // 2]),
                    ("attn_output", [H, H]), ("ffn_norm", [H]), ("ffn_gate", [H, F]), ("ffn_up", [H, F]), ("ffn_down", [F, H])):
    n = 1
    for d in shape:
        n *= d
    model_tensors.append((f"blk.0.{name}.weight", shape, 0, f32(n)))
put(t, "llada_model_tokenizer", gguf(model_kvs, model_tensors))
# llada2 (LLaDA2.x as llama.cpp pull request #17454 writes it): the expert, group and partial-RoPE keys
llada2_kvs = [("general.architecture", 8, gguf_str("llada2"))] + [u32("llada2." + k, v) for k, v in (
    ("block_count", 2), ("embedding_length", H), ("feed_forward_length", F), ("attention.head_count", 2),
    ("attention.head_count_kv", 1), ("attention.key_length", 4), ("rope.dimension_count", 2), ("expert_count", 4),
    ("expert_used_count", 2), ("expert_group_count", 2), ("expert_group_used_count", 1), ("expert_gating_func", 2),
    ("leading_dense_block_count", 1), ("expert_feed_forward_length", 8), ("expert_shared_feed_forward_length", 8),
    ("expert_shared_count", 1))] + [("llada2.expert_weights_scale", 6, struct.pack("<f", 2.5)),
                                    ("llada2.expert_weights_norm", 7, struct.pack("<?", True)), u32("tokenizer.ggml.mask_token_id", V - 1)]
put(t, "llada2_config", gguf(llada2_kvs, [("token_embd.weight", [H, V], 0, f32(H * V))]))
put(t, "q8_0_and_f16", gguf([u32("general.alignment", 64)], [("q", [32, 2], 8, bytes(68)), ("h", [4], 1, bytes(8))], alignment=64))
put(t, "arrays_of_every_type", gguf([(f"k{i}", 9, struct.pack("<IQ", i, 2) + bytes(2 * w)) for i, w in
                                     ((0, 1), (1, 1), (2, 2), (3, 2), (4, 4), (5, 4), (6, 4), (7, 1), (10, 8), (11, 8), (12, 8))], []))
put(t, "overlap", gguf([], [("a", [8], 0, f32(8)), ("b", [8], 0, f32(8))]).replace(struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 0)))
put(t, "version_2", gguf([u32("x", 1)], [], version=2))
put(t, "truncated", gguf(model_kvs, model_tensors)[:300])

# ---- config.json: the three families' real configs, the tiny test model's, a generation config ----
t = "config"
for d in sorted((data / "configs").iterdir()):
    if d.is_dir():
        for f in ("config.json", "generation_config.json"):
            if (d / f).exists():
                put(t, f"{d.name}_{f}", (d / f).read_bytes())
put(t, "llada_tiny_config.json", (data / "models" / "llada_tiny" / "config.json").read_bytes())
put(t, "qwen2_minimal.json", json.dumps({"model_type": "qwen2", "hidden_size": 8, "num_attention_heads": 2,
                                         "num_hidden_layers": 1, "intermediate_size": 16, "vocab_size": 64,
                                         "head_dim": 4, "eos_token_id": [1, 2], "mask_token_id": None}))

# ---- tokenizer.json: the test tokenizer's pipelines over a small vocabulary ----
base = json.loads((data / "tokenizer" / "tokenizer.json").read_text())
variants = json.loads((data / "tokenizer" / "variants.json").read_text())
vocab = base["model"]["vocab"]
keep = {tok: i for tok, i in vocab.items() if len(tok) == 1}
merges = []
for m in base["model"]["merges"]:
    left, right = m.split(" ") if isinstance(m, str) else m
    if left in keep and right in keep and left + right in vocab:
        merges.append(f"{left} {right}")
        keep[left + right] = vocab[left + right]
    if len(merges) == 48:
        break


def small_tokenizer(variant):
    j = json.loads(json.dumps(base))
    j["model"]["vocab"] = dict(keep)
    j["model"]["merges"] = merges
    if variant is not None:
        v = variants[variant]
        for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
            j[key] = v[key]
        extra = dict(list(v["vocab_extra"].items())[:64])
        j["model"]["vocab"].update(extra)
        j["model"].update(v["model"])
        unk = v["model"].get("unk_token")
        if unk is not None:  # the unknown token must be in the vocabulary
            j["model"]["vocab"].setdefault(unk, vocab.get(unk, max(vocab.values()) + 1))
    return json.dumps(j, ensure_ascii=False, separators=(",", ":"))


t = "tokenizer_json"
put(t, "qwen2_small.json", small_tokenizer(None))
for name in variants:
    put(t, f"{name}_small.json", small_tokenizer(name))
put(t, "minimal_bpe.json", json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}}))

# ---- tokenizer codec: byte 0 = options (1 add_special, 2 skip_special, 4 decode ids, 8 ids near the vocabulary) ----
t = "tokenizer_codec"
put(t, "ascii", b"\x00" + b"What is 3 + 4? The answer is 7.\n")
put(t, "unicode_nfd", b"\x00" + "cafe\u0301 \u6771\u4eac\u3067 \U0001F600 na\u0131ve\r\n\t  x".encode())
put(t, "invalid_utf8", b"\x00" + b"ok \xff\xfe \xc3 \xe6\x9d \xed\xa0\x80 \xf4\x90\x80\x80 end")
put(t, "added_tokens", b"\x03" + "<|im_start|>user\nhello <|mdm_mask|><|mdm_mask|> caf\u00e9<|im_end|>".encode())
put(t, "whitespace_runs", b"\x00" + b" " * 64 + b"x" + b"\t" * 32 + b"\n\n")
put(t, "decode_ids", b"\x04" + struct.pack("<8i", 0, 1, 300, 1999, 2000, -1, 2**31 - 1, 42))
put(t, "decode_ids_near_vocab", b"\x0e" + struct.pack("<6I", 5, 17, 2003, 77, 4000000000, 9))

# ---- cli: byte 0 = program (0 dlm-generate, 1 dlm-eval), then the arguments separated by NUL bytes ----
t = "cli"
for name, (prog, args) in {
    "generate_minimal": (0, ["-p", "What is 3 + 4?"]),
    "generate_flags": (0, ["-m", "models/x", "--preset", "llada", "-n", "64", "--block-length", "32", "--steps", "64",
                           "--temp", "0.5", "--top-k", "10", "--top-p", "0.9", "-s", "7", "-t", "2", "--chat", "--stats",
                           "--trace=out.svg", "-p", "hi"]),
    "generate_dream": (0, ["--preset", "dream", "--diffusion-steps", "128", "--alg", "maskgit_plus", "--eps", "0.001",
                           "--alg-temp", "0.5", "--visual", "--visual-delay", "0", "-p", "x"]),
    "generate_compare": (0, ["--compare", "--compare-presets", "llada,cdlm", "--threshold", "0.9", "-p", "x"]),
    "generate_bad_number": (0, ["-n", "12x", "-p", "p"]),
    "eval_flags": (1, ["--data", "d.jsonl", "--prompt-format", "Q: {question}", "--batch", "4", "--limit", "10",
                       "--json", "o.json", "--predictions", "p.jsonl", "--no-progress", "--preset", "cd4lm"]),
    "help": (0, ["--help"]),
}.items():
    put(t, name, bytes([prog]) + "\0".join(args).encode())

# ---- server_request: dlm-server's request bodies (both routes, every field, near misses) ----
t = "server_request"
for name, body in {
    "completion_full.json": {"model": "cdlm", "prompt": "Tom has 3 apples. He buys 4 more. How many apples does he have now?",
                             "max_tokens": 20, "seed": 7, "stop": ["\n", "####"], "stream": True,
                             "stream_options": {"include_usage": True}, "threshold": 0.8, "block_length": 4},
    "chat_parts.json": {"messages": [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": [{"type": "text", "text": "caf\u00e9 \u20ac"}]}],
                        "max_completion_tokens": 13, "temperature": 0.5, "top_p": 0.9, "top_k": 4, "steps": 4, "stream": True,
                        "stream_canvas": True},
    "completion_stop.json": {"prompt": ["r\u00e9sum\u00e9 #### 12\n\nnext"], "stop": "\n\n", "n": 1, "user": "u"},
    "other_model.json": {"model": "gpt-4", "prompt": "x"},
    "near_miss_blocks.json": {"prompt": "x", "max_tokens": 121, "block_length": 16, "steps": 3},
}.items():
    put(t, name, json.dumps(body))
put(t, "duplicate_key.json", '{"prompt": "x", "prompt": "y", "seed": 18446744073709551615}')

# ---- http_request: raw bytes of HTTP/1.x requests (byte 0: the size of the pieces they are read in) ----
t = "http_request"
body = json.dumps({"prompt": "What is 3 + 4?", "max_tokens": 8})
for name, (piece, raw) in {
    "post_length": (0, f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\nX-Request-Id: abc-1\r\n\r\n{body}"),
    "post_chunked_pipelined": (3, "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "5;ext=1\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\nTrailer-Field: x\r\n\r\n"
                                  "GET /health HTTP/1.1\r\n\r\n"),
    "get_http10": (1, "GET /v1/models?x=1 HTTP/1.0\nConnection: keep-alive\n\n"),
    "gzip": (0, "POST /v1/completions HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00"),
    "both_framings": (2, "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    "chunk_too_large": (5, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"),
    "expect_continue": (7, "POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}"),
    "http2_preface": (0, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
}.items():
    put(t, name, bytes([piece]) + raw.encode("latin-1"))

print(f"wrote {sum(1 for _ in out.rglob('*') if _.is_file())} seeds under {out}")
