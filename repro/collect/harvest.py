"""Metric series a run wrote without calling `repro.log_metric`: harvested when the run is collected.

Three sources, tried in the order `metrics.from` gives (default ``tensorboard, files, stdout``):

- **tensorboard**: every scalar tag of the TensorBoard event files the run wrote, with the
  step it was logged at (read by `repro.compare.tensorboard`; needs the ``tensorboard`` package).
  Tags from several event directories merge by tag; a tag found in more than one directory is
  named ``tag (directory)``, and the files of a torchrun rank other than 0 give ``tag (rank N)``.
- **files**: CSV, JSONL and JSON metric files the run wrote whose rows carry a step
  (``step``, ``global_step``, ``iter``, ``iteration`` or ``epoch``, first found wins): Lightning's
  ``metrics.csv``, HF Trainer's ``trainer_state.json`` (its ``log_history``). Each numeric column
  is a series; empty cells are skipped. A name found in several files is taken from the file
  with the most points (then the shortest path).
- **stdout**: lines that start with a step (``iter 10: loss 3.21, time 38.9ms``, ``step 250:
  train loss 2.05, val loss 2.10``, ``Epoch 3/10 - loss: 0.53``) give one series per ``name
  value`` pair after it (``train loss`` → ``train_loss``); a printed dict with a ``…loss`` key
  and a step or epoch key (HF Trainer's ``{'loss': 2.3, …, 'epoch': 0.5}``) gives one per
  numeric key; a line that is only ``loss: 0.502`` (a name with loss, acc, error or ppl, no step)
  is the next point of its series, by order. Of a line a progress bar redrew with ``\\r`` only
  what stayed on the screen is read. Patterns of ``metrics.patterns`` are tried first: each named
  group is a series, the group ``step`` its step.

Fields that measure time, speed, utilisation or memory are left out by the rule of log masking
(`repro.compare.logmask.is_timing_key`), and so are the step keys themselves. A name the script
logged with `repro.log_metric` is never harvested (the logged series wins); between sources, the
earlier in `metrics.from` wins. Bounded: at most `MAX_SERIES` series of `MAX_POINTS` points each,
files up to `MAX_FILE_BYTES`.
"""

from __future__ import annotations

import ast
import json
import math
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from repro.collect import attribution, produced
from repro.compare import tables, tensorboard
from repro.compare.logmask import NUM, is_timing_key
from repro.errors import ConfigError
from repro.runtime.contract import parse_json
from repro.store.record import ResultInfo, SeriesInfo, SeriesSource

SOURCES = ("tensorboard", "files", "stdout")
STEP_KEYS = ("step", "global_step", "iter", "iteration", "epoch")  # the first one a row has is its step
MAX_SERIES = 200
MAX_POINTS = 100_000
MAX_FILE_BYTES = tables.MAX_TABLE_BYTES
MAX_LINE = 4096  # longer stdout lines are not metric lines
_NOT_SERIES = frozenset((*STEP_KEYS, "it", "batch", "v_num", "version"))

Step = int | float


@dataclass
class Harvested:
    """One series: its name, where it came from, and its (step, value) points in logged order."""

    name: str
    source: SeriesSource
    origin: str  # the file (relative to the project root) or directory it was read from, or "stdout"
    points: list[tuple[Step, float]] = field(default_factory=list)


@dataclass(frozen=True)
class HarvestSettings:
    """What to harvest: the sources in order of precedence and the extra stdout patterns."""

    sources: tuple[str, ...] = SOURCES
    patterns: tuple[str, ...] = ()


def check_settings(sources: Sequence[str], patterns: Sequence[str]) -> None:
    """Refuse an unknown source in ``metrics.from`` and a pattern of ``metrics.patterns`` that does
    not compile or names no series.

    Raises:
        ConfigError: the first bad entry.
    """
    for source in sources:
        if source not in SOURCES:
            raise ConfigError(
                f"metrics.from: unknown source {source!r}", hint=f"choose from: {', '.join(SOURCES)}"
            )
    for pattern in patterns:
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise ConfigError(
                f"metrics.patterns: {pattern!r} is not a valid regular expression ({e})",
                hint=r"e.g. 'Train Epoch: (?P<step>\d+) .*Loss: (?P<loss>[\d.]+)'",
            ) from e
        if not set(compiled.groupindex) - {"step"}:
            raise ConfigError(
                f"metrics.patterns: {pattern!r} names no series",
                hint=r"name each value with a group, e.g. (?P<loss>[\d.]+), and the step with (?P<step>\d+)",
            )


# --------------------------------------------------------------------------- values


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _step(value: Any) -> Step | None:
    number = _number(value)
    if number is None or not math.isfinite(number):
        return None
    return int(number) if number == int(number) else number


