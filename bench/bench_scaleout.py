#!/usr/bin/env python3
"""Throughput of 1, 2 and 3 dlm-server replicas behind a router, and the same load with faults (docs/server.md).

  bench/bench_scaleout.py --server build/default/server/dlm-server --model models/teacher [--router haproxy]

For each replica count: the scale-out test's workload (tests/server/scaleout_test.py: 300 requests from 32
clients, fast-dllm sampled at temperature 2, a third streamed, answers of 16 or 32 tokens) through the router,
with no fault; then once with 3 replicas, one killed at 1/3 and one drained at 2/3. Prints requests/s, errors
and retries, and each throughput's ratio to one replica's. Every
replica runs one CPU thread: on a machine with C cores, more than C replicas cannot scale further.
"""
import argparse
import os
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import scaleout_test as so  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--router", choices=["haproxy", "nginx", "smg"], default="haproxy")
    p.add_argument("--venv", default=os.path.join(so.ROOT, "build", "venv-serving"))
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--clients", type=int, default=32)
    args = p.parse_args()
    if args.router == "smg":
        so.setup_serving_venv(args.venv)
    reqs = so.workload(args.requests)
    print(f"{args.router}, {len(reqs)} requests from {args.clients} clients, {os.cpu_count()} cores, one thread per replica")
    base = None
    for count, faults in [(1, False), (2, False), (3, False), (3, True)]:
        replicas = so.start_replicas(args, count)
        router = None
        try:
            want = so.single_answers(replicas[0].port, reqs)
            with tempfile.TemporaryDirectory() as workdir:
                port = so.free_port()
                router = (so.haproxy_router(replicas, port, workdir) if args.router == "haproxy" else
                          so.nginx_router(replicas, port, workdir) if args.router == "nginx" else
                          so.smg_router(replicas, port, workdir, args.venv))
                plan = [(1 / 3, lambda: replicas[1].proc.send_signal(signal.SIGKILL)),
                        (2 / 3, lambda: replicas[2].proc.send_signal(signal.SIGTERM))] if faults else []
                st = so.run_load(router.port, reqs, want, clients=args.clients, faults=plan)
                router.stop()
        finally:
            if router:
                router.stop()
            for r in replicas:
                r.stop()
        rps = st["requests_per_second"]
        base = base or rps
        label = f"{count} replica{'s' if count > 1 else ''}" + (", 1 killed + 1 drained" if faults else "")
        print(f"  {label:<32} {rps:7.1f} requests/s ({rps / base:.2f}x one replica), {st['seconds']:.1f} s, "
              f"{st['completed']} completed, {st['explicit_errors']} explicit errors, {st['retries']} retries, {st['failed']} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
