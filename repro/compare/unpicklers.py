"""Who loads the tensor files that need ``weights_only=False``: registered by the command line, read
by `repro.compare.tensors`. A module of its own, so registering costs no command the import of the
tensor comparison (`repro export` compares nothing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

# Loads two pickles that need ``weights_only=False`` somewhere they cannot harm this machine (the
# container sandbox, `repro.backends.unpickle.unpickle_sandboxed`), given the two runs' images to try,
# and returns two files of plain tensors and values that ``weights_only=True`` reads. Registered by
# the command line; none registered, such files are compared by bytes.
Unpickler = Callable[[Path, Path, Sequence[str]], tuple[Path, Path]]
UNPICKLERS: list[Unpickler] = []


def register_unpickler(unpickler: Unpickler) -> None:
    """Let tensor files that need unpickling be loaded by ``unpickler`` (once per process)."""
    if unpickler not in UNPICKLERS:
        UNPICKLERS.append(unpickler)