def _keep(name: str) -> bool:
    return name.lower() not in _NOT_SERIES and not is_timing_key(name)


class _Collector:
    """Series of one source, by name, bounded."""

    def __init__(self, source: SeriesSource) -> None:
        self.source = source
        self.series: dict[str, Harvested] = {}

    def add(self, name: str, origin: str, step: Step, value: float) -> None:
        found = self.series.get(name)
        if found is None:
            if len(self.series) >= MAX_SERIES:
                return
            found = self.series[name] = Harvested(name, self.source, origin)
        if len(found.points) < MAX_POINTS:
            found.points.append((step, value))

    def add_row(self, row: dict[str, Any], origin: str, step: Step) -> None:
        for key, value in row.items():
            number = _number(value)
            if number is not None and _keep(str(key)):
                self.add(str(key), origin, step, number)


def _row_step(row: dict[str, Any]) -> Step | None:
    for key in STEP_KEYS:
        if key in row:
            return _step(row[key])
    return None


def _read(root: Path, rel: str, declared: Sequence[str]) -> bytes | None:
    """A file the run wrote, read as its outputs are: under the declared output dir holding it,
    else under the project root, never through a link the run made."""
    base, inner = attribution.located(root, rel, list(declared))
    return produced.read_bytes(base, inner, limit=MAX_FILE_BYTES)


# --------------------------------------------------------------------------- tensorboard


def from_tensorboard(
    root: Path, paths: Iterable[str], declared: Sequence[str] = (), writers: Mapping[str, int] | None = None
) -> list[Harvested]:
    """The scalar tags of the event files among ``paths`` (relative to ``root``), one series per tag.

    Each directory's files are read together, in name order; a file that cannot be read is skipped.
    ``writers`` gives the torchrun rank that wrote a file: the files of each rank are read apart, and
    a rank other than 0 names its series ``tag (rank N)``, as logged metrics are named.
    """
    if not tensorboard.available():
        return []
    by_dir: dict[tuple[str, int], list[str]] = {}
    for rel in sorted(paths):
        if tensorboard.is_event_file(rel):
            rank = max((writers or {}).get(rel, 0), 0)
            by_dir.setdefault((tensorboard.event_dir(rel), rank), []).append(rel)
    tags: dict[str, list[tuple[str, int, list[tuple[Step, float]]]]] = {}
    with tempfile.TemporaryDirectory(prefix="repro-events-") as tmp:
        for (directory, rank), rels in sorted(by_dir.items()):
            copies = []
            for i, rel in enumerate(rels):
                raw = _read(root, rel, declared)
                if raw is not None:
                    copy = Path(tmp) / f"{len(tags)}-{i}.tfevents"
                    copy.write_bytes(raw)
                    copies.append(copy)
            try:
                series = tensorboard.read_events(copies)
            except tensorboard.UnreadableEvents:
                continue
            for tag, values in series.items():
                pairs = ((_step(s), _number(v)) for s, v in values)
                points = [(s, v) for s, v in pairs if s is not None and v is not None]
                if points and _keep(tag):
                    tags.setdefault(tag, []).append((directory, rank, points))
    collector = _Collector("tensorboard")
    for tag, found in tags.items():
        dirs = {directory for directory, _, _ in found}
        for directory, rank, points in found:
            parts = ([directory] if len(dirs) > 1 else []) + ([f"rank {rank}"] if rank else [])
            name = f"{tag} ({', '.join(parts)})" if parts else tag
            for step, value in points:
                collector.add(name, directory, step, value)
    return list(collector.series.values())


# --------------------------------------------------------------------------- files


def _json_rows(obj: Any) -> list[dict[str, Any]]:
    """Rows of a JSON document: a list of objects, or the longest list of objects one level down
    (``trainer_state.json``'s ``log_history``)."""
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        return obj
    if isinstance(obj, dict):
        lists = [v for v in obj.values() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)]
        return max(lists, key=len, default=[])
    return []


def file_rows(text: str, suffix: str) -> list[dict[str, Any]]:
    """The rows of a metric file's text; [] when it does not parse or holds no rows."""
    try:
        if suffix == ".json":
            return _json_rows(parse_json(text))
        return tables.read_rows(text, suffix)
    except (ValueError, tables.UnreadableTable):
        return []


