#!/usr/bin/env python3
"""dlm-server with real clients on 127.0.0.1 (tests/server.cmake runs one case per ctest test).

Each case starts its own dlm-server on a free port (--port 0: the server prints the port it took),
talks to it, and stops it. Cases:
  curl        curl: whole and streamed answers, equal to dlm-generate's for the same prompt; models,
              health, metrics; OpenAI error objects for bad input (400 naming the field, 404, 413)
  load        64 requests from 16 concurrent clients (bounded in count and time), sampled with their own
              seeds and lengths, half of them streamed: every answer equals dlm-generate's single decode
  disconnect  a streaming client that leaves frees its sequence at the next forward
  disconnect-whole  the same for a non-streamed request (the server sees the closed socket without writing)
  full-queue  a full queue answers 429 with Retry-After and an error object; the queued request completes
  canvas      streams with stream_canvas from concurrent clients: canvas events with their forward counts as
              the batch runs, and the same text as a plain stream
  openai      the official openai package (in a venv made by scripts/setup-openai-venv.sh): completions
              and chat completions, whole and streamed
  chunked-limit  a chunked body over --max-body gets 413 at once, with small RSS; memory comes back after large bodies
  gzip        a gzip/deflate/br body (a 100 MiB prompt in 100 KB) gets 415 unread
  slowloris   64 connections sending their heads byte by byte are dropped at --header-timeout; /health answers within 1 s
  connection-cap  --max-connections: probes get in past stalled uploads (the stalest gets 503); 503 when workers hold all
  methods     405 with Allow for a known path's other methods; HEAD on a GET route is GET's head without the body
  nodelay     streams on one reused connection are not held ~40 ms per piece (TCP_NODELAY); counted by [DONE]
  http10      an HTTP/1.0 client gets Content-Length or a close-delimited body, never chunked
  drain       SIGTERM: the in-flight request completes (or is cancelled after --drain-timeout), /ready 503, exit 0
  drain-pipelined  SIGTERM: a pipelined request already received gets 503 + Connection: close; answers say close
  drain-body  SIGTERM between a request's head and its body: 503 + Connection: close, not a bare close
  startup-failure  worker threads that cannot start, or a port in use: a message and status 1, never "listening"
  request-id  X-Request-Id echoed (or generated) on every answer and in the request's log line
  chat-template  a model whose chat template dlm does not write: chat requests get a 400 naming messages,
              completions are served, and the server says so at start-up
  usage, seeds-timeout  OpenAI's semantics beyond the text: billed tokens at stop strings, token-id prompts,
              max_tokens beside long prompts, fresh seeds, 504 for a late whole answer (openai_cases.py)
The hostile-client and operations cases (chunked-limit ... request-id) live in hostile_cases.py, what
all cases share in harness.py. Exit status 0 pass, 1 fail, 77 skipped (saying why).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from harness import (LONG, PROMPT, PROMPTS, SKIP, SLOW, Server, check, curl, generate, leave, open_stream, sse_texts,
                     wait_for)
from openai_cases import case_seeds_timeout, case_usage
from hostile_cases import (case_chunked_limit, case_connection_cap, case_drain, case_drain_body, case_drain_pipelined, case_gzip,
                           case_http10, case_methods, case_nodelay, case_prompt_bound, case_request_id,
                           case_slowloris, case_startup_failure)


def case_curl(args):
    if not shutil.which("curl"):
        print("skipped: curl is not installed")
        return SKIP
    want = generate(args, PROMPT)
    with Server(args.server, args.model, "--max-body", "8192") as s:
        whole = json.loads(curl(s.url + "/v1/completions", json.dumps({"prompt": PROMPT})))
        check(whole["object"] == "text_completion", whole)
        check(whole["choices"][0]["text"] == want, f"curl got {whole['choices'][0]['text']!r}, dlm-generate {want!r}")
        check(whole["usage"]["completion_tokens"] > 0 and whole["usage"]["prompt_tokens"] > 0, whole["usage"])
        text, reason = sse_texts(curl(s.url + "/v1/completions", json.dumps({"prompt": PROMPT, "stream": True})))
        check(text == want and reason == whole["choices"][0]["finish_reason"], f"streamed {text!r} ({reason})")
        text, _ = sse_texts(curl(s.url + "/v1/chat/completions",
                                 json.dumps({"messages": [{"role": "user", "content": PROMPT}], "stream": True})), chat=True)
        chat = json.loads(curl(s.url + "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": PROMPT}]})))
        check(chat["choices"][0]["message"]["content"] == text, f"chat whole {chat} against streamed {text!r}")
        stop = json.loads(curl(s.url + "/v1/completions", json.dumps({"prompt": PROMPT, "stop": ["="]})))
        check(stop["choices"][0]["text"] == want.split("=")[0] and stop["choices"][0]["finish_reason"] == "stop", stop)

        models = json.loads(curl(s.url + "/v1/models", "", "-G"))
        check(models["data"][0]["id"] == os.path.basename(os.path.normpath(args.model)), models)
        check(json.loads(curl(s.url + "/health", "", "-G"))["status"] == "ok", "health")
        metrics = curl(s.url + "/metrics", "", "-G")
        for name in ("dlm_requests_total{route=\"/v1/completions\",status=\"200\"} 3", "dlm_forwards_total",
                     "dlm_request_duration_seconds_bucket{le=\"+Inf\"}", "dlm_queue_length 0"):
            check(name in metrics, f"/metrics lacks {name}")

        for body, status, param in [("{", 400, None), ('{"prompt": "x", "tempreature": 1}', 400, "tempreature"),
                                    ('{"prompt": "x", "max_tokens": -3}', 400, "max_tokens"),
                                    ('{"prompt": "x", "seed": "7"}', 400, "seed"),
                                    ('{"prompt": ""}', 400, "prompt"),
                                    ('{"prompt": "' + "x " * 400 + '"}', 400, "prompt"),  # longer than the context
                                    ('{"model": "gpt-4", "prompt": "x"}', 404, "model"),
                                    ('{"prompt": "' + "x" * 10000 + '"}', 413, None)]:
            st, _, text = s.post("/v1/completions", body.encode())
            err = json.loads(text)["error"]
            check(st == status and err["param"] == param and err["message"], f"{body[:40]}: {st} {text[:300]}")
        st, _, text = s.request("GET", "/v1/nothing")
        check(st == 404 and "error" in json.loads(text), f"unknown route: {st} {text}")
        # The server still answers as before.
        again = json.loads(curl(s.url + "/v1/completions", json.dumps({"prompt": PROMPT})))
        check(again["choices"][0]["text"] == want, "the answer changed after bad requests")
    return 0


def case_chat_template(args):
    """A chat template dlm does not write (Ling 2.0's form, as LLaDA2 ships) is refused on the chat route
    with a 400 naming messages, never written in another form; the completions route still answers."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        for name in os.listdir(args.model):
            os.symlink(os.path.join(os.path.abspath(args.model), name), os.path.join(folder, name))
        with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
            f.write("{%- for message in messages %}{{- '<role>HUMAN</role>' + message.content + '<|role_end|>' }}{%- endfor %}"
                    "{{- '<role>ASSISTANT</role>' }}")
        with Server(args.server, folder) as s:
            status, _, text = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8})
            err = json.loads(text)["error"]
            check(status == 400 and err["param"] == "messages" and "not one dlm writes" in err["message"], f"chat: {status} {text}")
            status, _, text = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8})
            check(status == 200 and json.loads(text)["choices"][0]["text"] is not None, f"completions: {status} {text}")
            check("chat template is not one dlm writes" in s.startup, f"no start-up note: {s.startup}")
    print("chat template: chat refused (400, messages), completions served")
    return 0


