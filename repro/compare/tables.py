"""Metric files (JSON, JSONL, CSV) read into value series and compared numerically.

- JSON: an object is flattened to dotted names (``eval.accuracy``, ``log_history.3.loss``),
  one value each; a list of objects is read as rows, like JSONL.
- JSONL: one object per line; each field is a series over the rows, stepped by the row's
  ``step`` field when every row has one, else by row number.
- CSV: a header row; each column is a series over the rows, stepped like JSONL. Cells
  that parse as numbers are numbers.

Fields whose names measure time, speed or utilisation (``train_runtime``,
``samples_per_second``, ``epoch_time``) are left out by the rule of `repro.compare.logmask`, and
timings inside text values (a date, a clock time) are masked by the same rule.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from repro.compare.logmask import is_timing_key, mask_timings
from repro.compare.tolerance import Tolerance
from repro.compare.values import Series, ValueFormat, ValueReport, compare_series
from repro.runtime.contract import parse_json

TABLE_FORMATS: dict[str, ValueFormat] = {".json": "json", ".jsonl": "jsonl", ".csv": "csv"}
TABLE_SUFFIXES = tuple(TABLE_FORMATS)
MAX_TABLE_BYTES = 64 << 20  # larger files are compared by bytes only


class UnreadableTable(ValueError):
    """A metric file that does not parse as its suffix says."""


def is_table_file(path: str) -> bool:
    """Whether a path names a metric file compared by content (JSON, JSONL, CSV)."""
    return path.lower().endswith(TABLE_SUFFIXES)


def _leaf(value: Any) -> Any:
    return mask_timings(value) if isinstance(value, str) else value


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _flatten(value, f"{prefix}.{i}" if prefix else str(i), out)
    else:
        out[prefix or "value"] = obj


def _rows_to_series(rows: list[dict[str, Any]], ignored: set[str]) -> Series:
    stepped = bool(rows) and all(isinstance(r.get("step"), int) for r in rows)
    series: Series = {}
    for i, row in enumerate(rows):
        step = row["step"] if stepped else i
        flat: dict[str, Any] = {}
        _flatten(row, "", flat)
        for name, value in flat.items():
            if is_timing_key(name):
                ignored.add(name)
                continue
            series.setdefault(name, []).append((step, _leaf(value)))
    return series


def _number(cell: str) -> Any:
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return cell


def _rows(text: str, suffix: str) -> list[dict[str, Any]]:
    if suffix == ".jsonl":
        rows = [parse_json(line) for line in text.splitlines() if line.strip()]
        return [r if isinstance(r, dict) else {"value": r} for r in rows]
    reader = csv.DictReader(io.StringIO(text))
    return [{k: _number(v) for k, v in row.items() if k is not None} for row in reader]


def read_rows(text: str, suffix: str) -> list[dict[str, Any]]:
    """The rows of a JSONL or CSV metric file's text (CSV cells that parse as numbers are numbers).

    Raises:
        UnreadableTable: the text does not parse.
    """
    try:
        return _rows(text, suffix)
    except (ValueError, csv.Error) as e:
        raise UnreadableTable(f"not valid {suffix[1:].upper()}: {str(e)[:120]}") from e


def read_table(path: Path, suffix: str) -> tuple[Series, list[str]]:
    """A metric file's series and the timing fields left out.

    Raises:
        UnreadableTable: the file does not parse as JSON, JSONL or CSV.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    ignored: set[str] = set()
    try:
        if suffix == ".json":
            obj = parse_json(text)
            if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
                series = _rows_to_series(obj, ignored)
            else:
                flat: dict[str, Any] = {}
                _flatten(obj, "", flat)
                series = {}
                for name, value in flat.items():
                    if is_timing_key(name):
                        ignored.add(name)
                    else:
                        series[name] = [(None, _leaf(value))]
        else:
            series = _rows_to_series(_rows(text, suffix), ignored)
    except (ValueError, csv.Error) as e:
        raise UnreadableTable(f"not valid {suffix[1:].upper()}: {str(e)[:120]}") from e
    return series, sorted(ignored)


def compare_tables(a: Path, b: Path, tol: Tolerance, suffix: str) -> ValueReport:
    """Compare two metric files of one format by their values (``a`` is the reference).

    Raises:
        UnreadableTable: either file does not parse.
    """
    sa, ignored_a = read_table(a, suffix)
    sb, ignored_b = read_table(b, suffix)
    report = compare_series(sa, sb, tol, TABLE_FORMATS.get(suffix, "csv"))  # another suffix reads as CSV
    report.ignored = sorted(set(ignored_a) | set(ignored_b))
    return report
