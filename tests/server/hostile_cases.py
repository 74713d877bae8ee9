"""dlm-server against hostile clients and in operation (docs/server.md, "Limits and their guarantees",
"Operations"): the cases chunked-limit, gzip, slowloris, connection-cap, methods, nodelay, http10, drain,
drain-pipelined, drain-body, startup-failure, request-id and prompt-bound of client_test.py, which runs them
one per ctest test."""
import http.client
import json
import re
import resource
import select
import signal
import socket
import subprocess
import time

from harness import (LONG, PROMPT, SLOW, Server, check, hostile_prompts, leave, raw_connect, read_response, read_until_close, rss_mb,
                     send_until_answer, sse_texts, wait_for)


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
    """--max-connections 8: a probe always gets in. With 8 connections past their heads, each stalled in
    its body, /health and /ready are answered at once and the stalest upload gets 503 with Retry-After;
    connections still sending their heads give way silently. Only when workers hold every connection
    (two streams with --max-connections 2) does a newcomer get 503."""
    with Server(args.server, args.model, "--max-connections", "8") as s:
        busy = [raw_connect(s) for _ in range(8)]
        for c in busy:
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
            time.sleep(0.02)  # busy[0] is the stalest
        time.sleep(0.3)
        for path in ("/health", "/ready", "/health"):
            start = time.monotonic()
            st, _, body = s.request("GET", path, timeout=5)
            took = time.monotonic() - start
            check(st == 200 and took < 1, f"{path} with 8 stalled uploads open: {st} after {took:.2f} s {body[:200]}")
        st, headers, body = read_response(busy[0])
        check(st == 503 and headers.get("retry-after") == "1" and headers.get("connection") == "close" and "slowest" in body.decode(),
              f"the stalest upload: {st} {headers} {body[:200]!r}")
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
    with Server(args.server, args.model, *LONG, "--max-connections", "2", env=SLOW) as s:
        streams = [raw_connect(s, 30) for _ in range(2)]
        body = json.dumps({"prompt": PROMPT, "stream": True}).encode()
        for c in streams:
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            check(c.recv(65536).startswith(b"HTTP/1.1 200"), "a stream's answer")
        c = raw_connect(s)
        c.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        st, headers, body = read_response(c)
        c.close()
        check(st == 503 and headers.get("retry-after") == "1" and json.loads(body)["error"]["message"],
              f"a connection past the cap, every connection in a worker's hands: {st} {headers} {body[:200]!r}")
        for c in streams:
            c.close()
    return 0


def case_methods(args):
    """A known path with another method gets 405 and Allow; HEAD on a GET route is GET's head without
    its body (the connection carries the next request); an unknown path is 404; an absolute-form target
    is read as its path."""
    with Server(args.server, args.model) as s:
        for method, path, allow in (("GET", "/v1/completions", "POST"), ("PUT", "/v1/chat/completions", "POST"),
                                    ("HEAD", "/v1/completions", "POST"), ("PUT", "/health", "GET, HEAD"),
                                    ("OPTIONS", "/v1/models", "GET, HEAD"), ("DELETE", "/metrics", "GET, HEAD")):
            st, headers, body = s.request(method, path)
            check(st == 405 and headers.get("Allow") == allow, f"{method} {path}: {st} Allow {headers.get('Allow')}")
            if method != "HEAD":
                check(method in json.loads(body)["error"]["message"], f"{method} {path}: {body[:200]}")
        check(s.request("GET", "/nothing")[0] == 404, "an unknown path")
        c = raw_connect(s)
        c.sendall(b"HEAD /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        data = b""
        while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}"):
            piece = c.recv(65536)
            check(piece, f"the connection closed: {data!r}")
            data += piece
        c.close()
        head, _, rest = data.partition(b"\r\n\r\n")
        length = re.search(rb"Content-Length: (\d+)", head)
        check(length and int(length.group(1)) > 0 and rest.startswith(b"HTTP/1.1 200"), f"HEAD /health sent a body: {data!r}")
        check(int(length.group(1)) == len(rest.partition(b"\r\n\r\n")[2]), f"HEAD's Content-Length is not GET's: {data!r}")
        # The absolute form of a target (RFC 9112 3.2.2: a server must accept it) is its path.
        c = raw_connect(s)
        c.sendall(f"GET HTTP://127.0.0.1:{s.port}/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while piece := c.recv(65536):
            data += piece
        c.close()
        check(data.startswith(b"HTTP/1.1 200") and b'"ok"' in data, f"an absolute-form target: {data[:200]!r}")
    return 0


def case_nodelay(args):
    """Streams on one reused keep-alive connection go out as written (TCP_NODELAY): without it each
    piece after the head waits ~40 ms for the client's delayed ACK (Nagle). The fastest of 6 streams
    must take under 30 ms (on this 2-core machine a cdlm stream takes about 5 ms). A request is in
    dlm_requests_total by the time its [DONE] arrives."""
    with Server(args.server, args.model) as s:
        c = raw_connect(s)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)  # the client as most are: Nagle on, delayed ACKs
        body = json.dumps({"prompt": PROMPT, "stream": True}).encode()
        took = []
        for i in range(6):
            start = time.monotonic()
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            while not data.endswith(b"0\r\n\r\n"):
                piece = c.recv(65536)
                check(piece, f"the connection closed: {data[-200:]!r}")
                data += piece
            took.append(time.monotonic() - start)
            counted = s.metric('dlm_requests_total{route="/v1/completions",status="200"}')
            check(counted == i + 1, f"after stream {i + 1}'s [DONE], dlm_requests_total says {counted}")
        c.close()
        print("streams on one connection: " + ", ".join(f"{t * 1000:.1f}" for t in took) + " ms")
        check(min(took[1:]) < 0.03, f"every stream on the reused connection took 30 ms or more: {took}")
    return 0


