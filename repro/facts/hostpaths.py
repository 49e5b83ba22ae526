"""Which host paths a replay may show its command: the host decides, never the record.

A capsule's ``data.inputs[].path`` names files of the replaying project. Such a path selects a host
file or folder only when all of these hold:

- it lies inside the replay's data root once links are followed, and is not the data root itself;
- no part of it is ``.git`` (remote URLs with tokens, every commit), ``.repro`` (every other run's
  blobs) or a credential location (`CREDENTIAL_NAMES`, `CREDENTIAL_PAIRS`, ``.env`` files);
- and its content hashes as recorded (then the capsule's author already had it), or the replaying
  user named the data root on the command line (``--data-root``): data that differs from the record
  is shown from a root the user chose, never from one the record chose.

Core data only; `repro.rerun.inputs` applies it to what it mounts and links.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from repro.facts.secrets.rules import CREDENTIAL_PLACES, is_env_file

PRIVATE_DIRS = (".git", ".repro")  # a project's history and remotes; every run's blobs
# The credential locations of the tools ML projects use (`rules.CREDENTIAL_PLACES`, the one list):
# a path with one of these parts, or with two parts one after the other (``.config/gcloud``).
CREDENTIAL_NAMES = frozenset(place for place, _ in CREDENTIAL_PLACES if "/" not in place)
CREDENTIAL_PAIRS = frozenset(
    (first, second) for first, _, second in (place.partition("/") for place, _ in CREDENTIAL_PLACES) if second
)


def private_part(rel: str) -> str | None:
    """The part of ``rel`` (a relative POSIX path) that makes it a private location, or None."""
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    for i, part in enumerate(parts):
        if part in PRIVATE_DIRS or part in CREDENTIAL_NAMES or is_env_file(part):
            return part
        if i + 1 < len(parts) and (part, parts[i + 1]) in CREDENTIAL_PAIRS:
            return f"{part}/{parts[i + 1]}"
    return None


def refusal(data_root: Path, rel: str) -> str | None:
    """Why the host path ``rel`` under ``data_root`` may not be shown to a replay whatever its
    content, or None when it may be (if its content hashes as recorded, or the root is the user's).
    Follows links: a ``data`` that links to ``~/.ssh`` is judged where it leads."""
    named = private_part(rel)
    if named is not None:
        return f"it is under {named}"
    root = data_root.resolve()
    try:
        inside = (root / rel).resolve().relative_to(root)
    except (ValueError, OSError, RuntimeError):
        return "it leads outside the data root"
    if not inside.parts:
        return "it is the whole data root"
    named = private_part(inside.as_posix())
    return f"it leads under {named}" if named is not None else None
