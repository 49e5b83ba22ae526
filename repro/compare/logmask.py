"""The one rule for what in a log line measures the machine: masked before two logs are compared.

A number is masked (replaced by ``<t>``) when it measures time, speed, utilisation or
memory, or names a process, wherever it stands in the line:

- dates (``2024-05-01``, ``2024-05-01T10:00:00.123Z``, ``05/01/2024``, ``May 1 2024``) and
  clock times (``10:00:00``, tqdm's ``[00:01<00:00``, ``ETA 0:01:02``);
- a number followed by a time unit (``38.91ms``, ``3.33s``, ``1.2 min``) or a rate unit
  (``15.2it/s``, ``2.1s/it``, ``31.2 samples/sec``, ``900 tokens/s``, ``7.5 ms/batch``);
- a number after a field whose name speaks of time, speed or utilisation (``ms/batch 7.51``,
  ``iter_dt 38.9``, ``mfu 24.61%``, ``'train_runtime': 3.2``,
  ``'train_samples_per_second': 31.2``, ``time: 3.33``, ``throughput=812``), of memory
  (``max mem: 120``, ``GPU_mem 3.21G``, ``rss=812MiB``, ``'max_memory_allocated': 1.2e9``) or of a
  process (``pid 4242``, ``(pid=4242)``);
- the thread id of glog-style lines that torchrun and c10d print
  (``W1122 20:21:35.123000 4242 torch/distributed/run.py:793]``).

A progress bar's drawing (tqdm's ``█████▌``, rich's ``━━━━━╸━━``, as Lightning prints them) is
masked too: its width is what the terminal line has left beside the masked rate, so it moves with it.

Every other number is kept, so a changed loss still shows. `is_timing_key` is the same
rule for the field names of metric files (JSON, CSV, JSONL), where such fields are left
out of the comparison. Extra patterns (``compare.mask``) mask whatever they match;
lines matching ``compare.ignore_lines`` are left out altogether (`LogMask`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from repro.errors import ConfigError

MASK = "<t>"
NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"

# Words that, anywhere in a field name, say that its value measures time, speed or utilisation.
TIMING_WORDS = frozenset(
    "time times timer timing timings runtime elapsed duration took dt latency wall walltime clock "
    "timestamp date speed throughput mfu util utilization utilisation fps tflops gflops flops "
    # memory and process ids measure the machine, not the model
    "mem memory rss vram allocated reserved pid".split()
)
# Units that name a timing only as a field's last word (``step_time_ms``, not ``ms_ssim``).
UNIT_WORDS = frozenset("ms msec usec ns sec secs second seconds minutes hours".split())
# A rate such as ``ms/batch``, ``sec/iter``, ``s/it``, ``it/s`` or ``samples/sec``.
_RATE_KEY = re.compile(r"^(?:[a-z]+/(?:s|sec|second)|(?:m?s|sec)/[a-z]+)$", re.IGNORECASE)
_KEY_WORDS = re.compile(r"[a-z]+", re.IGNORECASE)

_TIME_UNIT = r"(?:ms|us|µs|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?)"
_RATE_UNIT = (
    r"(?:[A-Za-z]+/s(?:ec(?:ond)?)?|m?s/[A-Za-z]+|[A-Za-z]+ per sec(?:ond)?"
    r"|T?FLOPS|[KMGT]i?B/s)"
)
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?"
_KEY = r"[A-Za-z_][\w./-]*"

_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}/\d{1,2}/\d{4}\b|\b\d{4}/\d{2}/\d{2}\b"
    rf"|\b(?:{_WEEKDAY}\s+)?{_MONTH}\s+\d{{1,2}}(?:,?\s+\d{{4}})?"
    r"(?:\s+\d{1,2}:\d{2}(?::\d{2})?(?:\s+\d{4})?)?\b"
)
_CLOCK = re.compile(r"\b\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d+)?\b")
_UNIT = rf"(?:{_RATE_UNIT}|{_TIME_UNIT}\b)"
# A unit followed by ":" or "=" is the next field's name (``lr: 0.1  img/s: 1083``), and so is a
# word after a space that a number follows (``mean 0.5 min 0.3``): neither is this number's unit.
_WITH_UNIT = re.compile(
    rf"(?<![\w.]){NUM}(?:{_UNIT}|\s+{_UNIT}(?!\s+[-+]?\.?\d))(?!\s*['\"]?\s*[:=])", re.IGNORECASE
)
_SPACES = re.compile(r"[ \t]+")
# Two or more box-drawing or block glyphs in a row: a progress bar (a table's rules mask alike on both sides).
_BAR = re.compile(r"[\u2500-\u259f]{2,}")
BAR_MASK = "<bar>"
_MEMORY_UNIT = r"(?:[KMGT]i?B?|bytes?)\b"
_AFTER_KEY = re.compile(
    rf"(?P<key>{_KEY})(?P<sep>['\"]?\s*[:=|]?\s*)(?P<num>{NUM})(?P<unit>\s*%|\s?{_MEMORY_UNIT})?"
)
# glog's prefix: level, month and day, clock time (already masked), thread id, file:line]
_GLOG = re.compile(rf"^(?P<level>[IWEF])\d{{4}}\s+{MASK}\s+\d+(?=\s+\S+:\d+\])")


def is_timing_key(name: str) -> bool:
    """Whether a field name says its value measures time, speed or utilisation."""
    low = name.lower().strip("'\"")
    if _RATE_KEY.match(low.rsplit(".", 1)[-1]):
        return True
    words = _KEY_WORDS.findall(low)
    if not words:
        return False
    joined = "_".join(words)
    return (
        any(w in TIMING_WORDS for w in words)
        or words[-1] in UNIT_WORDS
        or any(p in joined for p in ("per_sec", "per_second"))
    )


def _mask_after_key(m: re.Match[str]) -> str:
    if not is_timing_key(m.group("key")):
        return m.group(0)
    unit = m.group("unit") or ""
    return f"{m.group('key')}{m.group('sep')}{MASK}{unit if '%' in unit else ''}"  # 812MiB and 1.1GiB alike


def mask_timings(line: str) -> str:
    """A log line with every number that measures time, speed or utilisation replaced by ``<t>``.

    Runs of spaces become one: aligned columns pad by the width of the numbers they hold.
    """
    line = _DATE.sub(MASK, line)
    line = _CLOCK.sub(MASK, line)
    line = _WITH_UNIT.sub(MASK, line)
    line = _AFTER_KEY.sub(_mask_after_key, line)
    line = _GLOG.sub(rf"\g<level>{MASK} {MASK} {MASK}", line)
    line = _BAR.sub(BAR_MASK, line)
    return _SPACES.sub(" ", line)  # padding moves with the width of what was masked


def _compile(patterns: Sequence[str], setting: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for p in patterns:
        try:
            compiled.append(re.compile(p))
        except re.error as e:
            raise ConfigError(
                f"{setting}: {p!r} is not a valid regular expression ({e})",
                hint="patterns are Python regular expressions, e.g. '^wandb: ' or 'seed=\\d+'",
            ) from e
    return tuple(compiled)


@dataclass(frozen=True)
class LogMask:
    """The timing rule plus a project's own patterns (``compare.mask``, ``compare.ignore_lines``)."""

    mask: tuple[str, ...] = ()
    ignore_lines: tuple[str, ...] = ()
    _mask: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)
    _ignore: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_mask", _compile(self.mask, "compare.mask"))
        object.__setattr__(self, "_ignore", _compile(self.ignore_lines, "compare.ignore_lines"))

    def ignored(self, line: str) -> bool:
        """Whether the line is left out of the comparison (``compare.ignore_lines``)."""
        return any(p.search(line) for p in self._ignore)

    def apply(self, line: str) -> str:
        """The line as compared: the project's patterns masked, then the timing rule."""
        for p in self._mask:
            line = p.sub("<m>", line)
        return mask_timings(line.rstrip())


def check_patterns(patterns: Sequence[str], setting: str) -> None:
    """Reject patterns that are not valid regular expressions.

    Raises:
        ConfigError: a pattern does not compile.
    """
    _compile(patterns, setting)
