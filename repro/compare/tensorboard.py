"""TensorBoard event files: paired by directory and tags, compared per tag and step.

Event files are named ``events.out.tfevents.<wall time>.<host>.<pid>.<n>`` and carry
wall times inside, so two runs of one script never share their names or bytes. Here
the files of one directory are read together (in name order, which is time order) with
the ``tensorboard`` package's event file loader, into one series per tag: the values
logged (scalars, tensors, histograms, images as their encoded bytes) with their steps.
Wall times, file versions and plugin metadata are left out.

Directories pair by path; directories left over pair when their parent and tag set
match (``SummaryWriter()`` names its directory after the clock and the host), then by
tag set alone, then by parent alone, each only where it is unambiguous. The
``tensorboard`` package is optional: without it, callers compare event files by bytes
(`available`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from repro.compare.values import Series

MARKER = "tfevents"
INSTALL_HINT = "pip install tensorboard"


class UnreadableEvents(ValueError):
    """An event file that the loader cannot read (truncated or not an event file)."""


def is_event_file(path: str) -> bool:
    """Whether a path names a TensorBoard event file (``events.out.tfevents.…``)."""
    return MARKER in PurePosixPath(path).name


def event_dir(path: str) -> str:
    """The directory an event file belongs to (``.`` for the top)."""
    return str(PurePosixPath(path).parent)


def available() -> bool:
    """Whether the ``tensorboard`` package is importable."""
    return importlib.util.find_spec("tensorboard") is not None


def read_events(paths: Sequence[Path]) -> Series:
    """The tags of some event files (read in the order given) as series of (step, value).

    Raises:
        UnreadableEvents: a file is not a readable event file.
    """
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    series: Series = {}
    for path in paths:
        try:
            for event in EventFileLoader(str(path)).Load():
                if not event.HasField("summary"):
                    continue  # file version, graph, session log: no values
                for value in event.summary.value:
                    if value.HasField("tensor"):
                        arr = tensor_util.make_ndarray(value.tensor)
                        scalar = arr.ndim == 0 and arr.dtype.kind in "biuf"
                        series.setdefault(value.tag, []).append(
                            (int(event.step), arr.item() if scalar else arr)
                        )
        except Exception as e:  # DataLossError, DecodeError, OSError: whatever the loader raises
            raise UnreadableEvents(f"{type(e).__name__}: {str(e)[:120]}") from e
    return series


def pair_dirs(
    a: dict[str, frozenset[str]], b: dict[str, frozenset[str]]
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Pair directories of event files: by path, then by parent and tag set, then by tag set, then by parent.

    ``a`` and ``b`` map a directory to its tag set. Returns the pairs, and the directories
    left unpaired on each side.
    """
    pairs = [(d, d) for d in a if d in b]
    left_a = [d for d in a if d not in b]
    left_b = [d for d in b if d not in a]
    keys: list[Callable[[str, frozenset[str]], object]] = [
        lambda d, tags: (str(PurePosixPath(d).parent), tags),
        lambda d, tags: tags,
        lambda d, tags: str(PurePosixPath(d).parent),  # one left on each side: their tags then differ
    ]
    for key in keys:
        for da in list(left_a):
            wanted = key(da, a[da])
            matches_b = [db for db in left_b if key(db, b[db]) == wanted]
            matches_a = [x for x in left_a if key(x, a[x]) == wanted]
            if len(matches_b) == 1 and len(matches_a) == 1:
                pairs.append((da, matches_b[0]))
                left_a.remove(da)
                left_b.remove(matches_b[0])
    return pairs, left_a, left_b
