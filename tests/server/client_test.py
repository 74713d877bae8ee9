#!/usr/bin/env python3
"""dlm-server with real clients on 127.0.0.1 (tests/server.cmake runs one case per ctest test).

Each case starts its own dlm-server on a free port (--port 0: the server prints the port it took),
talks to it, and stops it. Cases:
  curl        curl: whole and streamed answers, equal to dlm-generate's for the same prompt; models,
              health, metrics; OpenAI error objects for bad input (400 naming the field, 404, 413)
  load        64 requests from 16 concurrent clients (bounded in count and time), sampled with their own
              seeds and lengths, half of them streamed: every answer equals dlm-generate's single decode
  disconnect  a streaming client that leaves frees its sequence at the next forward
  disconnect-whole  the same for a non-streamed request (the server sends spaces before its JSON)
  full-queue  a full queue answers 429 with Retry-After and an error object; the queued request completes
  openai      the official openai package (in a venv made by scripts/setup-openai-venv.sh): completions
              and chat completions, whole and streamed
  chunked-limit  a chunked body over --max-body gets 413 at once, with small RSS; memory comes back after large bodies
  gzip        a gzip/deflate/br body (a 100 MiB prompt in 100 KB) gets 415 unread
  slowloris   64 connections sending their heads byte by byte are dropped at --header-timeout; /health answers within 1 s
  connection-cap  --max-connections: 503 beyond it; connections still sending their heads give way
  http10      an HTTP/1.0 client gets Content-Length or a close-delimited body, never chunked
  drain       SIGTERM: the in-flight request completes (or is cancelled after --drain-timeout), /ready 503, exit 0
  startup-failure  worker threads that cannot start, or a port in use: a message and status 1, never "listening"
  request-id  X-Request-Id echoed (or generated) on every answer and in the request's log line
Exit status 0 pass, 1 fail, 77 skipped (saying why).
"""
import argparse
import contextlib
import concurrent.futures
import http.client
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SKIP = 77
PROMPT = "Tom has 3 apples. He buys 4 more. How many apples does he have now?"
# Multi-step problems of the shipped test set: sampled at temperature 2, the teacher's answers differ by seed.
PROMPTS = ["30 birds sit by a pond. 5 more birds arrive. Then 20 birds leave. Then the number of birds doubles. How many "
           "birds are there in total now?",
           "Kim has 7 cupcakes on a table. She bakes 6 more. Then she ends up with 3 times as many cupcakes. She eats 5 "
           "cupcakes. How many cupcakes does Kim have now?",
           "Lily has 34 dollars. She pays Mia 11 dollars. Then her money doubles. She earns 15 dollars. How much money does "
           "she have, in dollars?",
           "14 people ride a bus. 8 people climb on. At the next stop 10 people get on. 14 people step off. How many people "
           "are on the bus now?"]