def case_uniform_state(args):
    """A DiffusionGemma folder (--model): served with its own preset, the answers dlm-generate gives, whole and streamed."""
    flags = ["-n", "32", "--steps", "6"]
    want = generate(args, "Tom has 3 apples", *flags)
    with Server(args.server, args.model, *flags) as s:
        st, _, text = s.post("/v1/completions", {"prompt": "Tom has 3 apples"})
        check(st == 200, f"{st} {text}")
        whole = json.loads(text)
        check(whole["choices"][0]["text"] == want, f"served {whole['choices'][0]['text']!r}, dlm-generate {want!r}")
        # The first request without a seed decodes with --seed; the others draw fresh ones: give it.
        st, _, raw = s.post("/v1/completions", {"prompt": "Tom has 3 apples", "stream": True, "seed": 0})
        streamed, reason = sse_texts(raw)
        check(st == 200 and streamed == want and reason == whole["choices"][0]["finish_reason"], f"streamed {streamed!r} ({reason})")
        # Another sequence's seed gives its own noise: the same request twice answers the same.
        st, _, again = s.post("/v1/completions", {"prompt": "Tom has 3 apples", "seed": 5})
        st2, _, again2 = s.post("/v1/completions", {"prompt": "Tom has 3 apples", "seed": 5})
        check(st == st2 == 200 and json.loads(again)["choices"] == json.loads(again2)["choices"], "seed 5 twice differs")
        check(s.metric("dlm_forwards_total") > 0, "no forwards counted in /metrics")
        # The folder's chat template is Gemma 4's: chat_template_kwargs.enable_thinking writes the prompt
        # dlm-generate --chat --think writes, and thinking off the one of --chat alone.
        answers = []
        for think, extra in ((False, []), (True, ["--think"])):
            want_chat = generate(args, "Tom has 3 apples", *flags, "--chat", *extra)
            answers.append(want_chat)
            body = {"messages": [{"role": "user", "content": "Tom has 3 apples"}], "chat_template_kwargs": {"enable_thinking": think}, "seed": 0}
            st, _, text = s.post("/v1/chat/completions", body)
            check(st == 200, f"{st} {text}")
            got = json.loads(text)["choices"][0]["message"]["content"]
            check(got == want_chat, f"enable_thinking {think}: served {got!r}, dlm-generate {want_chat!r}")
        check(answers[0] != answers[1], "the two prompts answer alike here, so this case cannot tell them apart")
    return 0


