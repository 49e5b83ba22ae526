"""The last masking pass over what a run seals: a secret found anywhere is absent everywhere.

The run's `Masker` starts from its environment and command line and grows while the run is
captured: config values under credential keys, string literals the code gives to credential names
(`SECRET_KEY = '…'`), and, once the command has ended, the values its logs print in a credential's
shape or after `api_key:` (`learn_logs`). What was stored before a value was known (the code
snapshot, the patch, the config copies) is stored again without it (`mask_sealed`), and every string
of the record passes through the full set of known values once more, so no source keeps what
another gave away.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.facts.secrets import Masker
from repro.facts.secrets.outputs import OUTPUT_VERDICTS_DB, output_secrets
from repro.store.record import FileEntry, Record
from repro.store.runs import Store


def learn_logs(masker: Masker, paths: list[Path]) -> set[str]:
    """Teach ``masker`` the secret values the command's streams print; returns the new ones."""
    learned: set[str] = set()
    for path in paths:
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        learned |= masker.learn(raw)
    return learned


def mask_sealed(record: Record, store: Store, masker: Masker, learned: set[str]) -> None:
    """Mask ``learned`` in the code files, patch and config copies ``record`` stored before it was
    known, and every known value in each of its strings (in place)."""
    if learned:
        late = Masker(learned, masker.redactor)
        late.masked = masker.masked
        for entries in (record.code.files, record.command.config_files):
            for entry in entries:
                _remask(entry, store, late, f"code file {entry.path}")
        record.code.untracked = [_same(e, record.code.files) for e in record.code.untracked]
        if record.code.patch:
            raw = store.read_blob(record.code.patch)
            patch = late.data(raw, "the uncommitted patch", shapes=False) if raw is not None else None
            if patch is not None and patch != raw:
                record.code.patch = store.put_bytes(patch)
    if not masker.values:
        return
    clean = Record.from_dict(masker.known(record.to_dict()))
    for f in dataclasses.fields(record):
        setattr(record, f.name, getattr(clean, f.name))


def _remask(entry: FileEntry, store: Store, late: Masker, where: str) -> None:
    if not entry.stored:
        return
    raw = store.read_blob(entry.hash)
    if raw is None:
        return
    masked = late.data(raw, where, printed=False, shapes=False)
    if masked != raw:
        entry.hash, entry.size = store.put_bytes(masked), len(masked)


def _same(entry: FileEntry, files: list[FileEntry]) -> FileEntry:
    return next((f for f in files if f.path == entry.path), entry)


def warn_secrets_in_outputs(record: Record, store: Store, masker: Masker) -> None:
    """Read the run's outputs for credentials once (cached by digest, for `repro export`), and warn
    about each output holding one: outputs are the result and are kept as written."""
    entries = [(e.path, e.hash) for e in record.results.outputs if e.stored and e.hash]
    found = output_secrets(entries, store.blob_path, store.cache_dir / OUTPUT_VERDICTS_DB, masker)
    if found:
        named = ", ".join(f"{f.path} ({f.kind})" for f in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        record.warn(
            "secrets_in_outputs",
            f"outputs hold a credential: {named}{more}; they are kept as written, and `repro export` "
            "refuses the run unless given --allow-secrets-in-outputs",
        )
