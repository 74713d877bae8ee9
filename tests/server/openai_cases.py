"""dlm-server's OpenAI semantics where a client reads more than the text (client_test.py runs them):

  usage        usage.completion_tokens of an answer cut by a stop string is the fewest tokens whose text holds
               it (vLLM's count), the same whole and streamed, and the metrics count the same; a prompt of
               token ids ([ids] and [[ids]]) is the text's prompt; chat text parts are joined with "\\n";
               a request without max_tokens gets what fits beside its prompt, one with too many a 400 saying
               what fits; vLLM's top_k -1 and negative seeds are taken
  seeds-timeout  requests without a seed draw fresh ones (the n-th: dlm-generate's seed of the n-th prompt
               of a batch); a non-streamed request that times out after seconds gets 504, never 200
"""
import concurrent.futures
import json
import re

from harness import LONG, PROMPT, PROMPTS, SLOW, Server, check, generate, sse_texts

# PROMPT as the shipped models' tokenizer splits it (each piece is one token of its vocabulary).
PROMPT_PIECES = ["Tom", "Ġhas", "Ġ", "3", "Ġapples", ".", "ĠHe", "Ġbuys", "Ġ", "4", "Ġmore", ".", "ĠHow", "Ġmany", "Ġapples",
                 "Ġdoes", "Ġhe", "Ġhave", "Ġnow", "?"]


def completion(s, body):
    st, _, text = s.post("/v1/completions", body)
    check(st == 200, f"{json.dumps(body)[:120]}: {st} {text[:300]}")
    return json.loads(text)


def refusal(s, body, route="/v1/completions"):
    st, _, text = s.post(route, body)
    check(st == 400, f"{json.dumps(body)[:120]}: expected 400, got {st} {text[:300]}")
    return json.loads(text)["error"]


