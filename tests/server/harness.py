"""What the dlm-server client tests share: a server on a free port of 127.0.0.1, its requests, checks
that fail with a message, raw sockets for the hostile clients, and the prompts (client_test.py and
hostile_cases.py; hostile_clients.py reads rss_mb and hostile_prompts)."""
import contextlib
import http.client
import json
import os
import random
import re
import select
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
        self.startup = seen  # the lines before the port's
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
        body += read_until_close(c)
    return status, headers, body


def read_until_close(c):
    """Every byte the server sends on raw socket `c` until it closes (or resets, or times out)."""
    data = b""
    while True:
        try:
            piece = c.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not piece:
            break
        data += piece
    return data


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


def hostile_prompts(size=(1 << 20) - 256):
    """Prompts of at most `size` UTF-8 bytes (their JSON bodies fit the default 1 MiB
    --max-body) that tokenizers handle worst, by name: many short words, digits (a word each for Qwen2's
    regex), and texts that are one pre-token (punctuation, a letter, spaces, an emoji repeated)."""
    letters = random.Random(7).choices("abcdefghijklmnopqrstuvwxyz", k=size)
    letters[7::8] = " " * len(letters[7::8])
    return {"short words": "x " * (size // 2), "random words": "".join(letters), "digits": "7" * size,
            "punctuation (one word)": "!?" * (size // 2), "one letter (one word)": "a" * size, "spaces (one word)": " " * size,
            "an emoji (one word)": "\U0001F600" * (size // 4)}