def case_drain_pipelined(args):
    """SIGTERM while a request is decoding: its answer, written during the drain, says Connection:
    close; a request pipelined behind it, already received, is answered 503 with Connection: close
    (the answer before it keeps the connection for it), and the server exits 0."""
    s = Server(args.server, args.model, *LONG, env=SLOW)
    try:
        long_body = json.dumps({"prompt": PROMPT}).encode()
        short_body = json.dumps({"prompt": PROMPT, "max_tokens": 8}).encode()
        req = lambda b: b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(b) + b
        alone, piped = raw_connect(s, 30), raw_connect(s, 30)
        alone.sendall(req(long_body))
        piped.sendall(req(long_body) + req(short_body))
        wait_for("both requests join the batch", lambda: json.loads(s.request("GET", "/health")[2])["active"] == 2, 5)
        s.proc.send_signal(signal.SIGTERM)
        one, two = read_until_close(alone), read_until_close(piped)
        rc = s.proc.wait(30)
        check(rc == 0, f"dlm-server exited {rc} after SIGTERM: {''.join(s.output[-20:])}")
        heads = [h.split(b"\r\n\r\n")[0] for h in one.split(b"HTTP/1.1 ")[1:]]
        check(len(heads) == 1 and heads[0].startswith(b"200") and b"Connection: close" in heads[0],
              f"the in-flight answer during the drain: {one[:300]!r}")
        heads = [h.split(b"\r\n\r\n")[0] for h in two.split(b"HTTP/1.1 ")[1:]]
        check(len(heads) == 2, f"the pipelined connection got {len(heads)} answers: {two[:600]!r}")
        check(heads[0].startswith(b"200") and b"Connection: close" not in heads[0], f"the first answer: {heads[0]!r}")
        check(heads[1].startswith(b"503") and b"Connection: close" in heads[1] and b"draining" in two,
              f"the pipelined request: {two[-400:]!r}")
        print("drain: the in-flight answers complete, the pipelined request gets 503 with Connection: close, exit 0")
        return 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()


def case_drain_body(args):
    """A request whose head arrived before SIGTERM and whose body arrives after gets 503 with
    Connection: close, not a bare close; one whose body never comes gets it at --drain-timeout."""
    s = Server(args.server, args.model, "--drain-timeout", "1")
    try:
        body = json.dumps({"prompt": PROMPT}).encode()
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        late, never = raw_connect(s), raw_connect(s)
        late.sendall(head + body[:5])
        never.sendall(head + body[:5])
        time.sleep(0.2)
        start = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        late.sendall(body[5:])
        for c, what in ((late, "a body completed after SIGTERM"), (never, "a body that never completes")):
            st, headers, text = read_response(c)
            check(st == 503 and headers.get("connection") == "close" and "draining" in text.decode(), f"{what}: {st} {headers} {text[:200]!r}")
        took = time.monotonic() - start
        rc = s.proc.wait(20)
        check(rc == 0 and took < 5, f"dlm-server exited {rc}, {took:.1f} s after SIGTERM: {''.join(s.output[-20:])}")
        print(f"drain: a late body got 503, an unfinished one 503 at --drain-timeout; exit 0 after {took:.1f} s")
        return 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()


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


def case_prompt_bound(args):
    """A prompt of almost 1 MiB (--max-body) is tokenized only as far as the model's context could take
    it (docs/server.md: 120 tokens on cdlm, its context of 128 less one block of 8) and refused there:
    400 naming prompt (messages on chat) "is more than 120 tokens", each in under 2 s (a text of many
    words stops after its first ~120 tokens: milliseconds; a text that is one word, merged whole, about
    0.1 s here), whatever its characters (harness.hostile_prompts); /health answers throughout, and a
    request after them decodes."""
    texts = hostile_prompts()
    with Server(args.server, args.model) as s:
        slowest = 0.0
        for name, text in texts.items():
            for route, body, param in (("/v1/completions", {"prompt": text}, "prompt"),
                                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": text}]}, "messages")):
                data = json.dumps(body, ensure_ascii=False).encode()
                check(len(data) <= 1 << 20, f"{name}: a body of {len(data)} bytes is over --max-body")
                start = time.monotonic()
                st, _, reply = s.post(route, data)
                took = time.monotonic() - start
                slowest = max(slowest, took)
                err = json.loads(reply)["error"]
                check(st == 400 and err["param"] == param and "is more than 120 tokens" in err["message"],
                      f"{name} to {route}: {st} {reply[:300]!r}")
                check(took < 2, f"{name} to {route} took {took:.2f} s")
            t0 = time.monotonic()
            st, _, _ = s.request("GET", "/health", timeout=5)
            check(st == 200 and time.monotonic() - t0 < 1, f"/health after {name}: {st}")
        print(f"prompt bound: {len(texts) * 2} prompts of ~1 MiB refused, naming the bound; the slowest in {slowest:.2f} s")
        st, _, _ = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8})
        check(st == 200, f"a request after them: {st}")
    return 0
