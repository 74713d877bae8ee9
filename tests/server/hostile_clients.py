#!/usr/bin/env python3
"""Measures dlm-server against hostile clients on 127.0.0.1 (the figures of docs/server.md, "Limits and
their guarantees"); not a ctest test: the bounded checks are client_test.py's cases. Each attack starts
its own server (--port 0, default limits), runs for a bounded time, and prints what the client got, how
long it took and the server's RSS (VmRSS idle, VmHWM peak). Works on any build of dlm-server, so the
same command measures before and after a change:

  tests/server/hostile_clients.py --server build/default/server/dlm-server -m models/cdlm
"""
import argparse
import http.client
import json
import os
import re
import resource
import select
import signal
import socket
import subprocess
import threading
import time
import zlib

from harness import hostile_prompts, rss_mb


class Server:
    def __init__(self, exe, model, *flags, preexec=None):
        self.proc = subprocess.Popen([exe, "-m", model, "--port", "0", "-t", "1", *flags], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, preexec_fn=preexec)
        self.port, self.lines = None, []
        got = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    got.set()
            got.set()
        threading.Thread(target=read, daemon=True).start()
        got.wait(30)

    def stop(self):
        """SIGTERM; returns (exit status or 'no exit within 10 s', seconds)."""
        t = time.monotonic()
        self.proc.terminate()
        try:
            return self.proc.wait(10), time.monotonic() - t
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "no exit within 10 s of SIGTERM (killed)", time.monotonic() - t


def connect(port, timeout=30):
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def status_of(c, seconds):
    """The status of the answer on `c` within `seconds`, or None."""
    c.settimeout(seconds)
    try:
        data = c.recv(4096)
    except (socket.timeout, OSError):
        return None
    m = re.match(rb"HTTP/1\.\d (\d+)", data)
    return int(m.group(1)) if m else None


def send_body(port, head, pieces, seconds):
    """Sends head and pieces until an answer comes or `seconds` pass: (status, MiB sent, seconds)."""
    c = connect(port)
    start, sent = time.monotonic(), 0
    c.sendall(head)
    for piece in pieces:
        if time.monotonic() - start > seconds or select.select([c], [], [], 0)[0]:
            break
        try:
            c.sendall(piece)
        except OSError:
            break
        sent += len(piece)
    st = status_of(c, max(1, seconds - (time.monotonic() - start)))
    c.close()
    return st, sent / 2**20, time.monotonic() - start


def chunked(args, mib):
    s = Server(args.server, args.model)
    idle = rss_mb(s.proc.pid)
    chunk = b"%x\r\n" % 65536 + b"x" * 65536 + b"\r\n"
    st, sent, took = send_body(s.port, b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                               (chunk for _ in range(mib * 16)), 60)
    peak = rss_mb(s.proc.pid, "VmHWM")
    time.sleep(1)
    after = rss_mb(s.proc.pid)
    print(f"chunked {mib} MiB body: status {st} after {sent:.1f} MiB sent, {took:.2f} s; RSS idle {idle:.1f} MB, peak {peak:.1f} MB, "
          f"idle after {after:.1f} MB; SIGTERM: {s.stop()[0]}")


def gzip_bomb(args):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"x" * (1 << 20)
    bomb = z.compress(b'{"prompt": "') + b"".join(z.compress(block) for _ in range(100)) + z.compress(b'"}') + z.flush()
    s = Server(args.server, args.model)
    idle = rss_mb(s.proc.pid)
    head = b"POST /v1/completions HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb)
    st, _, took = send_body(s.port, head, [bomb], 60)
    print(f"gzip body of {len(bomb) + len(head)} bytes (a 100 MiB prompt): status {st} in {took:.2f} s; RSS idle {idle:.1f} MB, "
          f"peak {rss_mb(s.proc.pid, 'VmHWM'):.1f} MB; SIGTERM: {s.stop()[0]}")