def from_files(root: Path, paths: Iterable[str], declared: Sequence[str] = ()) -> list[Harvested]:
    """Series of the metric files among ``paths`` whose rows carry a step; by name, the file with
    the most points wins (then the shortest path)."""
    candidates: list[Harvested] = []
    for rel in sorted(paths):
        suffix = PurePosixPath(rel).suffix.lower()
        if suffix not in tables.TABLE_SUFFIXES:
            continue
        raw = _read(root, rel, declared)
        if raw is None:
            continue
        collector = _Collector("files")
        for row in file_rows(raw.decode("utf-8", "replace"), suffix):
            step = _row_step(row)
            if step is not None:
                collector.add_row(row, rel, step)
        candidates += collector.series.values()
    best: dict[str, Harvested] = {}
    for series in sorted(candidates, key=lambda s: (-len(s.points), len(s.origin), s.origin)):
        best.setdefault(series.name, series)
    return sorted(best.values(), key=lambda s: (s.origin, candidates.index(s)))[:MAX_SERIES]


# --------------------------------------------------------------------------- stdout

_LEAD = re.compile(
    r"^\W{0,3}(?P<key>step|iter|iteration|epoch)\b\s*[:=#]?\s*(?P<step>\d+)(?:\s*/\s*\d+)?\s*[:,|\]-]?",
    re.IGNORECASE,
)
_WORD = r"[A-Za-z][A-Za-z0-9_]*"
_PAIR = re.compile(
    rf"(?<![\w.%/])(?P<key>{_WORD}(?:[ _]{_WORD})?)\s*(?:[:=]\s*|\s+)(?P<num>{NUM})(?![\w.%/:])"
)
_DICT = re.compile(r"\{[^{}]*\}")
# A line that is only ``loss: 0.502`` (``test loss: …``, ``Loss = …``): no step, so its place in the
# order of such lines is its step. Only names of a result, so that settings printed once are not series.
_BARE = re.compile(rf"^\s*(?P<key>{_WORD}(?:[ _]{_WORD})?)\s*[:=]\s*(?P<num>{NUM})\s*$")
_RESULT_WORDS = ("loss", "acc", "error", "ppl", "perplexity")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            return parse_json(text)
        except ValueError:
            return None


def _printed_dict(line: str) -> dict[str, Any] | None:
    """A printed dict with a ``…loss`` key and a step or epoch key, as HF Trainer prints its logs."""
    for match in _DICT.finditer(line):
        obj = _literal(match.group(0))
        if (
            isinstance(obj, dict)
            and any("loss" in str(k).lower() for k in obj)
            and any(k in obj for k in STEP_KEYS)
        ):
            return obj
    return None


def _line_pairs(rest: str) -> Iterable[tuple[str, float]]:
    for match in _PAIR.finditer(rest):
        name = re.sub(r"[ ]+", "_", match.group("key").strip()).lower()
        yield name, float(match.group("num"))


def from_stdout(text: str, patterns: Sequence[str] = ()) -> list[Harvested]:
    """Series printed on stdout: ``metrics.patterns`` first, then the common line shapes."""
    compiled = [re.compile(p) for p in patterns]
    matched = [0] * len(compiled)
    collector = _Collector("stdout")
    for raw_line in text.split("\n"):  # not splitlines(): a "\r" redraws the line, it does not end it
        line = raw_line.rstrip("\r").rsplit("\r", 1)[-1]
        if len(line) > MAX_LINE or not line.strip():
            continue
        if _from_patterns(line, compiled, collector, matched):
            continue
        printed = _printed_dict(line)
        if printed is not None:
            step = _row_step(printed)
            if step is not None:
                collector.add_row(printed, "stdout", step)
            continue
        lead = _LEAD.match(line)
        if lead is None:
            _bare(line, collector)
            continue
        step_value = int(lead.group("step"))
        for name, value in _line_pairs(line[lead.end() :]):
            if _keep(name) and not name.startswith(tuple(f"{k}_" for k in _NOT_SERIES)):
                collector.add(name, "stdout", step_value, value)
    return list(collector.series.values())


def _bare(line: str, collector: _Collector) -> None:
    """A ``loss: X`` line with no step: the next point of its series, by order."""
    match = _BARE.match(line)
    if match is None:
        return
    name = re.sub(r"[ ]+", "_", match.group("key").strip()).lower()
    if _keep(name) and any(word in name for word in _RESULT_WORDS):
        found = collector.series.get(name)
        collector.add(name, "stdout", len(found.points) if found else 0, float(match.group("num")))


def _from_patterns(
    line: str, compiled: Sequence[re.Pattern[str]], collector: _Collector, matched: list[int]
) -> bool:
    """Whether a pattern of ``metrics.patterns`` matched the line (its series then added); without
    a ``step`` group the step is how many lines that pattern matched before."""
    for i, pattern in enumerate(compiled):
        match = pattern.search(line)
        if match is None:
            continue
        groups = match.groupdict()
        step = _step(_parse(groups.get("step")))
        if step is None:
            step = matched[i]
        matched[i] += 1
        for name, value in groups.items():
            number = _parse(value)
            if name != "step" and number is not None:
                collector.add(name, "stdout", step, number)
        return True
    return False