def streamed_usage(s, body):
    st, _, raw = s.post("/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
    check(st == 200, f"stream: {st} {raw[:300]}")
    text, reason = sse_texts(raw)
    usage = [json.loads(e[6:])["usage"] for e in raw.split("\n\n") if e.startswith("data: {") and '"usage"' in e]
    check(len(usage) == 1 and usage[0], f"no usage chunk: {raw[-400:]!r}")
    return text, reason, usage[0]


def check_stop_usage(s):
    """Whole and streamed answers cut at "=" bill the same count, and it is the fewest tokens holding "=": the answer's
    first k tokens (max_tokens k: cdlm's block-causal mask decodes the first blocks alike whatever follows) hold it,
    its first k - 1 do not."""
    body = {"prompt": PROMPT, "stop": "="}
    whole = completion(s, body)
    text, reason, usage = streamed_usage(s, body)
    k = whole["usage"]["completion_tokens"]
    check(text == whole["choices"][0]["text"] and reason == "stop" == whole["choices"][0]["finish_reason"], (text, reason, whole))
    check(usage == whole["usage"], f"streamed usage {usage} against whole {whole['usage']}")
    check("=" in completion(s, {"prompt": PROMPT, "max_tokens": k})["choices"][0]["text"], f"the first {k} tokens lack the stop")
    check("=" not in completion(s, {"prompt": PROMPT, "max_tokens": k - 1})["choices"][0]["text"], f"{k} is not the fewest")
    full = completion(s, {"prompt": PROMPT})["usage"]["completion_tokens"]
    check(k < full, f"the stop string did not cut the bill: {k} of {full}")
    return k


def check_token_ids(s, model):
    with open(f"{model}/tokenizer.json") as f:
        vocab = json.load(f)["model"]["vocab"]
    ids = [vocab[p] for p in PROMPT_PIECES]
    text = completion(s, {"prompt": PROMPT})
    for prompt in (ids, [ids]):
        got = completion(s, {"prompt": prompt})
        check(got["choices"] == text["choices"] and got["usage"] == text["usage"], f"token ids {got} against text {text}")
    for bad, param in (([ids, ids], "prompt"), ([], "prompt"), ([1, "a"], "prompt[1]"), ([[]], "prompt[0]"), ([100000], "prompt")):
        err = refusal(s, {"prompt": bad})
        check(err["param"] == param, f"prompt {str(bad)[:40]}: {err}")


def check_canvas_fit(s):
    """The shipped models have a context of 128 and max_tokens 48 by default; blocks of 8 on cdlm."""
    long_prompt = "apples " * 87
    got = completion(s, {"prompt": long_prompt})
    room = 128 - got["usage"]["prompt_tokens"]
    check(0 < got["usage"]["completion_tokens"] <= room // 8 * 8 < 48, f"default max_tokens beside a long prompt: {got['usage']}")
    err = refusal(s, {"prompt": long_prompt, "max_tokens": 48})
    check(err["param"] == "max_tokens" and f"holds {room // 8 * 8} at most" in err["message"], err)
    err = refusal(s, {"prompt": "apples " * 140})
    check(err["param"] == "prompt", err)


def case_usage(args):
    with Server(args.server, args.model) as s:
        k = check_stop_usage(s)
        check_token_ids(s, args.model)
        check_canvas_fit(s)
        chat = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Tom has 3"}, {"type": "text", "text": "apples."}]}]}
        joined = {"messages": [{"role": "user", "content": "Tom has 3\napples."}]}
        check(completion_chat(s, chat)["usage"] == completion_chat(s, joined)["usage"], "text parts are not joined with a newline")
        completion(s, {"prompt": PROMPT, "top_k": -1, "seed": -5})
        _, _, metrics = s.request("GET", "/metrics")
        generated = float(re.search(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", metrics, re.M).group(1))
        billed = s.metric("dlm_completion_tokens_total")
        check(generated == billed, f"vllm:generation_tokens_total {generated} against dlm_completion_tokens_total {billed}")
    print(f"usage: an answer cut at its stop string billed {k} tokens, whole and streamed")
    return 0


def completion_chat(s, body):
    st, _, text = s.post("/v1/chat/completions", body)
    check(st == 200, f"chat: {st} {text[:300]}")
    return json.loads(text)


def sequence_seed(seed, index):
    """include/dlm/core/defaults.hpp's sequence_seed: SplitMix64 of seed + index * phi (index 0 keeps seed)."""
    if index == 0:
        return seed
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15 * index) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def case_seeds_timeout(args):
    flags = ["--preset", "fast-dllm", "--temp", "2", "--seed", "11"]
    args.model = args.sampling_model
    prompt = PROMPTS[0]
    want = [generate(args, prompt, *flags[:-1], str(sequence_seed(11, i))) for i in range(3)]
    check(want[0] != want[1] != want[2], f"the seeds do not change the answers: the test would not see a repeat: {want}")
    with Server(args.server, args.model, *flags) as s:
        # Requests refused (by the parser, by the engine: a mask token in the prompt) take no seed of the sequence.
        refusal(s, {"prompt": prompt, "top_k": "x"})
        refusal(s, {"prompt": "x <|mdm_mask|> y"})
        for i in range(3):
            got = completion(s, {"prompt": prompt})["choices"][0]["text"]
            check(got == want[i], f"unseeded request {i}: {got!r}, dlm-generate with seed sequence_seed(11, {i}): {want[i]!r}")
        seeded = completion(s, {"prompt": prompt, "seed": 11})["choices"][0]["text"]
        check(seeded == want[0], "an explicit seed no longer decodes as dlm-generate's")
    # With --steps fixed at start, a long prompt without max_tokens gets the largest canvas those steps suit:
    # 24 steps in blocks of 8 beside 40 prompt tokens (room 88) fit 8 blocks (64 slots), not 11, 10 or 9. A
    # request's own 96 steps suit no canvas that fits (llada: at most one per slot), which names the prompt.
    with Server(args.server, args.model, "--preset", "llada", "-n", "96", "--steps", "24") as s:
        got = completion(s, {"prompt": [288] * 40})  # 200 (was 400 naming steps), however short the answer
        check(got["usage"]["completion_tokens"] <= 64, f"--steps 24 beside a long prompt: {got['usage']}")
        err = refusal(s, {"prompt": [288] * 40, "steps": 96})
        check(err["param"] == "prompt" and "suits the decoding options" in err["message"], err)
    # Two long decodes side by side (about 2.4 s here) past a --timeout of 0.7 s: beyond the 0.5 s after which an
    # earlier server committed to status 200 and answered a late failure with an error object under it.
    with Server(args.server, args.model, *LONG, "-np", "2", "--timeout", "0.7", env=SLOW) as s:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: s.post("/v1/completions", {"prompt": PROMPT}, timeout=30), range(2)))
        for st, _, text in answers:
            err = json.loads(text).get("error", {})
            check(st == 504 and err.get("code") == "timeout", f"a request past --timeout: {st} {text[:300]}")
    return 0