class Server:
    def __init__(self, exe, model, *flags, env=None):
        # One CPU thread: on a busy 2-core machine OpenMP's second thread mostly waits (docs/cli.md).
        self.proc = subprocess.Popen([exe, "-m", model, "--port", "0", "-t", "1", *flags], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        # Its start-up lines (the preset it chose and why), then the one with the port.
        seen = ""
        for _ in range(20):
            line = self.proc.stdout.readline()
            seen += line
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m or not line:
                break
        if not m:
            self.proc.kill()
            raise SystemExit(f"FAIL: dlm-server did not start: {seen}{self.proc.stdout.read()}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"
        # Keep draining its output (so that it never blocks on a full pipe); shown if the case fails.
        self.output = []
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None or self.proc.poll() is not None:
            print("dlm-server's output:\n" + "".join(self.output[-100:]), file=sys.stderr)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise SystemExit("FAIL: dlm-server did not stop within 10 s of SIGTERM")
        if exc[0] is None and self.proc.returncode != 0:
            raise SystemExit(f"FAIL: dlm-server exited with status {self.proc.returncode}")

    def request(self, method, path, body=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        out = r.status, dict(r.getheaders()), r.read().decode()
        c.close()
        return out

    def post(self, path, body, timeout=30):
        status, headers, text = self.request("POST", path, body, timeout)
        return status, headers, text

    def metric(self, name):
        _, _, text = self.request("GET", "/metrics")
        m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None


def check(ok, what):
    if not ok:
        raise SystemExit(f"FAIL: {what}")


def generate(args, prompt, *flags):
    """The single-request answer: dlm-generate's stdout without its final newline."""
    out = subprocess.run([args.generate, "-m", args.model, "-t", "1", "-p", prompt, *flags], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 0, f"dlm-generate failed: {out.stderr}")
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def sse_texts(raw, chat=False):
    """The text pieces of an SSE body, checking its framing: data events, [DONE] last."""
    events = [e for e in raw.split("\n\n") if e.strip() and not e.startswith(":")]
    check(events and events[-1] == "data: [DONE]", f"the stream does not end with data: [DONE]: {raw[-200:]!r}")
    pieces, reasons = [], []
    for e in events[:-1]:
        check(e.startswith("data: "), f"not a data event: {e!r}")
        j = json.loads(e[len("data: "):])
        for c in j.get("choices", []):
            pieces.append((c["delta"].get("content") or "") if chat else c["text"])
            if c["finish_reason"]:
                reasons.append(c["finish_reason"])
    check(len(reasons) == 1, f"expected one finish_reason, got {reasons}")
    return "".join(pieces), reasons[0]


def curl(url, body, *extra):
    out = subprocess.run(["curl", "-sS", "-N", "--max-time", "30", url, "-H", "Content-Type: application/json", "-d", body, *extra],
                         capture_output=True, text=True, timeout=40)
    check(out.returncode == 0, f"curl failed: {out.stderr}")
    return out.stdout


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


def case_uniform_state(args):
    """A DiffusionGemma folder (--model): served with its own preset, the answers dlm-generate gives, whole and streamed."""
    flags = ["-n", "32", "--steps", "6"]
    want = generate(args, "Tom has 3 apples", *flags)
    with Server(args.server, args.model, *flags) as s:
        st, _, text = s.post("/v1/completions", {"prompt": "Tom has 3 apples"})
        check(st == 200, f"{st} {text}")
        whole = json.loads(text)
        check(whole["choices"][0]["text"] == want, f"served {whole['choices'][0]['text']!r}, dlm-generate {want!r}")
        st, _, raw = s.post("/v1/completions", {"prompt": "Tom has 3 apples", "stream": True})
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
            body = {"messages": [{"role": "user", "content": "Tom has 3 apples"}], "chat_template_kwargs": {"enable_thinking": think}}
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


def open_stream(s, body):
    """A streaming request whose first event has arrived; returns the open connection."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    check(r.status == 200, f"stream status {r.status}")
    first = r.read1(65536)
    check(first.startswith(b"data: ") or first.startswith(b":"), f"not an event: {first[:100]!r}")
    return c


def leave(c):
    """The client goes away mid-answer. shutdown() sends the FIN at once: close() alone waits until the
    response's file object lets go of the socket, so the server could keep writing into a live socket."""
    with contextlib.suppress(OSError):
        c.sock.shutdown(socket.SHUT_RDWR)
    c.sock.close()
    c.close()


def wait_for(what, cond, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise SystemExit(f"FAIL: {what} within {seconds} s")


# A long decode on the shipped model: llada commits one slot per forward.
LONG = ["--preset", "llada", "-n", "96", "--steps", "96", "-t", "1"]
# The cases that need a decode to outlast a client's move run the baseline kernels: on AMX the LONG
# decode of the shipped model ends in about 0.2 s, before a client can leave it.
SLOW = {**os.environ, "DLM_ISA": "baseline"}


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
    """A non-streamed request whose client leaves after the server has committed to its 200 (it waits
    0.5 s for a whole answer, then sends a space every 100 ms before the JSON): the sequence is freed
    at once, not at --timeout. Baseline kernels and a second sequence in the batch make each decode
    last about 2 s here."""
    with Server(args.server, args.model, *LONG, "-np", "2", env=SLOW) as s:
        other = {}
        t = threading.Thread(target=lambda: other.update(r=s.post("/v1/completions", {"prompt": PROMPT}, 60)))
        t.start()
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": PROMPT}).encode(), headers={"Content-Type": "application/json"})
        wait_for("both sequences join the batch", lambda: json.loads(s.request("GET", "/health")[2])["active"] == 2)
        r = c.getresponse()  # the headers come when the whole-answer wait is over
        check(r.status == 200 and (r.getheader("Transfer-Encoding") or "").lower() == "chunked",
              f"a long non-streamed answer: status {r.status}, headers {r.getheaders()}")
        check(r.read1(1) == b" ", "no heartbeat space before the body")
        leave(c)
        wait_for("the sequence is freed", lambda: s.metric("dlm_sequences_cancelled_total") == 1, 5)
        t.join(60)
        st, _, text = other.get("r", (0, {}, ""))
        check(st == 200, f"the other request: {st} {text[:200]}")
        check(text.startswith(" ") and json.loads(text)["choices"][0]["text"] is not None,
              f"the other request's body is not spaces + JSON: {text[:200]!r}")
    return 0


def case_full_queue(args):
    with Server(args.server, args.model, *LONG, "-np", "1", "--queue", "1", env=SLOW) as s:
        first = open_stream(s, {"prompt": PROMPT})
        queued = {}
        t = threading.Thread(target=lambda: queued.update(r=s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "steps": 8}, 60)))
        t.start()
        wait_for("the second request waits in the queue", lambda: s.metric("dlm_queue_length") == 1)
        st, headers, text = s.post("/v1/completions", {"prompt": PROMPT})
        check(st == 429, f"a full queue answered {st}")
        check(headers.get("Retry-After") == "1", f"no Retry-After: {headers}")
        err = json.loads(text)["error"]
        check(err["type"] == "rate_limit_error" and err["code"] == "queue_full", err)
        leave(first)
        t.join(60)
        check(queued.get("r", (0,))[0] == 200, f"the queued request: {queued}")
    return 0


# ---- hostile clients and operations (docs/server.md, "Limits and their guarantees", "Operations") ----

def rss_mb(pid, field="VmRSS"):
    """The process's resident memory (VmRSS) or its peak (VmHWM), in MB."""
    with open(f"/proc/{pid}/status") as f:
        m = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) / 1024


def raw_connect(s, timeout=10):
    c = socket.create_connection(("127.0.0.1", s.port), timeout=timeout)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def read_response(c, until_close=False):
    """(status, headers dict with lower-case names, body bytes) of one response on raw socket `c`."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = c.recv(65536)
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    check(lines[0].startswith("HTTP/1."), f"not an HTTP response: {data[:200]!r}")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if "content-length" in headers and not until_close:
        while len(body) < int(headers["content-length"]):
            piece = c.recv(65536)
            if not piece:
                break
            body += piece
    else:
        while True:
            try:
                piece = c.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not piece:
                break
            body += piece
    return status, headers, body


def send_until_answer(c, head, pieces, seconds=10):
    """Sends `head`, then `pieces()` until the server answers (or `seconds` pass); returns the bytes sent."""
    c.sendall(head)
    sent, end = 0, time.monotonic() + seconds
    c.setblocking(False)
    try:
        for piece in pieces():
            if time.monotonic() > end:
                break
            r, _, _ = select.select([c], [], [], 0)
            if r:
                break
            try:
                c.sendall(piece)
            except BlockingIOError:
                select.select([c], [c], [], 0.05)
            except OSError:
                break
            sent += len(piece)
    finally:
        c.setblocking(True)
        c.settimeout(10)
    return sent


def case_chunked_limit(args):
    """--max-body bounds the decoded body of every framing: a chunked body (the client would send 400
    MiB) and a declared Content-Length over the bound get 413 at once, the server's memory stays within
    a few MB of its idle size, and bodies within the bound leave no memory behind."""
    with Server(args.server, args.model, "--max-body", str(1 << 20)) as s:
        idle = rss_mb(s.proc.pid)
        start = time.monotonic()
        c = raw_connect(s)
        chunk = b"%x\r\n" % 65536 + b"x" * 65536 + b"\r\n"
        sent = send_until_answer(c, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                                 lambda: (chunk for _ in range(6400)))
        st, headers, body = read_response(c)
        took = time.monotonic() - start
        c.close()
        check(st == 413 and json.loads(body)["error"]["message"], f"a chunked body over --max-body: {st} {body[:200]!r}")
        peak = rss_mb(s.proc.pid, "VmHWM")
        print(f"chunked: 413 after {sent / 2**20:.1f} MiB sent, {took:.2f} s; RSS idle {idle:.1f} MB, peak {peak:.1f} MB")
        check(took < 5 and peak < idle + 24, f"the chunked body was not refused within the bound: {took:.1f} s, peak {peak:.1f} MB")

        c = raw_connect(s)
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 419430400\r\n\r\n")
        st, _, body = read_response(c)
        c.close()
        check(st == 413, f"Content-Length 400 MiB: {st} {body[:200]!r}")

        # Bodies within the bound (1 MiB of spaces: invalid JSON, refused quickly) leave no memory behind.
        for _ in range(8):
            st, _, _ = s.post("/v1/completions", b" " * ((1 << 20) - 16))
            check(st == 400, f"a body within --max-body: {st}")
        after = rss_mb(s.proc.pid)
        print(f"after 8 bodies of 1 MiB: RSS {after:.1f} MB (idle {idle:.1f} MB)")
        check(after < idle + 16, f"memory not returned after large bodies: {idle:.1f} MB -> {after:.1f} MB")
    return 0


def case_gzip(args):
    """A gzip-encoded body is refused unread (415), however much it would inflate to: a 100 MiB
    prompt in ~100 KB answers at once and the server's memory does not move."""
    import zlib
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing; made in pieces, never holding the 100 MiB
    block = b"x" * (1 << 20)
    bomb = z.compress(b'{"prompt": "') + b"".join(z.compress(block) for _ in range(100)) + z.compress(b'"}') + z.flush()
    with Server(args.server, args.model) as s:
        idle = rss_mb(s.proc.pid)
        start = time.monotonic()
        for encoding in ("gzip", "deflate", "br"):
            c = raw_connect(s)
            head = (f"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Encoding: {encoding}\r\n"
                    f"Content-Length: {len(bomb)}\r\n\r\n").encode()
            send_until_answer(c, head, lambda: (bomb[i:i + 16384] for i in range(0, len(bomb), 16384)))
            st, _, body = read_response(c)
            c.close()
            check(st == 415 and "Content-Encoding" in json.loads(body)["error"]["message"], f"{encoding}: {st} {body[:200]!r}")
        took = time.monotonic() - start
        peak = rss_mb(s.proc.pid, "VmHWM")
        print(f"gzip bomb ({len(bomb)} bytes, 100 MiB inflated): 415 in {took:.2f} s for 3 encodings; RSS idle {idle:.1f} MB, peak {peak:.1f} MB")
        check(took < 3 and peak < idle + 8, f"the encoded body cost {took:.1f} s, peak {peak:.1f} MB")
        st, _, _ = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8})
        check(st == 200, f"an unencoded request after them: {st}")
    return 0