def slowloris(args, seconds=40):
    s = Server(args.server, args.model)
    slow = [connect(s.port) for _ in range(64)]
    head = b"POST /v1/completions HTTP/1.1\r\nX-Padding: " + b"a" * 4000
    start, i, answered, probes, dropped = time.monotonic(), 0, 0, 0, set()
    next_byte = start
    while time.monotonic() - start < seconds:
        if time.monotonic() >= next_byte:  # one header byte per connection every 4 s
            for k, c in enumerate(slow):
                if k not in dropped:
                    try:
                        c.send(head[i:i + 1])
                    except OSError:
                        dropped.add(k)
            i += 1
            next_byte += 4
        for k, c in enumerate(slow):
            if k not in dropped and select.select([c], [], [], 0)[0]:
                dropped.add(k)
        c = connect(s.port, 1)
        probes += 1
        try:
            c.sendall(b"GET /health HTTP/1.1\r\n\r\n")
            answered += status_of(c, 1) == 200
        except OSError:
            pass
        c.close()
        time.sleep(1)
    for c in slow:
        c.close()
    print(f"slowloris (64 connections, a header byte every 4 s, {seconds} s): {len(dropped)} dropped; /health answered "
          f"{answered} of {probes} probes within 1 s; RSS {rss_mb(s.proc.pid):.1f} MB; SIGTERM: {s.stop()[0]}")


def http10(args):
    s = Server(args.server, args.model)
    c = connect(s.port)
    body = json.dumps({"prompt": "What is 3 + 4?", "stream": True}).encode()
    c.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    data = b""
    c.settimeout(10)
    while b"\r\n\r\n" not in data:
        piece = c.recv(4096)
        if not piece:
            break
        data += piece
    c.close()
    chunked_answer = b"transfer-encoding: chunked" in data.split(b"\r\n\r\n")[0].lower()
    print(f"HTTP/1.0 streamed request: {'chunked (wrong for HTTP/1.0)' if chunked_answer else 'not chunked'}; SIGTERM: {s.stop()[0]}")


def prompts(args):
    """A ~1 MiB prompt of each kind a tokenizer handles worst (harness.hostile_prompts): the refusal's
    time, best of 3, and its words (the prompt's length, or where the tokenizer stopped counting)."""
    s = Server(args.server, args.model)
    for name, text in hostile_prompts().items():
        body = json.dumps({"prompt": text}, ensure_ascii=False).encode()
        best = float("inf")
        for _ in range(3):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            t = time.monotonic()
            c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            reply = r.read()
            best = min(best, time.monotonic() - t)
            c.close()
        said = json.loads(reply).get("error", {}).get("message", "")
        print(f"a {len(body) / 2**20:.2f} MiB prompt, {name}: status {r.status} in {best:.3f} s: {said[:72]}")
    print(f"prompts: SIGTERM: {s.stop()[0]}")


def startup(args, *flags, limit_gib=None):
    def preexec():
        if limit_gib:
            resource.setrlimit(resource.RLIMIT_AS, (limit_gib << 30, limit_gib << 30))
    t = time.monotonic()
    s = Server(args.server, args.model, *flags, preexec=preexec if limit_gib else None)
    if s.port is None:
        s.proc.wait(10)
        last = "".join(s.lines).strip().splitlines()[-1:] or [""]
        print(f"start {' '.join(flags)}{f' under ulimit -v {limit_gib} GiB' if limit_gib else ''}: exit {s.proc.returncode} after "
              f"{time.monotonic() - t:.1f} s: {last[0][:160]}")
        return
    c = connect(s.port, 5)
    c.sendall(b"GET /health HTTP/1.1\r\n\r\n")
    st = status_of(c, 5)
    c.close()
    print(f"start {' '.join(flags)}{f' under ulimit -v {limit_gib} GiB' if limit_gib else ''}: listening; /health {st}; "
          f"SIGTERM: {s.stop()[0]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--only", help="one of chunked, gzip, slowloris, http10, prompts, startup")
    args = p.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    runs = {"chunked": lambda: [chunked(args, n) for n in (2, 100, 400)], "gzip": lambda: gzip_bomb(args),
            "slowloris": lambda: slowloris(args), "http10": lambda: http10(args), "prompts": lambda: prompts(args),
            "startup": lambda: (startup(args, "--queue", "1000", limit_gib=2), startup(args, "--parallel", "4096"))}
    for name, run in runs.items():
        if not args.only or args.only == name:
            run()


if __name__ == "__main__":
    main()