def case_load(args):
    """64 requests from 16 concurrent clients; 16 distinct (prompt, seed, length) requests, 4 times each, sampled
    (fast-dllm at temperature 2 on the teacher model), so that an answer decoded with another request's seed or
    in another request's place would differ."""
    combos = [(PROMPTS[i % 4], 1000 + i, (16, 32, 48)[i % 3]) for i in range(16)]
    flags = ["--preset", "fast-dllm", "--temp", "2"]
    args.model = args.sampling_model
    want = {}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {c: pool.submit(generate, args, c[0], *flags, "--seed", str(c[1]), "-n", str(c[2])) for c in combos}
        want = {c: f.result() for c, f in futures.items()}
    check(len(set(want.values())) > len(PROMPTS) + 3, "the seeds hardly change the answers: the test would not see a mix-up")
    start = time.monotonic()
    with Server(args.server, args.model, *flags, "-np", "8", "--queue", "64", "--timeout", "60") as s:
        def one(i):
            prompt, seed, n = combos[i % 16]
            body = {"prompt": prompt, "seed": seed, "max_tokens": n, "stream": i % 2 == 1}
            st, _, text = s.post("/v1/completions", body, timeout=60)
            check(st == 200, f"request {i}: status {st}: {text[:300]}")
            got = sse_texts(text)[0] if i % 2 else json.loads(text)["choices"][0]["text"]
            check(got == want[combos[i % 16]], f"request {i} (seed {seed}, n {n}): got {got!r}, alone {want[combos[i % 16]]!r}")
            return i

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            done = list(pool.map(one, range(64), timeout=90))
        check(len(done) == 64, "not every request completed")
        forwards = s.metric("dlm_forwards_total")
    print(f"load: 64 requests from 16 clients in {time.monotonic() - start:.1f} s, {forwards:.0f} batched forwards")
    return 0

def case_disconnect(args):
    with Server(args.server, args.model, *LONG, "-np", "1", env=SLOW) as s:
        c = open_stream(s, {"prompt": PROMPT})
        wait_for("the sequence joins the batch", lambda: json.loads(s.request("GET", "/health")[2])["active"] == 1)
        leave(c)  # the client leaves mid-answer
        wait_for("the sequence is freed", lambda: s.metric("dlm_sequences_cancelled_total") == 1, 5)
        wait_for("the batch is empty", lambda: json.loads(s.request("GET", "/health")[2])["active"] == 0, 5)
        forwards = s.metric("dlm_forwards_total")
        check(forwards < 96, f"the abandoned decode ran to the end ({forwards} forwards)")
        st, _, text = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "steps": 8})
        check(st == 200, f"the next request: {st} {text}")
    return 0


