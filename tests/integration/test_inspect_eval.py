"""A tiny inspect_ai eval end to end on ``sandbox=("sbx", "local")`` through a real worker.

The model is inspect's own ``mockllm`` playing back tool calls; inspect's ``bash`` tool
runs them in each sample's sbx sandbox, and the scorer reads the answer file from it.
Two samples run one after the other, so the second shows it got a sandbox of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import require_module
from tests.integration.deployment import Deployment, deployment

require_module("inspect_ai", "pip install 'sbx[inspect]'")

from inspect_ai import Task, eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer  # noqa: E402
from inspect_ai.solver import TaskState, generate, use_tools  # noqa: E402
from inspect_ai.tool import bash  # noqa: E402
from inspect_ai.util import sandbox  # noqa: E402

MODEL = "mockllm/model"


def played(*outputs: ModelOutput) -> list[ModelOutput]:
    """The model's turns, each with its usage given (mockllm would count tokens with
    tiktoken, whose encodings it downloads: no network here)."""
    for output in outputs:
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return list(outputs)


@pytest.fixture(scope="module")
def sbx_deployment() -> Iterator[Deployment]:
    with deployment() as running:
        yield running


@scorer(metrics=[accuracy()])  # type: ignore[untyped-decorator]
def answer_file():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        text = await sandbox().read_file("answer.txt")
        return Score(value=CORRECT if text.strip() == target.text else INCORRECT, answer=text)

    return score


def test_a_tiny_eval_runs_its_tools_in_sbx(sbx_deployment: Deployment, tmp_path: Path) -> None:
    model = get_model(MODEL, custom_outputs=played(
        ModelOutput.for_tool_call(MODEL, "bash", {"command": "echo 42 > answer.txt; pwd"}),
        ModelOutput.from_content(MODEL, "done"),
        ModelOutput.for_tool_call(MODEL, "bash", {"command": "ls answer.txt; echo 7 > answer.txt"}),
        ModelOutput.from_content(MODEL, "done"),
    ))  # fmt: skip
    task = Task(
        dataset=[Sample(input="write 42", target="42"), Sample(input="write 7", target="7")],
        solver=[use_tools(bash(timeout=60)), generate()],
        scorer=answer_file(),
        sandbox=("sbx", "local"),
    )
    [log] = eval(task, model=model, log_dir=str(tmp_path), max_samples=1, display="none")
    assert log.status == "success", log.error
    assert log.samples is not None
    first, second = sorted(log.samples, key=lambda s: str(s.target))
    assert [(s.scores or {})["answer_file"].value for s in (first, second)] == [CORRECT] * 2
    tool_output = [str(m.content) for m in first.messages if m.role == "tool"]
    [workdir] = [line for out in tool_output for line in out.splitlines() if "inspect-" in line]
    assert not Path(workdir).exists()  # the sample's directory went with its cleanup
    second_output = " ".join(str(m.content) for m in second.messages if m.role == "tool")
    assert "No such file" in second_output  # a sandbox of its own: no answer.txt from before