def case_slowloris(args):
    """64 connections sending their head one byte every 0.5 s are dropped at --header-timeout (2 s),
    however steadily they send, and /health answers within a second throughout."""
    with Server(args.server, args.model, "--header-timeout", "2") as s:
        slow = [raw_connect(s) for _ in range(64)]
        head = b"POST /v1/completions HTTP/1.1\r\nHost: slowloris\r\nX-Padding: " + b"a" * 1000
        dropped_at = {}
        start = time.monotonic()
        worst, probes = 0.0, 0
        i = 0
        while time.monotonic() - start < 6:
            for k, c in enumerate(slow):
                if k in dropped_at:
                    continue
                try:
                    c.send(head[i:i + 1])
                except OSError:
                    dropped_at[k] = time.monotonic() - start
            i += 1
            t0 = time.monotonic()
            st, _, _ = s.request("GET", "/health", timeout=5)
            worst = max(worst, time.monotonic() - t0)
            probes += 1
            check(st == 200, f"/health answered {st}")
            for k, c in enumerate(slow):
                if k not in dropped_at:
                    r, _, _ = select.select([c], [], [], 0)
                    if r:
                        dropped_at[k] = time.monotonic() - start
            time.sleep(0.5)
        for c in slow:
            c.close()
        print(f"slowloris: {len(dropped_at)} of 64 slow connections dropped, the last after {max(dropped_at.values(), default=0):.1f} s; "
              f"/health: {probes} probes, slowest {worst * 1000:.0f} ms")
        check(worst < 1, f"/health took {worst:.2f} s")
        check(len(dropped_at) == 64 and max(dropped_at.values()) < 4.5, f"slow connections not dropped at the header deadline: {dropped_at}")
    return 0


