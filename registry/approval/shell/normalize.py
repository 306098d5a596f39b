"""Text normalisation applied before any dangerous-command matching.

Contract: :func:`normalize_command` maps a command string to a form in which
common obfuscations no longer hide a dangerous command. It is deliberately
*conservative*: when bash would interpret the input in a way we cannot model
exactly, the normalised text is the reading that exposes more commands, never
fewer. The result is only ever used for detection, never executed.

Steps, in order:

1. NUL bytes removed, ANSI/VT escape sequences (CSI, OSC, DCS, two-byte) removed.
2. Unicode NFKC (fullwidth letters become ASCII ``rm``), zero-width and soft-hyphen
   characters removed.
3. CRLF becomes LF, a lone CR becomes LF (a CR is how a terminal hides the text
   before it), other C0 controls become spaces (``controls="space"``) or are
   dropped (``controls="drop"``: ``d\x01d`` reads as ``dd``); the detector
   analyses both readings when the input holds such bytes.
4. Backslash-newline line continuations joined.
5. ``$IFS``/``${IFS}``/``${IFS%?}``/``$IFS$9`` become a space.

:func:`splice_quotes` is a separate, lossy step used only by the flat-text
fallback matcher (for input whose quotes do not balance): it removes quotes
and backslashes that merely splice a word together (``r''m``, ``r"m"``,
``\\r\\m``).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["has_controls", "normalize_command", "splice_quotes", "strip_ansi"]

# CSI (ESC [ ... final), OSC (ESC ] ... BEL/ST), DCS/SOS/PM/APC strings, then any
# remaining two-byte escape, and the 8-bit CSI introducer.
_ANSI_RE = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?
    | \x1b[ -/]*[0-~]
    | \x9b[0-?]*[ -/]*[@-~]
    | \x1b
    """,
    re.VERBOSE,
)

# Characters that render as nothing; bash sees them as part of a word, but a
# reader (and a regex) would not, so we drop them to expose the word.
_INVISIBLE_RE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")

# C0 controls other than TAB and LF (CR handled separately) and DEL.
_CONTROL_RE = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")

# An even number of backslashes followed by backslash-newline: only the last
# backslash escapes the newline.
_CONTINUATION_RE = re.compile(r"(?<!\\)((?:\\\\)*)\\\r?\n")

# $IFS in its common spellings, optionally followed by an (empty) positional
# parameter used as a word terminator, e.g. ``cat$IFS$9/etc/passwd``.
# Not right after "=": "X=$IFS" assigns the separators, which expansion handles.
_IFS_RE = re.compile(r"(?<!=)\$(?:\{IFS(?:[^}]*)\}|IFS(?![A-Za-z0-9_]))(?:\$[0-9]|\$\{[0-9]\})?")

_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]")


def strip_ansi(text: str) -> str:
    """Remove ANSI/VT escape sequences and NUL bytes from ``text``."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI_RE.sub("", text)
    return text


def has_controls(text: str) -> bool:
    """True if ``text`` holds C0 control bytes other than TAB, LF and CR (or DEL)."""
    return _CONTROL_RE.search(text) is not None


def normalize_command(command: str, controls: str = "space") -> str:
    """Return the detection form of ``command`` (see module docstring).

    Never raises for any ``str`` input; idempotent for already-normalised text.
    """
    text = strip_ansi(command)
    if _NON_ASCII_RE.search(text):
        text = unicodedata.normalize("NFKC", text)
        text = _INVISIBLE_RE.sub("", text)
        # NFKC can produce new ESC-free text only, but fullwidth forms of
        # ``$``, ``{`` etc. become ASCII here, so the IFS step runs after it.
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL_RE.sub(" " if controls == "space" else "", text)
    if "\\" in text:
        text = _CONTINUATION_RE.sub(r"\1", text)
    if "IFS" in text:
        text = _IFS_RE.sub(" ", text)
    return text


_EMPTY_QUOTES_RE = re.compile(r"""(?<=[\w/.-])(?:''|"")+|(?:''|"")+(?=[\w/.-])""")
_INWORD_QUOTED_RE = re.compile(r"""(?<=[\w/.-])(['"])([\w/.-]*)\1|(['"])([\w/.-]*)\3(?=[\w/.-])""")
_BACKSLASH_LETTER_RE = re.compile(r"\\([A-Za-z0-9_/.-])")


def splice_quotes(text: str) -> str:
    """Undo quote splicing inside words: ``r''m`` / ``r"m"`` / ``\\r\\m`` -> ``rm``.

    Lossy (quotes that delimit whole arguments are kept, quotes glued to word
    characters are removed); used only for flat-text regex fallbacks.
    """
    if "'" not in text and '"' not in text and "\\" not in text:
        return text
    prev = None
    # Iterate to a fixed point: ``r""''m`` needs two passes.
    for _ in range(4):
        if prev == text:
            break
        prev = text
        text = _EMPTY_QUOTES_RE.sub("", text)
        text = _INWORD_QUOTED_RE.sub(lambda m: m.group(2) if m.group(1) else m.group(4), text)
        text = _BACKSLASH_LETTER_RE.sub(r"\1", text)
    return text