def _parse(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- all


def harvest(
    root: Path,
    paths: Iterable[str],
    stdout: str,
    settings: HarvestSettings,
    logged: Iterable[str] = (),
    declared: Sequence[str] = (),
    writers: Mapping[str, int] | None = None,
) -> list[Harvested]:
    """Every series of the sources in ``settings`` (files in ``paths``, relative to ``root``, read
    from the ``declared`` output dirs holding them; the run's ``stdout``), without the names in
    ``logged``; a name goes to the earliest source."""
    paths = list(paths)
    taken = set(logged)
    found: list[Harvested] = []
    for source in settings.sources:
        if source == "tensorboard":
            series = from_tensorboard(root, paths, declared, writers)
        elif source == "files":
            series = from_files(root, paths, declared)
        else:
            series = from_stdout(stdout, settings.patterns)
        for one in series:
            if one.name not in taken and one.points and len(found) < MAX_SERIES:
                taken.add(one.name)
                found.append(one)
    return found


# --------------------------------------------------------------------------- the record


def logged_series(raw: bytes | None) -> list[Harvested]:
    """The series the script logged with `repro.log_metric` (rows of metrics.jsonl), by name (and
    rank when not 0); a row without a step counts from 0 in its series, a value not a number is NaN."""
    collector = _Collector("log_metric")
    for line in (raw or b"").decode("utf-8", "replace").splitlines():
        try:
            row = parse_json(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or "name" not in row:
            continue
        rank = row.get("rank")
        name = str(row["name"]) if rank in (None, 0) else f"{row['name']} (rank {rank})"
        found = collector.series.get(name)
        step = _step(row.get("step"))
        if step is None:
            step = len(found.points) if found else 0
        value = _number(row.get("value"))
        collector.add(name, "", step, math.nan if value is None else value)
    return list(collector.series.values())


def summary(series: Harvested, mask: Callable[[str], str] = str) -> SeriesInfo:
    """What the record says of a series: name, source, origin, points, the last step and value."""
    last_step, last = series.points[-1] if series.points else (None, None)
    return SeriesInfo(
        name=mask(series.name),
        source=series.source,
        origin=mask(series.origin) if series.origin else None,
        points=len(series.points),
        last_step=last_step,
        last=last if last is not None and math.isfinite(last) else None,
    )


def rows_blob(found: Sequence[Harvested]) -> bytes:
    """The series as rows of ``metrics.jsonl`` (name, step, value) in step order, as a run logs them:
    a comparison walking the rows meets the earliest divergence first."""
    points = ((at, i, j, s.name, v) for i, s in enumerate(found) for j, (at, v) in enumerate(s.points))
    rows = sorted(points, key=lambda row: (row[0], row[1], row[2]))
    lines = [
        json.dumps({"name": name, "step": step, "value": value if math.isfinite(value) else str(value)})
        for step, _, _, name, value in rows
    ]
    return "".join(f"{line}\n" for line in lines).encode()


def fold(
    results: ResultInfo,
    sources: RunSources,
    settings: HarvestSettings,
    put: Callable[[bytes], str],
    mask: Callable[[str], str],
) -> None:
    """Record the run's series in ``results``: a summary of each logged one, then of each harvested
    one, whose rows go into a blob stored with ``put`` (names in the summaries pass ``mask``; ``put``
    masks the blob)."""
    logged = logged_series(sources.logged)
    names = [s.name for s in logged]
    found = harvest(
        sources.root, sources.paths, sources.stdout, settings, names, sources.declared, sources.writers
    )
    results.series = [summary(s, mask) for s in (*logged, *found)]
    results.harvested = put(rows_blob(found)) if found else None


@dataclass(frozen=True)
class RunSources:
    """What a run left to harvest from: the files it wrote (relative to ``root``), its stdout, and
    the rows it logged with `repro.log_metric`."""

    root: Path
    paths: tuple[str, ...]
    stdout: str
    logged: bytes | None = None
    declared: tuple[str, ...] = ()  # the declared output dirs, read as the host chose them
    writers: Mapping[str, int] = field(default_factory=dict)  # file → the torchrun rank that alone wrote it

    @classmethod
    def read(
        cls,
        root: Path,
        stdout: Path,
        outputs: Iterable[str],
        paths: Iterable[str],
        logged: bytes | None,
        writers: Mapping[str, int] | None = None,
    ) -> RunSources:
        """The sources of a collected run; its stdout read up to `MAX_FILE_BYTES` (none beyond)."""
        raw = produced.read_at(stdout, limit=MAX_FILE_BYTES) or b""
        text = raw.decode("utf-8", "replace")
        return cls(root, tuple(paths), text, logged, tuple(outputs), dict(writers or {}))
