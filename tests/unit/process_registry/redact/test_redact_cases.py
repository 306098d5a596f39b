"""Issue 14's cases: every positive loses its secret and keeps its context, exactly; every
negative stays byte-identical; streaming gives the whole-text answer at every split point."""

from __future__ import annotations

import random

import pytest

from process_registry.redact import StreamRedactor, redact_text
from tests.unit.process_registry.redact.cases_keyvalue import GLUED, KEY_VALUE, SPLIT
from tests.unit.process_registry.redact.cases_negative import NEGATIVES
from tests.unit.process_registry.redact.cases_positive import VENDOR_POSITIVES, Case
from tests.unit.process_registry.redact.cases_structural import ARGUMENTS_AND_URLS, LEAKED_FORMATS

POSITIVES: list[Case] = [*VENDOR_POSITIVES, *LEAKED_FORMATS, *ARGUMENTS_AND_URLS, *KEY_VALUE,
                         *SPLIT, *GLUED]


def survives(secret: str, out: str) -> bool:
    """Whether the secret, or any 8-character window of it, is in ``out``."""
    n = min(8, len(secret))
    return any(secret[i : i + n] in out for i in range(len(secret) - n + 1))


def test_the_case_lists_are_what_the_issue_asks() -> None:
    ids = [c.id for c in POSITIVES] + [name for name, _ in NEGATIVES]
    assert len(ids) == len(set(ids))
    assert len(NEGATIVES) >= 80
    assert len(POSITIVES) + len(NEGATIVES) >= 300
    assert all(c.secret and c.secret not in c.want for c in POSITIVES)


@pytest.mark.parametrize("case", POSITIVES, ids=[c.id for c in POSITIVES])
def test_secret_goes_and_its_context_stays(case: Case) -> None:
    out = redact_text(case.text)
    assert out == case.want
    assert not survives(case.secret, out)
    assert redact_text(out) == out


@pytest.mark.parametrize(("name", "text"), NEGATIVES, ids=[n for n, _ in NEGATIVES])
def test_text_without_a_secret_is_left_alone(name: str, text: str) -> None:
    assert redact_text(text) == text


def stream(*chunks: str) -> str:
    r = StreamRedactor()
    return "".join(r.feed(chunk) for chunk in chunks) + r.flush()


@pytest.mark.parametrize("case", POSITIVES, ids=[c.id for c in POSITIVES])
def test_stream_gives_the_whole_text_answer_at_every_split(case: Case) -> None:
    text = case.text
    for i in range(len(text) + 1):
        assert stream(text[:i], text[i:]) == case.want, i


@pytest.mark.parametrize("case", SPLIT, ids=[c.id for c in SPLIT])
def test_split_token_fed_character_by_character(case: Case) -> None:
    assert stream(*case.text) == case.want


@pytest.mark.parametrize("seed", range(4))
def test_stream_of_every_case_in_random_chunks(seed: int) -> None:
    """All positives and negatives in one document, fed in chunks of random size."""
    rng = random.Random(seed)
    texts = [c.text for c in POSITIVES] + [t for _, t in NEGATIVES]
    rng.shuffle(texts)
    document = "\n".join(texts)
    chunks, i = [], 0
    while i < len(document):
        n = rng.choice((1, 2, 3, 7, 64, 500, 4096))
        chunks.append(document[i : i + n])
        i += n
    assert stream(*chunks) == redact_text(document)
