"""Warm-call latency of sbx backends beside their per-call baselines, in the same run.

    .venv/bin/python -m bench.bench_backends [--calls N] [--baseline-calls M] [--json]

* docker: ``DockerEnvironment.exec("echo hi")`` (one attached exec, session shell)
  vs the SDK's ``exec_run`` per call on the same container.
  Target: sbx p50 <= 5% of the baseline p50.
* ssh: ``SSHEnvironment.exec("echo hi")`` vs asyncssh ``conn.run("echo hi")`` on a
  reused connection, against a real sshd started on 127.0.0.1.
  Target: sbx p50 <= 50% of the baseline p50.
* local: ``LocalEnvironment.exec`` vs ``subprocess.run(["bash", "-c", ...])``, for reference.

Needs a Docker engine with ``sbx-test-busybox:latest`` (``tests/services/docker.sh``) and
OpenSSH; a backend whose service is missing is reported as skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

TARGETS = {"docker": 0.05, "ssh": 0.50}


def measure(call: Callable[[], object], n: int, warmup: int = 5) -> list[float]:
    """Milliseconds of ``n`` calls after ``warmup`` unmeasured ones."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "n": len(ordered)}


def _check(result: Any) -> None:
    output = getattr(result, "output", None)
    if output is not None and output != "hi\n":
        raise RuntimeError(f"unexpected output: {output!r}")


def bench_local(calls: int, baseline_calls: int) -> dict[str, Any]:
    from environments.backends.local.environment import LocalEnvironment

    env = LocalEnvironment("bench-local")
    try:
        sbx = measure(lambda: _check(env.exec("echo hi")), calls)
    finally:
        env.close()
    base = measure(
        lambda: subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True),
        baseline_calls,
    )
    return {"sbx": summary(sbx), "baseline": summary(base), "baseline_name": "bash -c per call"}


def bench_docker(calls: int, baseline_calls: int) -> dict[str, Any]:
    import docker

    from environments.backends.docker.config import DockerConfig
    from environments.backends.docker.environment import DockerEnvironment

    client = docker.from_env()
    client.ping()
    env = DockerEnvironment(
        "bench-docker", config=DockerConfig(image="sbx-test-busybox:latest"), client=client
    )
    try:
        sbx = measure(lambda: _check(env.exec("echo hi")), calls)
        container = client.containers.get(env.container_id)

        def exec_run() -> None:
            code, out = container.exec_run(["sh", "-c", "echo hi"])
            if code != 0 or out != b"hi\n":
                raise RuntimeError(f"exec_run gave {code} {out!r}")

        base = measure(exec_run, baseline_calls, warmup=2)
    finally:
        env.close()
    return {"sbx": summary(sbx), "baseline": summary(base), "baseline_name": "docker exec_run"}


def bench_ssh(calls: int, baseline_calls: int, user: str | None = None) -> dict[str, Any]:
    import asyncssh

    from environments.backends.ssh.channel import LOOP
    from environments.backends.ssh.environment import SSHConfig, SSHEnvironment, close_connections
    from tests.sshd import running_sshd

    with running_sshd() as server:
        if user:
            server = dataclasses.replace(server, user=user)
        config = SSHConfig(
            host=server.host,
            port=server.port,
            user=server.user,
            key_file=server.key_file,
            known_hosts=server.known_hosts,
            use_agent=False,
        )
        env = SSHEnvironment("bench-ssh", config=config)
        try:
            sbx = measure(lambda: _check(env.exec("echo hi")), calls)
        finally:
            env.close()
            close_connections()

        async def connect() -> asyncssh.SSHClientConnection:
            return await asyncssh.connect(
                server.host,
                server.port,
                username=server.user,
                client_keys=[server.key_file],
                known_hosts=server.known_hosts,
                agent_path=None,
                config=None,
            )

        conn = LOOP.run(connect(), 30)

        async def run_once() -> None:
            done = await conn.run("echo hi", check=True)
            if done.stdout != "hi\n":
                raise RuntimeError(f"conn.run gave {done.stdout!r}")

        try:
            base = measure(lambda: LOOP.run(run_once(), 30), baseline_calls)
        finally:
            conn.close()
    return {"sbx": summary(sbx), "baseline": summary(base), "baseline_name": "asyncssh conn.run"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="measured sbx calls per backend")
    parser.add_argument("--baseline-calls", type=int, default=40, help="measured baseline calls")
    parser.add_argument("--backends", default="local,docker,ssh")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument(
        "--ssh-user",
        default=None,
        help="log in as this user (the test key is accepted for any user); a user whose login "
        "shell has no heavy rc files gives the fairer baseline, as sshd runs every command "
        "through it",
    )
    args = parser.parse_args(argv)
    benches: dict[str, Callable[[int, int], dict[str, Any]]] = {
        "local": bench_local,
        "docker": bench_docker,
        "ssh": lambda n, m: bench_ssh(n, m, args.ssh_user),
    }
    results: dict[str, Any] = {}
    for name in args.backends.split(","):
        try:
            results[name] = benches[name](args.calls, args.baseline_calls)
        except Exception as exc:  # a missing service skips that backend, says why
            results[name] = {"skipped": f"{type(exc).__name__}: {exc}"}
            continue
        r = results[name]
        r["ratio_p50"] = r["sbx"]["p50"] / r["baseline"]["p50"]
        if name in TARGETS:
            r["target_ratio_p50"] = TARGETS[name]
            r["meets_target"] = r["ratio_p50"] <= TARGETS[name]
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'backend':8} {'sbx p50/p95 ms':>18} {'baseline p50/p95 ms':>22}  ratio  target")
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name:8} skipped: {r['skipped']}")
            continue
        target = r.get("target_ratio_p50")
        verdict = (
            "" if target is None else (f"<= {target:.0%} {'ok' if r['meets_target'] else 'MISSED'}")
        )
        print(
            f"{name:8} {r['sbx']['p50']:8.3f} / {r['sbx']['p95']:7.3f} "
            f"{r['baseline']['p50']:10.3f} / {r['baseline']['p95']:8.3f}  "
            f"{r['ratio_p50']:6.2%} {verdict}   ({r['baseline_name']})"
        )
    ssh = results.get("ssh", {})
    if "baseline" in ssh and ssh["baseline"]["p50"] > 50:
        print(
            "note: asyncssh conn.run above 50 ms means the login shell runs heavy rc files on "
            "every command; compare with --ssh-user USER (a user whose shell is /bin/sh)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
