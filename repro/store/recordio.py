"""A record as ``capsule.yaml`` bytes and back, with its long file lists kept as blobs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from repro.errors import CapsuleInvalid
from repro.runtime.contract import parse_json
from repro.store import limits as rules
from repro.store.capsule import blob_member
from repro.store.record import FileEntry, ListRef, Record, refuse_twice

# Long file lists of a record (a snapshot of a project outside git, thousands of outputs) are kept as
# blobs, like data manifests: the record names each by ``Record.lists[<field>]`` and holds the list
# empty, so `repro ls` reads a small record; the commands that use a list read it (`hydrate`).
LIST_INLINE = 1000  # entries kept in the record itself; beyond that a list blob
SPILLED_LISTS = rules.LIST_FIELDS


def encode_entries(entries: list[FileEntry]) -> bytes:
    """A file list as a list blob: one JSON array of ``[path, size, hash, stored, link]`` (same list,
    same bytes)."""
    rows = [[e.path, e.size, e.hash, e.stored, e.link] for e in entries]
    return json.dumps(rows, separators=(",", ":")).encode()


def decode_entries(raw: bytes, name: str) -> list[FileEntry]:
    """The entries of a list blob (their paths are checked with the record's, by `hydrate`).

    Raises:
        CapsuleInvalid: over the size bound, not a list blob, or a malformed entry.
    """
    if len(raw) > rules.MAX_LIST_BYTES:
        raise CapsuleInvalid(f"the list blob of {name} is larger than {rules.MAX_LIST_BYTES >> 20} MiB")
    try:
        rows = parse_json(raw)
    except (ValueError, RecursionError) as e:
        raise CapsuleInvalid(f"the list blob of {name} is malformed: {e}") from e
    if not isinstance(rows, list):
        raise CapsuleInvalid(f"the list blob of {name} is not a list")
    entries: list[FileEntry] = []
    for row in rows:  # JSON gives exact types: `type(x) is int` is an int and not a bool
        if not (type(row) is list and len(row) == 5):
            raise CapsuleInvalid(f"the list blob of {name} holds a malformed entry: {str(row)[:80]!r}")
        path, size, digest, stored, link = row
        if not (
            type(path) is str
            and type(size) is int
            and size >= 0
            and type(digest) is str
            and type(stored) is bool
            and (link is None or type(link) is str)
        ):
            raise CapsuleInvalid(f"the list blob of {name} holds a malformed entry: {str(row)[:80]!r}")
        entries.append(FileEntry(path, size, digest, stored, link))
    refuse_twice([e.path for e in entries], f"the list blob of {name}")
    return entries


def _list_owner(record: Record, name: str) -> tuple[Any, str]:
    """The object holding the list field ``name`` (one of `SPILLED_LISTS`) and the attribute."""
    section, attr = name.split(".")
    return getattr(record, section), attr


def spilled(record: Record, put: Callable[[bytes], str] | None) -> dict[str, Any]:
    """The record as plain data with every list over `LIST_INLINE` entries stored by ``put`` (which
    returns the blob's digest) and named in ``lists``; ``record.lists`` is updated to match, so
    `Record.blobs` names the list blobs. Without ``put`` every list read is written inline."""
    refs: dict[str, ListRef] = {}
    for name in SPILLED_LISTS:
        owner, attr = _list_owner(record, name)
        entries = getattr(owner, attr)
        if put is not None and len(entries) > LIST_INLINE:
            refs[name] = ListRef(put(encode_entries(entries)), len(entries))
        elif not entries and name in record.lists:
            refs[name] = record.lists[name]  # a list not read (`load_record` without a reader): kept as named
    record.lists = refs
    held: dict[str, list[FileEntry]] = {}
    try:  # the spilled lists are left out before the record is turned into plain data: no copy of them
        for name in refs:
            owner, attr = _list_owner(record, name)
            held[name] = getattr(owner, attr)
            setattr(owner, attr, [])
        return record.to_dict()
    finally:
        for name, entries in held.items():
            owner, attr = _list_owner(record, name)
            setattr(owner, attr, entries)


def hydrate(
    record: Record, read_blob: Callable[[str], bytes | None], only: tuple[str, ...] = SPILLED_LISTS
) -> Record:
    """Fill the lists the record keeps as blobs (those of ``only``) from ``read_blob`` (bytes
    checked against their name, None when missing), then check their paths like the record's own.

    Raises:
        CapsuleInvalid: a list blob missing, malformed, over the bound, or not the count named.
    """
    for name, ref in record.lists.items():
        if name not in only:
            continue
        owner, attr = _list_owner(record, name)
        if getattr(owner, attr):
            continue  # already read
        raw = read_blob(ref.blob)
        if raw is None:
            raise CapsuleInvalid(
                f"the list blob of {name} ({ref.blob}) is missing", member=blob_member(ref.blob)
            )
        entries = decode_entries(raw, name)
        if len(entries) != ref.count:
            raise CapsuleInvalid(f"the list blob of {name} holds {len(entries)} entries, not {ref.count}")
        setattr(owner, attr, entries)
    if record.lists:
        rules.check_record(record)
    return record


def dump_record(record: Record, put: Callable[[bytes], str] | None = None) -> bytes:
    """Serialise a record to YAML bytes (stable key order); with ``put``, its long file lists are
    stored by it as blobs (`spilled`)."""
    return rules.dump_yaml(spilled(record, put))


def load_record(raw: bytes, read_blob: Callable[[str], bytes | None] | None = None) -> Record:
    """Parse ``capsule.yaml`` bytes; with ``read_blob``, the file lists kept as blobs are read too
    (`hydrate`), else they stay empty (what `repro ls` needs).

    Raises:
        CapsuleInvalid: unparsable YAML, a record that does not fit the format, a bad list blob.
    """
    record = Record.from_dict(rules.load_yaml(raw))
    return record if read_blob is None else hydrate(record, read_blob)