def case_disconnect_whole(args):
    """A non-streamed request whose client leaves while it waits (nothing has been sent to it): the
    server sees the closed socket and frees the sequence at once, not at --timeout. Baseline kernels
    and a second sequence in the batch make each decode last about 2 s here. The other request gets
    its whole answer, with Content-Length."""
    with Server(args.server, args.model, *LONG, "-np", "2", env=SLOW) as s:
        other = {}
        t = threading.Thread(target=lambda: other.update(r=s.post("/v1/completions", {"prompt": PROMPT}, 60)))
        t.start()
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": PROMPT}).encode(), headers={"Content-Type": "application/json"})
        wait_for("both sequences join the batch", lambda: json.loads(s.request("GET", "/health")[2])["active"] == 2)
        time.sleep(0.6)  # past the 0.5 s after which an earlier server committed to its 200
        leave(c)
        wait_for("the sequence is freed", lambda: s.metric("dlm_sequences_cancelled_total") == 1, 5)
        check(s.metric('dlm_requests_total{route="/v1/completions",status="499"}') == 1, "the request left is not counted 499")
        t.join(60)
        st, headers, text = other.get("r", (0, {}, ""))
        check(st == 200 and "Content-Length" in headers, f"the other request: {st} {headers} {text[:200]}")
        check(json.loads(text)["choices"][0]["text"] is not None, f"the other request's body: {text[:200]!r}")
    return 0


def case_full_queue(args):
    """--parallel 1 --queue 1: with one request running and one queued, the next gets 429. A queued
    request whose client leaves frees its place without joining the batch (its worker watches the
    socket while it waits, as for the answer: a request waiting for memory may wait long), counted 499;
    the request queued next completes."""
    with Server(args.server, args.model, *LONG, "-np", "1", "--queue", "1", env=SLOW) as s:
        first = open_stream(s, {"prompt": PROMPT})
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": PROMPT}).encode(), headers={"Content-Type": "application/json"})
        wait_for("the second request waits in the queue", lambda: s.metric("dlm_queue_length") == 1)
        st, headers, text = s.post("/v1/completions", {"prompt": PROMPT})
        check(st == 429, f"a full queue answered {st}")
        check(headers.get("Retry-After") == "1", f"no Retry-After: {headers}")
        err = json.loads(text)["error"]
        check(err["type"] == "rate_limit_error" and err["code"] == "queue_full", err)
        leave(c)
        wait_for("the queued request whose client left frees its place", lambda: s.metric("dlm_queue_length") == 0, 5)
        wait_for("the queued request whose client left is counted 499",
                 lambda: s.metric('dlm_requests_total{route="/v1/completions",status="499"}') == 1, 5)
        # It left the queue without joining the batch: no sequence was decoded for it, none cancelled.
        check(s.metric("dlm_queue_wait_seconds_count") == 1, f"{s.metric('dlm_queue_wait_seconds_count')} requests joined the batch, not 1")
        check(s.metric("dlm_sequences_cancelled_total") == 0, "the request whose client left joined the batch before it was cancelled")
        queued = {}
        t = threading.Thread(target=lambda: queued.update(r=s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "steps": 8}, 60)))
        t.start()
        wait_for("the next request waits in the queue", lambda: s.metric("dlm_queue_length") == 1)
        leave(first)
        t.join(60)
        check(queued.get("r", (0,))[0] == 200, f"the queued request: {queued}")
    return 0

