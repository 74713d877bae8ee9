#!/usr/bin/env python3
"""dlm-server throughput: answers/s and p50/p95 latency at 1, 4 and 16 concurrent clients (docs/server.md).

Starts dlm-server on a free port with the given model and flags, sends the same set of requests at each
concurrency (1 = sequential single requests, the baseline), and prints one table row per concurrency with
the ratio of its answers/s to the sequential run's. Standard library only.

  bench/bench_server.py --server build/default/server/dlm-server -m models/cdlm --requests 64
  bench/bench_server.py --server ... -m build/m100 --preset fast-dllm --max-tokens 32 --requests 32
"""
import argparse
import concurrent.futures
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = ["Tom has 3 apples. He buys 4 more. How many apples does he have now?",
           "Sara had 12 pencils and gave away 5. How many pencils are left?",
           "A box holds 6 eggs. How many eggs are in 4 boxes?",
           "Kim fills 5 boxes with 3 muffins each. She bakes 18 more. How many muffins does Kim have now?"]


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    c.close()
    if r.status != 200:
        raise SystemExit(f"bench_server: status {r.status}: {data[:300]!r}")
    return dt, json.loads(data)["usage"]["completion_tokens"]


def run(port, bodies, clients):
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda b: post(port, b), bodies))
    wall = time.perf_counter() - t0
    lat = sorted(r[0] for r in results)
    p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
    return {"clients": clients, "answers_per_s": len(bodies) / wall, "tokens_per_s": sum(r[1] for r in results) / wall,
            "p50_ms": 1000 * statistics.median(lat), "p95_ms": 1000 * p95, "wall_s": wall}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--clients", default="1,4,16")
    p.add_argument("--max-tokens", type=int, default=0, help="per request (0: the model's default)")
    p.add_argument("--json", help="also write the rows as JSON")
    args, flags = p.parse_known_args()
    clients = [int(c) for c in args.clients.split(",")]
    proc = subprocess.Popen([args.server, "-m", args.model, "--port", "0", "-np", str(max(clients)), "--queue",
                             str(args.requests), *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    for _ in range(20):  # its start-up lines (the preset it chose), then the one with the port
        line = proc.stdout.readline()
        seen += line
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m or not line:
            break
    if not m:
        proc.kill()
        raise SystemExit(f"bench_server: dlm-server did not start: {seen}{proc.stdout.read()}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    port = int(m.group(1))
    print(line.strip())
    bodies = []
    for i in range(args.requests):
        b = {"prompt": PROMPTS[i % len(PROMPTS)], "seed": i}
        if args.max_tokens:
            b["max_tokens"] = args.max_tokens
        bodies.append(b)
    try:
        post(port, bodies[0])  # warm up
        rows = []
        for c in clients:
            rows.append(run(port, bodies, c))
            base = rows[0]["answers_per_s"]
            r = rows[-1]
            print(f"clients {c:3d}: {r['answers_per_s']:8.2f} answers/s ({r['answers_per_s'] / base:4.2f}x), "
                  f"{r['tokens_per_s']:8.1f} tokens/s, p50 {r['p50_ms']:8.1f} ms, p95 {r['p95_ms']:8.1f} ms, "
                  f"{args.requests} requests in {r['wall_s']:.1f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "flags": flags, "requests": args.requests, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