def case_connection_cap(args):
    """--max-connections 8: with 8 connections each sending a body (past their heads), the next gets
    503 with Retry-After; connections still sending their heads give way to a newcomer instead."""
    with Server(args.server, args.model, "--max-connections", "8") as s:
        busy = [raw_connect(s) for _ in range(8)]
        for c in busy:
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.3)
        c = raw_connect(s)
        c.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        st, headers, body = read_response(c)
        c.close()
        check(st == 503 and headers.get("retry-after") == "1" and json.loads(body)["error"]["message"],
              f"a connection past the cap: {st} {headers} {body[:200]!r}")
        for c in busy:
            c.close()
        time.sleep(0.3)
        idle = [raw_connect(s) for _ in range(8)]
        for c in idle:
            c.sendall(b"GET /heal")
        time.sleep(0.3)
        st, _, _ = s.request("GET", "/health")
        check(st == 200, f"a newcomer while 8 connections send their heads: {st}")
        for c in idle:
            c.close()
    return 0


def case_http10(args):
    """An HTTP/1.0 client gets no chunked framing: a whole answer with Content-Length, a streamed one
    delimited by the connection's close."""
    with Server(args.server, args.model) as s:
        for stream in (False, True):
            c = raw_connect(s, 30)
            body = json.dumps({"prompt": PROMPT, "stream": stream}).encode()
            c.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            st, headers, raw = read_response(c, until_close=True)
            c.close()
            check(st == 200 and "transfer-encoding" not in headers, f"HTTP/1.0, stream {stream}: {st} {headers}")
            if stream:
                sse_texts(raw.decode())
            else:
                check(int(headers.get("content-length", -1)) == len(raw), f"HTTP/1.0 whole answer: {headers}, {len(raw)} bytes")
                json.loads(raw)
    return 0