def case_canvas(args):
    """4 concurrent streams with stream_canvas: their forward counts never go back, their canvases are the
    answer's slots, and their text is the plain stream's. The canvas events are written while the engine
    thread publishes the next forward (a ThreadSanitizer build of the server checks that they race with
    nothing)."""
    with Server(args.server, args.model, "-np", "4") as s:
        body = {"prompt": PROMPT, "max_tokens": 32, "stream": True}
        st, _, plain = s.post("/v1/completions", body)
        check(st == 200, f"plain stream: {st} {plain[:200]}")
        want = sse_texts(plain)[0]

        def one(_):
            st, _, raw = s.post("/v1/completions", {**body, "stream_canvas": True}, 60)
            check(st == 200, f"canvas stream: {st} {raw[:200]}")
            canvases = [json.loads(e[len("data: "):]) for e in raw.split("\n\n") if '"dlm.canvas"' in e]
            check(canvases, f"no canvas event in {raw[:300]!r}")
            forwards = [c["forward"] for c in canvases]
            check(forwards == sorted(forwards) and forwards[0] >= 1, f"forward counts {forwards}")
            check(all(len(c["canvas"]) == len(canvases[0]["canvas"]) for c in canvases), "canvases of different lengths")
            return sse_texts(raw)[0], len(canvases)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            got = list(pool.map(one, range(4), timeout=90))
        check(all(t == want for t, _ in got), f"canvas streams {[t for t, _ in got]!r}, plain {want!r}")
    print(f"canvas: 4 concurrent streams, {sum(n for _, n in got)} canvas events, the plain stream's text")
    return 0


def case_openai(args):
    try:
        setup = subprocess.run([args.setup_venv, args.venv], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        print("skipped: installing the openai package took more than 240 s (no access to PyPI?)")
        return SKIP
    if setup.returncode != 0:
        print("skipped: the openai package cannot be installed here: " + (setup.stderr.strip().splitlines() or ["?"])[-1])
        return SKIP
    want = generate(args, PROMPT)
    with Server(args.server, args.model) as s:
        out = subprocess.run([os.path.join(args.venv, "bin", "python"), os.path.abspath(__file__), "openai-client", "--url", s.url,
                              "--expect", want], capture_output=True, text=True, timeout=60)
        print(out.stdout + out.stderr)
        check(out.returncode == 0, "the openai client failed")
    return 0


def openai_client(args):
    """Runs inside the venv: the official client against the server."""
    import openai
    client = openai.OpenAI(base_url=args.url + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=48, seed=3)
    check(r.choices[0].text == args.expect, f"completions: {r.choices[0].text!r} against {args.expect!r}")
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, r.usage)
    pieces = [c.choices[0].text for c in client.completions.create(model=model, prompt=PROMPT, stream=True) if c.choices]
    check("".join(pieces) == args.expect, f"streamed completions: {pieces}")
    msg = [{"role": "user", "content": PROMPT}]
    chat = client.chat.completions.create(model=model, messages=msg)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(model=model, messages=msg, stream=True)
                       if c.choices)
    check(chat.choices[0].message.content == streamed, f"chat: {chat.choices[0].message.content!r} against streamed {streamed!r}")
    try:
        client.completions.create(model=model, prompt=PROMPT, extra_body={"threshold": 7})
        check(False, "threshold 7 was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "threshold" in str(e), str(e))
    print(f"openai {openai.__version__}: completions, chat, streamed and whole, and a 400 for threshold 7")
    return 0


def main():
    cases = {"curl": case_curl, "load": case_load, "disconnect": case_disconnect, "disconnect-whole": case_disconnect_whole,
             "full-queue": case_full_queue, "canvas": case_canvas, "chunked-limit": case_chunked_limit, "gzip": case_gzip,
             "slowloris": case_slowloris,
             "connection-cap": case_connection_cap, "methods": case_methods, "nodelay": case_nodelay, "http10": case_http10,
             "drain": case_drain, "drain-pipelined": case_drain_pipelined, "drain-body": case_drain_body,
             "startup-failure": case_startup_failure, "request-id": case_request_id, "prompt-bound": case_prompt_bound,
             "openai": case_openai, "openai-client": openai_client, "uniform-state": case_uniform_state,
             "chat-template": case_chat_template, "usage": case_usage, "seeds-timeout": case_seeds_timeout}
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=list(cases))
    p.add_argument("--server")
    p.add_argument("--generate")
    p.add_argument("--model")
    p.add_argument("--sampling-model", help="a model whose sampled answers vary with the seed (load)")
    p.add_argument("--setup-venv")
    p.add_argument("--venv")
    p.add_argument("--url")
    p.add_argument("--expect")
    args = p.parse_args()
    return cases[args.case](args)


if __name__ == "__main__":
    sys.exit(main())
