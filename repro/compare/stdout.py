"""Compare two runs' stdout on what it means: timings masked, numbers within tolerance.

Lines are compared after `repro.compare.logmask` masked what measures time (and the project's own
``compare.mask`` patterns) and dropped the lines ``compare.ignore_lines`` names. A
carriage return redraws a line (progress bars): what the terminal shows last is kept.
Two lines that differ only in numbers within tolerance count as within tolerance; the
first differing number is reported with both values and the field it follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from repro.compare.logmask import NUM, LogMask
from repro.compare.tolerance import Tolerance, largest

_NUMBER = re.compile(NUM)
_FIELD = re.compile(r"([A-Za-z_][\w./-]*)['\"]?\s*[:=|]?\s*$")


@dataclass
class StdoutDivergence:
    """The decisive stdout line that differs (timings masked): its number, text and first value."""

    line: int  # 1-based, in the original's output (the replay's where the original had ended)
    original: str | None  # None where that side had no more lines
    replay: str | None
    within_tolerance: bool
    differing: int  # lines that differ
    original_lines: int
    replay_lines: int
    max_abs: float | None
    field: str | None = None  # the name before the first differing number (``loss``), when any
    original_value: str | None = None  # the first differing number, as printed
    replay_value: str | None = None


def split_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) pairs as a terminal shows them; trailing blank lines dropped."""
    out = []
    for i, raw in enumerate(text.split("\n")):  # not splitlines(): it would split at every \r too
        parts = [p for p in raw.split("\r") if p.strip()]
        out.append((i + 1, (parts[-1] if parts else "").rstrip()))
    while out and not out[-1][1]:
        out.pop()
    return out


def _last_place(text: str) -> float:
    """One unit in the last printed place of a decimal number; 0 for an integer."""
    mantissa, _, exp = text.lower().partition("e")
    if "." not in mantissa and not exp:
        return 0.0
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def numbers_close(a: str, b: str, tol: Tolerance) -> tuple[bool, float | None]:
    """Whether two lines differ only in numbers within tolerance, and the largest difference.

    A printed decimal is a rounded value, so one unit in its last printed place is
    allowed on top of the tolerance, but only where that unit is at most 1e-3 of the
    value (about four significant digits): a coarse print such as ``0.8`` vs ``0.9``
    proves nothing either way and counts as a difference. Integers get no allowance.
    """
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False, None
    biggest: float | None = None
    ok = True
    for ma, mb in zip(_NUMBER.finditer(a), _NUMBER.finditer(b), strict=True):
        sa, sb = ma.group(), mb.group()
        if sa == sb:
            continue
        fa, fb = float(sa), float(sb)
        delta = abs(fa - fb)
        biggest = delta if biggest is None else max(biggest, delta)
        slack = max(_last_place(sa), _last_place(sb))
        if slack > 1e-3 * max(abs(fa), abs(fb)):
            slack = 0.0
        if not (tol.close(fa, fb) or (slack and delta <= slack + tol.atol + tol.rtol * abs(fa))):
            ok = False
    return ok, biggest


def first_value(a: str, b: str) -> tuple[str | None, str | None, str | None]:
    """The first number that differs between two lines with the same words: (field, a, b)."""
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return None, None, None
    for ma, mb in zip(_NUMBER.finditer(a), _NUMBER.finditer(b), strict=True):
        if ma.group() != mb.group():
            named = _FIELD.search(a[: ma.start()])
            return (named.group(1) if named else None), ma.group(), mb.group()
    return None, None, None


def compare_stdout(
    original: str, replay: str, tol: Tolerance, mask: LogMask | None = None
) -> StdoutDivergence | None:
    """Compare two stdout texts line by line, timings masked; None when they mean the same."""
    mask = mask or LogMask()
    la = [(n, t) for n, t in split_lines(original) if not mask.ignored(t)]
    lb = [(n, t) for n, t in split_lines(replay) if not mask.ignored(t)]
    na, nb = [mask.apply(t) for _, t in la], [mask.apply(t) for _, t in lb]
    first: StdoutDivergence | None = None
    decisive: StdoutDivergence | None = None
    differing = 0
    deltas: list[float | None] = []
    for i in range(max(len(la), len(lb))):
        a = la[i][1] if i < len(la) else None
        b = lb[i][1] if i < len(lb) else None
        if a is not None and b is not None and na[i] == nb[i]:
            continue
        differing += 1
        ok, delta = (False, None) if a is None or b is None else numbers_close(na[i], nb[i], tol)
        deltas.append(delta)
        name, va, vb = (None, None, None) if a is None or b is None else first_value(na[i], nb[i])
        div = StdoutDivergence(
            line=(la[i] if i < len(la) else lb[i])[0],
            original=a,
            replay=b,
            within_tolerance=ok,
            differing=0,
            original_lines=len(la),
            replay_lines=len(lb),
            max_abs=None,
            field=name,
            original_value=va,
            replay_value=vb,
        )
        first = first or div
        if not ok:
            decisive = decisive or div
    result = decisive or first
    if result is not None:
        result.differing = differing
        result.max_abs = largest(deltas)
    return result
