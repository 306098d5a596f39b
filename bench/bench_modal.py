"""The modal backend beside the SDK's own per-call exec, against the same fake Modal, same run.

    .venv/bin/python -m bench.bench_modal [--calls N] [--creates M] [--sequential] [--json]

* warm ``echo hi``: ``ModalEnvironment.exec("echo hi")`` (the session shell, one long-lived
  exec) vs ``sb.exec("echo", "hi")`` + ``stdout.read()`` + ``wait()`` per call on the same
  sandbox. Target: sbx p50 <= 20% of the baseline p50. Measured with the default shell
  (``auto``: bash when the image has it) and with ``shell="sh"`` (dash here), in turns.
* create-to-first-result: a new session's first ``exec("echo hi")``, from constructing the
  environment (the sandbox is created, the shell started), reported.

The fake (tests/fakes/modal: real gRPC on 127.0.0.1, commands run for real under
bubblewrap) runs in its own process so it does not share the measured process's GIL.
Needs the ``modal`` extra, bubblewrap and nsenter.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.stats import Timing, measure_paths, report

TARGET = 0.20


def start_fake() -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.modal"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    info: dict[str, str] = json.loads(proc.stdout.readline())
    return proc, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--creates", type=int, default=5)
    parser.add_argument("--sequential", action="store_true", help="one path after the other")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    fake, info = start_fake()
    os.environ.update(
        MODAL_SERVER_URL=info["server_url"],
        MODAL_TOKEN_ID=info["token_id"],
        MODAL_TOKEN_SECRET=info["token_secret"],
    )
    import modal

    from environments.backends.modal.config import ModalConfig
    from environments.backends.modal.environment import ModalEnvironment

    config = ModalConfig(app_name="sbx-bench")
    envs: list[ModalEnvironment] = []
    try:
        creates = []
        for _ in range(args.creates):
            started = time.perf_counter()
            env = ModalEnvironment(f"bench-{secrets.token_hex(4)}", config)
            envs.append(env)
            assert env.exec("echo hi").output == "hi\n"
            creates.append((time.perf_counter() - started) * 1000)
        dash = ModalEnvironment(
            f"bench-{secrets.token_hex(4)}", config.model_copy(update={"shell": "sh"})
        )
        envs.append(dash)
        sandbox = modal.Sandbox.from_id(envs[0].sandbox_id)

        def sbx_call(env: ModalEnvironment) -> None:
            if env.exec("echo hi").output != "hi\n":
                raise RuntimeError("unexpected output")

        def sdk_call() -> None:
            process = sandbox.exec("echo", "hi")
            if process.stdout.read() != "hi\n" or process.wait() != 0:
                raise RuntimeError("unexpected output")

        timings = measure_paths(
            [
                ("sbx session shell (bash)", lambda: sbx_call(envs[0])),
                ("sbx session shell (sh)", lambda: sbx_call(dash)),
                ("sdk exec per call", sdk_call),
            ],
            args.calls,
            interleave=not args.sequential,
        )
        sandbox.detach()
    finally:
        for made in envs:
            made.close()
        assert fake.stdin is not None
        fake.stdin.close()
        fake.wait(timeout=60)
    print_results(timings, creates, as_json=args.json)


def print_results(timings: list[Timing], creates: list[float], *, as_json: bool) -> None:
    *shells, base = timings
    ratios = {t.name: t.p50 / base.p50 for t in shells}
    result: dict[str, Any] = {
        "warm_echo": {t.name: {"p50": t.p50, "p95": t.p95, "n": len(t.samples)} for t in timings},
        "ratio_p50": ratios,
        "target": TARGET,
        "create_to_first_result_ms": {"p50": statistics.median(creates), "n": len(creates)},
    }
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(report(timings, base))
    for name, ratio in ratios.items():
        verdict = "met" if ratio <= TARGET else "NOT met"
        print(f"{name} / sdk exec per call, p50: {ratio:.2f} (target <= {TARGET:.2f}: {verdict})")
    print(f"create-to-first-result (new session): p50 {statistics.median(creates):.1f} ms "
          f"over {len(creates)}")  # fmt: skip


if __name__ == "__main__":
    main()