def case_drain(args):
    """SIGTERM drains: the request in flight completes, /ready says 503 while /health says 200, a new
    request gets 503, and the server exits 0; with --drain-timeout 1 a longer request is cancelled
    (an error event ends its stream) and the server still exits 0."""
    for grace, completes in (("30", True), ("0.5", False)):
        s = Server(args.server, args.model, *LONG, "--drain-timeout", grace, env=SLOW)
        c = raw_connect(s, 30)
        body = json.dumps({"prompt": PROMPT, "stream": True}).encode()
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        raw = c.recv(65536)
        check(raw.startswith(b"HTTP/1.1 200"), f"the stream's answer: {raw[:200]!r}")
        start = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        wait_for("/ready turns 503", lambda: s.request("GET", "/ready")[0] == 503, 2)
        check(s.request("GET", "/health")[0] == 200, "/health while draining")
        st, _, text = s.post("/v1/completions", {"prompt": PROMPT})
        check(st == 503, f"a new request while draining: {st} {text[:200]}")
        while True:
            piece = c.recv(65536)
            if not piece:
                break
            raw += piece
        c.close()
        rc = s.proc.wait(20)
        took = time.monotonic() - start
        check(rc == 0, f"dlm-server exited {rc} after SIGTERM: {''.join(s.output[-20:])}")
        text = raw.decode(errors="replace")
        if completes:
            check("data: [DONE]" in text and '"finish_reason":"' in text, f"the in-flight stream did not complete: {text[-300:]!r}")
        else:
            check("stopping" in text, f"the stream past --drain-timeout did not end with an error: {text[-300:]!r}")
        print(f"drain (--drain-timeout {grace}): exit 0 after {took:.1f} s, the in-flight request {'completed' if completes else 'cancelled'}")
    return 0


