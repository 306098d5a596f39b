"""What credentials and redaction in context cost per call, beside their baselines.

    python -m bench.bench_creds [--n 2000]

Measures, in one run and in turns: a client's proof over a terminal call and the
worker's check of it (token recomputed from the key, MAC compared; the ledger
read of the revocation epoch is not included: it is one GET), the seal of a
result and the client's opening of it (1 KB and 100 KB results), against the
baseline of one ``json.dumps`` of the same message (work every call already
does). And a 64 KiB ``process log`` read redacted in its context (16 KiB each
side) against redacting the window alone.
Target: proof + check + seal + open of a 1 KB result < 0.1 ms.
"""

from __future__ import annotations

import argparse
import json

from bench.stats import measure_paths, report
from process_registry.in_context import redact_between
from process_registry.redact import redact_text
from process_registry.sessions import SessionSigner
from process_registry.tokens.formats import TokenInfo
from worker.protocol.mac import message_body, open_result, proof_matches, prove, seal_result
from worker.protocol.messages import ToolCallMessage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    signer = SessionSigner(b"k" * 32)
    token = signer.token("bench")
    message = ToolCallMessage(call_id="c" * 32, session_id="bench", tool="terminal",
                              args={"command": "echo hi"}, deadline_s=210.0)  # fmt: skip
    small = json.dumps({"output": "x" * 1000, "exit_code": 0})
    large = json.dumps({"output": "x" * 100_000, "exit_code": 0})

    def baseline() -> None:
        json.dumps(message.model_dump(mode="json"))

    def prove_and_check() -> None:
        proof = prove(token, message_body("call", message))
        info = TokenInfo(proof.kid, proof.expires)
        candidates = signer.candidates("bench", info, 0)
        assert proof_matches(candidates[0], proof, message_body("call", message))

    def seal_open(result: str) -> None:
        assert open_result(token, "c" * 32, seal_result(token, "c" * 32, result)) is not None

    line = "plain output line with words and numbers 12345\n"
    text = (line * (64 * 1024 // len(line) + 1))[: 64 * 1024]
    side = text[: 16 * 1024]
    calls = measure_paths(
        [
            ("json.dumps of the message", baseline),
            ("proof + worker check", prove_and_check),
            ("seal + open, 1 KB result", lambda: seal_open(small)),
            ("seal + open, 100 KB result", lambda: seal_open(large)),
        ],
        args.n,
        interleave=True,
    )
    print(report(calls, calls[0]))
    reads = measure_paths(
        [
            ("redact a 64 KiB window alone", lambda: redact_text(text)),
            ("redact it in context (16 KiB each side)", lambda: redact_between(side, text, side)),
        ],
        max(20, args.n // 20),
        interleave=True,
    )
    print()
    print(report(reads, reads[0]))


if __name__ == "__main__":
    main()