def case_startup_failure(args):
    """Worker threads that cannot start (an address-space limit of 1 GiB, --queue 4000: 4012 stacks of 8 MiB)
    end the program with a message and status 1 before it listens; so does a port in use."""
    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    out = subprocess.run([args.server, "-m", args.model, "--port", "0", "-t", "1", "--queue", "4000"], capture_output=True, text=True,
                         timeout=30, preexec_fn=limited)
    check(out.returncode == 1 and "cannot start" in out.stderr and "listening" not in out.stdout,
          f"threads that cannot start: status {out.returncode}, {out.stdout[-300:]} {out.stderr[-300:]}")
    print("startup failure: " + out.stderr.strip().splitlines()[-1][:200])
    with Server(args.server, args.model) as s:
        out = subprocess.run([args.server, "-m", args.model, "--port", str(s.port)], capture_output=True, text=True, timeout=30)
        check(out.returncode == 1 and "cannot listen" in out.stderr, f"a port in use: {out.returncode} {out.stderr[-300:]}")
    return 0


def case_request_id(args):
    """Every answer carries X-Request-Id: the client's when it is sane, else a new one; the log line of
    the request carries it too."""
    with Server(args.server, args.model) as s:
        for path, method, body in (("/health", "GET", None), ("/v1/completions", "POST", {"prompt": PROMPT, "max_tokens": 8}),
                                   ("/v1/nothing", "GET", None), ("/v1/completions", "POST", {"prompt": 3})):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            c.request(method, path, body=json.dumps(body).encode() if body else None, headers={"X-Request-Id": "client-id.42"})
            r = c.getresponse()
            r.read()
            check(r.getheader("X-Request-Id") == "client-id.42", f"{method} {path}: X-Request-Id {r.getheader('X-Request-Id')}")
            c.close()
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("GET", "/health", headers={"X-Request-Id": "bad id " + "x" * 100})
        r = c.getresponse()
        r.read()
        check(re.fullmatch(r"[0-9a-f]{16}", r.getheader("X-Request-Id") or ""), f"a generated id: {r.getheader('X-Request-Id')}")
        c.close()
        wait_for("the request's log line", lambda: any("[client-id.42] POST /v1/completions -> 200" in line for line in s.output), 2)
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
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["curl", "load", "disconnect", "disconnect-whole", "full-queue", "openai", "openai-client",
                                   "chunked-limit", "gzip", "slowloris", "connection-cap", "http10", "drain", "startup-failure",
                                   "request-id", "uniform-state"])
    p.add_argument("--server")
    p.add_argument("--generate")
    p.add_argument("--model")
    p.add_argument("--sampling-model", help="a model whose sampled answers vary with the seed (load)")
    p.add_argument("--setup-venv")
    p.add_argument("--venv")
    p.add_argument("--url")
    p.add_argument("--expect")
    args = p.parse_args()
    cases = {"curl": case_curl, "load": case_load, "disconnect": case_disconnect, "disconnect-whole": case_disconnect_whole,
             "full-queue": case_full_queue, "chunked-limit": case_chunked_limit, "gzip": case_gzip, "slowloris": case_slowloris,
             "connection-cap": case_connection_cap, "http10": case_http10, "drain": case_drain,
             "startup-failure": case_startup_failure, "request-id": case_request_id,
             "openai": case_openai, "openai-client": openai_client, "uniform-state": case_uniform_state}
    return cases[args.case](args)


if __name__ == "__main__":
    sys.exit(main())
