"""The hostile-capsule fuzzer: every field of the record and every member kind of a capsule, each
tried with every class of hostile value, through every command that reads a capsule.

Fields come from the record schema (`repro/schemas/capsule.json`) and from the record's own
dataclasses (`Record` and what it holds, for the objects the schema leaves open), so a field added
later is fuzzed without a line here. Member kinds come from the capsule format's own names. Classes:
traversal, links, non-canonical names, huge, deep nesting, wrong type, control characters, markup.

Each forged capsule (SHA256SUMS recomputed, as anyone can) goes through `show`, `diff`, `verify`,
`verify-attestation`, `diff --markdown`, and on a share of the cases `replay --backend local` and
`check --against` with the recorded command replaced by a harmless one (a local replay runs the
capsule's code unsandboxed by design), and, with `REPRO_FUZZ=all` where an engine answers, `replay`
on docker. Each must end with a repro exit code and at most one `error:` line, never a traceback
or "unexpected error"; repro itself must read nothing from a canary directory beside the project,
write nothing outside the test's directories, open no network connection and move no image tag;
a capsule's control characters never reach the terminal, its markup is never live in Markdown.

CI runs a seeded sample (`REPRO_FUZZ_SAMPLE` cases, seed `REPRO_FUZZ_SEED`), about two minutes;
`make fuzz` walks every case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import random
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from repro import schemas
from repro.backends import imagearchive
from repro.compare import dataorder, ops, trace
from repro.errors import CapsuleInvalid, ExitCode
from repro.store import limits
from repro.store.capsule import (
    ATTESTATION_NAME,
    BLOB_DIR,
    IMAGE_MEMBER,
    MODEL_SIGNATURE_NAME,
    RECORD_NAME,
    SIGNATURE_NAME,
    SUMS_NAME,
    blob_member,
)
from repro.store.hashing import hash_bytes
from repro.store.record import Record
from tests import forging
from tests.conftest import Project

FULL = os.environ.get("REPRO_FUZZ") == "all"
SEED = int(os.environ.get("REPRO_FUZZ_SEED", "37"))
SAMPLE = int(os.environ.get("REPRO_FUZZ_SAMPLE", "150"))
EXPENSIVE_EVERY = 1 if FULL else 8  # one sampled case in this many also replays and checks locally

CLASSES = ("traversal", "links", "non_canonical", "huge", "deep", "wrong_type", "control", "markup")
MEMBER_KINDS = (
    RECORD_NAME, SUMS_NAME, SIGNATURE_NAME, ATTESTATION_NAME, MODEL_SIGNATURE_NAME, BLOB_DIR, IMAGE_MEMBER
)  # fmt: skip
# The streams of rows a capsule carries as blobs, and where in each a row is altered.
STREAMS = (ops.OPS_LOG, trace.TRACE_LOG, dataorder.DATA_ORDER_LOG)
ROWS = ("first", "middle", "last")
ROW_COUNT = 7
# The members of the image archive a capsule carries (`repro.backends.imagearchive`).
IMAGE_KINDS = (imagearchive.MANIFEST, "config", "layer", "repositories")
REPRO_CODES = {int(c) for c in ExitCode} - {int(ExitCode.UNEXPECTED)}

CONTROL = "\x1b[31mRED\x1b[0m\x1b]8;;http://127.0.0.1:9/\x07link\x1b]8;;\x07\r\u202eevil\x00"
MARKUP = "<script>alert(1)</script><img src=x onerror=alert(2)>[x](javascript:alert(3))<javascript:alert(4)>"
DEEP = 3000
Path_ = tuple[str | int, ...]


# --------------------------------------------------------------------------- what to fuzz


def _schema_paths() -> set[Path_]:
    schema = json.loads((Path(schemas.__file__).parent / "capsule.json").read_text())
    defs = schema.get("$defs", {})
    found: set[Path_] = set()

    def walk(node: dict[str, Any], path: Path_, depth: int) -> None:
        if depth > 12:
            return
        if "$ref" in node:
            node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
        if path:
            found.add(path)
        for key, child in (node.get("properties") or {}).items():
            walk(child, (*path, key), depth + 1)
        if isinstance(node.get("items"), dict):
            walk(node["items"], (*path, 0), depth + 1)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], (*path, "*"), depth + 1)
        for alt in (node.get("anyOf") or []) + (node.get("oneOf") or []):
            if isinstance(alt, dict):
                walk(alt, path, depth + 1)

    walk(schema, (), 0)
    return found


def _dataclass_paths(cls: type, path: Path_ = (), depth: int = 0) -> set[Path_]:
    """Every field the record's dataclasses hold, at any depth (list items as index 0)."""
    found: set[Path_] = set()
    if depth > 8:
        return found
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        here = (*path, f.name)
        found.add(here)
        for inner, sub in _inner_types(hints.get(f.name), here):
            if dataclasses.is_dataclass(inner):
                found |= _dataclass_paths(inner, sub, depth + 1)  # type: ignore[arg-type]
    return found


def _inner_types(hint: Any, path: Path_) -> Iterator[tuple[Any, Path_]]:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (list, tuple) and args:
        yield from _inner_types(args[0], (*path, 0))
    elif origin is dict and len(args) == 2:
        yield from _inner_types(args[1], (*path, "*"))
    elif origin in (typing.Union, types.UnionType):
        for a in args:
            yield from _inner_types(a, path)
    elif dataclasses.is_dataclass(hint):
        yield hint, path


FIELDS = sorted(_schema_paths() | _dataclass_paths(Record), key=lambda p: tuple(map(str, p)))


@dataclasses.dataclass(frozen=True)
class Case:
    target: str  # "field" or "member"
    where: Path_ | str
    cls: str

    @property
    def id(self) -> str:
        where = ".".join(map(str, self.where)) if isinstance(self.where, tuple) else self.where
        return f"{self.target}:{where}:{self.cls}"


ALL_CASES = (
    [Case("field", p, c) for p in FIELDS for c in CLASSES]
    + [Case("member", k, c) for k in MEMBER_KINDS for c in CLASSES]
    + [Case("row", (s, r), c) for s in STREAMS for r in ROWS for c in CLASSES]
    + [Case("image", k, c) for k in IMAGE_KINDS for c in CLASSES]
)


def _sample(rng: random.Random, size: int) -> list[Case]:
    """``size`` cases: every member kind, stream row and image member at least once (in a class the
    seed picks), the rest drawn from all cases."""
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in ALL_CASES:
        if case.target != "field":
            groups.setdefault((case.target, str(case.where)), []).append(case)
    chosen = [rng.choice(cases) for cases in groups.values()]
    rest = [c for c in ALL_CASES if c not in chosen]
    return chosen + rng.sample(rest, max(0, min(size, len(ALL_CASES)) - len(chosen)))


_rng = random.Random(SEED)
CASES = ALL_CASES if FULL else _sample(_rng, SAMPLE)

# Findings in areas another change bounds (archive members, nesting and size bounds): (case id
# pattern, reason). Each must still fail: xfail is strict.
KNOWN: list[tuple[str, str]] = []


def _params() -> list[Any]:
    params = []
    for i, case in enumerate(CASES):
        marks = [
            pytest.mark.xfail(strict=True, reason=reason)
            for pattern, reason in KNOWN
            if re.fullmatch(pattern, case.id)
        ]
        params.append(pytest.param(case, i % EXPENSIVE_EVERY == 0, id=case.id, marks=marks))
    return params


# --------------------------------------------------------------------------- hostile values


def _payload(cls: str, original: Any, canary: Path) -> Any:
    """A value of class ``cls`` for a field whose genuine value is ``original``."""
    if cls == "traversal":
        value: Any = "../outside/secret.txt"
    elif cls == "links":
        value = str(canary)  # an absolute path, as a link target would name it
    elif cls == "non_canonical":
        value = "./outputs//../outputs/./model.txt"
    elif cls == "control":
        value = CONTROL
    elif cls == "markup":
        value = MARKUP
    elif cls == "huge":
        if isinstance(original, list):
            return [original[0] if original else "x"] * 200_000
        if isinstance(original, int) and not isinstance(original, bool):
            return 10**80
        if isinstance(original, float):
            return 1e308
        return "A" * (4 << 20)
    elif cls == "deep":
        return _DEEP_MARK
    else:  # wrong_type
        if isinstance(original, str):
            return {"not": ["a string"]}
        if isinstance(original, bool):
            return "yes please"
        if isinstance(original, (int, float)):
            return "NaN"
        if isinstance(original, dict):
            return "a string"
        if isinstance(original, list):
            return 7
        return [[{"x": None}]]
    if isinstance(original, list):
        return [value, *original[1:]]
    if isinstance(original, dict):
        return {value: value, **{k: v for k, v in list(original.items())[:3]}}
    return value


_DEEP_MARK = "@@DEEP@@"
_DEEP_FLOW = "[" * DEEP + "]" * DEEP


def _set_path(data: dict[str, Any], path: Path_, cls: str, canary: Path) -> None:
    node: Any = data
    for i, key in enumerate(path):
        last = i == len(path) - 1
        if isinstance(key, int) or key == "*":
            if isinstance(node, dict):  # a map of anything: its first entry (or a new one)
                key = next(iter(node), "fuzzed")
            elif isinstance(node, list):
                key = 0
                if not node:
                    node.append({} if not last else None)
        if last:
            original = node[key] if _has(node, key) else None
            node[key] = _payload(cls, original, canary)
            return
        if not _has(node, key) or not isinstance(node[key], (dict, list)):
            nxt = path[i + 1]
            node[key] = [] if isinstance(nxt, int) else {}
        node = node[key]


def _has(node: Any, key: Any) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)


def _dump(record: dict[str, Any]) -> bytes:
    text = yaml.safe_dump(record, sort_keys=False, width=1 << 30, allow_unicode=False)
    return text.replace(repr(_DEEP_MARK) if f"'{_DEEP_MARK}'" in text else _DEEP_MARK, _DEEP_FLOW).encode()


def _forge_field(genuine: Path, dest: Path, case: Case, canary: Path, harmless: bool) -> Path:
    found = forging.members(genuine)
    found.pop(SUMS_NAME)
    record = yaml.safe_load(found[RECORD_NAME])
    assert isinstance(case.where, tuple)
    _set_path(record, case.where, case.cls, canary)
    if harmless:
        _make_harmless(record)
    found[RECORD_NAME] = _dump(record)
    return forging.write(dest, found)


def _make_harmless(record: dict[str, Any]) -> None:
    """The recorded command replaced by one that does nothing (a local replay runs it unsandboxed)."""
    command = record.get("command")
    if isinstance(command, dict):
        command["argv"] = ["python", "-c", "pass"]
        command["injected"] = []


def _forge_member(genuine: Path, dest: Path, case: Case, canary: Path) -> Path:
    found = forging.members(genuine)
    sums = found.pop(SUMS_NAME)
    kind, cls = str(case.where), case.cls
    names = [n for n in found if n == kind or n.startswith(kind + "/")] or [kind]
    name = names[0]
    body = found.get(name, b"")
    extra: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]] = []
    if cls == "traversal":
        found[f"{BLOB_DIR}/../../outside/secret.txt"] = body
    elif cls == "links":
        found.pop(name, None)
        link = tarfile.TarInfo(name)
        link.type, link.linkname = tarfile.SYMTYPE, str(canary)
        extra.append(link)
        hard = tarfile.TarInfo(name + ".hard")
        hard.type, hard.linkname = tarfile.LNKTYPE, "../outside/secret.txt"
        extra.append(hard)
    elif cls == "non_canonical":
        found[f"./{name}"] = found.pop(name, body)
        found[f"x/../{name}"] = body
    elif cls == "huge":
        found[name] = body + b"\n" * (8 << 20)
    elif cls == "deep":
        found[name] = (_DEEP_FLOW + "\n").encode()
    elif cls == "wrong_type":
        found.pop(name, None)
        directory = tarfile.TarInfo(name)
        directory.type = tarfile.DIRTYPE
        extra.append(directory)
        fifo = tarfile.TarInfo(name + ".fifo")
        fifo.type = tarfile.FIFOTYPE
        extra.append(fifo)
    elif cls == "control":
        found[f"{BLOB_DIR}/\x1b[31m\r\u202e"] = body
        found[name] = body.replace(b"\n", b"\x1b[2J\r\n", 1) if body else CONTROL.encode()
    elif cls == "markup":
        found[f"{BLOB_DIR}/{MARKUP}"] = body
    return _write(dest, found, extra, keep_sums=sums if kind == SUMS_NAME and cls != "huge" else None)


def _write(dest: Path, found: dict[str, bytes], extra: list[Any], keep_sums: bytes | None = None) -> Path:

    sums = (
        keep_sums
        if keep_sums is not None
        else "".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in found.items()).encode()
    )
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as out:
        for name, body in [*found.items(), (SUMS_NAME, sums)]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            out.addfile(info, io.BytesIO(body))
        for info in extra:
            out.addfile(info)
    return dest


# --------------------------------------------------------------------------- rows and image members


def _genuine_rows(stream: str) -> list[dict[str, Any]]:
    """Rows shaped as the runtime writes them (`repro/runtime/opstream.py`, `steptrace.py`,
    `batchorder.py`)."""
    if stream == ops.OPS_LOG:
        return [
            {"i": i, "step": i // 3, "op": "aten::addmm", "phase": "fwd", "module": "fc",
             "where": "train.py:12", "sum": 1.5 + i, "values": [0.1, 0.2]}
            for i in range(ROW_COUNT)
        ]  # fmt: skip
    if stream == trace.TRACE_LOG:
        return [
            {"step": s, "f": 2, "params": {"fc.weight": [1.0 + s, 2.0 + s], "fc.bias": [0.5, 0.5]}}
            for s in range(ROW_COUNT)
        ]
    return [
        {"loader": 0, "epoch": 0, "step": s, "digest": f"{s:016x}", "indices": list(range(4 * s, 4 * s + 4))}
        for s in range(ROW_COUNT)
    ]


def _jsonl(rows: list[Any]) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def _image_archive(repositories: bool = True) -> dict[str, bytes]:
    """The members of a small ``docker save`` archive: a config, one layer, a manifest with a tag."""
    layer_io = io.BytesIO()
    with tarfile.open(fileobj=layer_io, mode="w") as layer:
        info = tarfile.TarInfo("etc/hello.txt")
        info.size = 6
        layer.addfile(info, io.BytesIO(b"hello\n"))
    layer_bytes = layer_io.getvalue()
    layer_digest = hashlib.sha256(layer_bytes).hexdigest()
    rootfs = {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]}
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": rootfs}).encode()
    config_digest = hashlib.sha256(config).hexdigest()
    members = {
        f"blobs/sha256/{config_digest}": config,
        f"blobs/sha256/{layer_digest}": layer_bytes,
        imagearchive.MANIFEST: json.dumps(
            [
                {
                    "Config": f"blobs/sha256/{config_digest}",
                    "RepoTags": ["repro-base:bookworm"],
                    "Layers": [f"blobs/sha256/{layer_digest}"],
                }
            ]
        ).encode(),  # fmt: skip
    }
    if repositories:
        members["repositories"] = json.dumps({"repro-base": {"bookworm": layer_digest}}).encode()
    return members


def _tar_bytes(found: dict[str, bytes], extra: tuple[tarfile.TarInfo, ...] | list[Any] = ()) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in found.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        for info in extra:
            tar.addfile(info)
    return out.getvalue()


def _with_streams_and_image(genuine: Path, dest: Path) -> Path:
    """The genuine capsule also carrying an op stream, a step trace, a data-order log and an image
    archive, as a run with ``--ops --trace`` on docker exports them (SHA256SUMS recomputed)."""
    found = forging.members(genuine)
    found.pop(SUMS_NAME)
    record = yaml.safe_load(found[RECORD_NAME])
    for stream in STREAMS:
        body = _jsonl(_genuine_rows(stream))
        found[blob_member(hash_bytes(body))] = body
        record["results"].setdefault("logs", {})[stream] = hash_bytes(body)
    found[IMAGE_MEMBER] = _tar_bytes(_image_archive())
    found[RECORD_NAME] = yaml.safe_dump(record, sort_keys=False).encode()
    return forging.write(dest, found)


def _hostile_row(cls: str, row: dict[str, Any], canary: Path) -> Any:
    """Row ``row`` of a stream made hostile: every value of it, or the line itself."""
    if cls == "deep":
        return _DEEP_FLOW.encode()
    if cls == "huge":
        return json.dumps({**row, "op": "A" * (8 << 20)}).encode()
    if cls == "wrong_type":
        return json.dumps([row]).encode()
    return {k: _payload(cls, v, canary) for k, v in row.items()}


def _forge_row(genuine: Path, dest: Path, case: Case, canary: Path) -> Path:
    """A stream blob with its first, middle or last row made hostile, under its new content address."""
    found = forging.members(genuine)
    found.pop(SUMS_NAME)
    assert isinstance(case.where, tuple)
    stream, where = case.where
    record = yaml.safe_load(found[RECORD_NAME])
    rows: list[Any] = _genuine_rows(str(stream))
    at = {"first": 0, "middle": ROW_COUNT // 2, "last": ROW_COUNT - 1}[str(where)]
    rows[at] = _hostile_row(case.cls, rows[at], canary)
    body = _jsonl(rows)
    found.pop(blob_member(record["results"]["logs"][stream]))
    found[blob_member(hash_bytes(body))] = body
    record["results"]["logs"][stream] = hash_bytes(body)
    found[RECORD_NAME] = yaml.safe_dump(record, sort_keys=False).encode()
    return forging.write(dest, found)


def _image_member_name(found: dict[str, bytes], kind: str) -> str:
    if kind in (imagearchive.MANIFEST, "repositories"):
        return kind
    manifest = json.loads(found[imagearchive.MANIFEST])[0]
    return str(manifest["Config"] if kind == "config" else manifest["Layers"][0])


def _forge_image(genuine: Path, dest: Path, case: Case, canary: Path) -> Path:
    """The capsule's image archive with one member made hostile (the capsule's own sums recomputed)."""
    inner = _image_archive()
    name = _image_member_name(inner, str(case.where))
    body = inner[name]
    extra: list[Any] = []
    if case.cls == "traversal":
        inner[f"x/../{imagearchive.MANIFEST}"] = json.dumps(
            [{"Config": name, "RepoTags": ["evil:latest"]}]
        ).encode()
        inner[f"../outside/{name}"] = body
    elif case.cls == "links":
        inner.pop(name)
        for kind, target in ((tarfile.SYMTYPE, str(canary)), (tarfile.LNKTYPE, "../outside/secret.txt")):
            link = tarfile.TarInfo(name if kind == tarfile.SYMTYPE else name + ".hard")
            link.type, link.linkname = kind, target
            extra.append(link)
    elif case.cls == "non_canonical":
        inner[f"./{name}"] = inner.pop(name)
        inner[f"blobs//{name}"] = body
    elif case.cls == "huge":
        inner[name] = body + b" " * (20 << 20)
    elif case.cls == "deep":
        inner[name] = _DEEP_FLOW.encode()
    elif case.cls == "wrong_type":
        inner.pop(name)
        directory = tarfile.TarInfo(name)
        directory.type = tarfile.DIRTYPE
        extra.append(directory)
    elif case.cls == "control":
        inner["blobs/\x1b[31m\r\u202e"] = body
        inner[imagearchive.MANIFEST] = inner[imagearchive.MANIFEST].replace(b"repro-base", CONTROL.encode())
    elif case.cls == "markup":
        inner[f"blobs/{MARKUP}"] = body
        inner[imagearchive.MANIFEST] = inner[imagearchive.MANIFEST].replace(b"repro-base", MARKUP.encode())
    found = forging.members(genuine)
    found.pop(SUMS_NAME)
    found[IMAGE_MEMBER] = _tar_bytes(inner, extra)
    return forging.write(dest, found)


def _read_image(tar: Path) -> list[str]:
    """The image archive a capsule carries, read and rebuilt as a docker replay does before the engine
    sees it: refused with `CapsuleInvalid`, or rebuilt holding only canonical names and no tag."""
    with tarfile.open(tar) as outer:
        member = outer.extractfile(IMAGE_MEMBER)
        if member is None:
            return []
        stream = io.BytesIO(member.read())
    try:
        held = imagearchive.read_index(stream)
        rebuilt = [b"".join(imagearchive.rebuilt(stream, image)) for image in held.images.values()]
    except CapsuleInvalid:
        return []
    except Exception as e:  # noqa: BLE001 - any other error is what the fuzzer looks for
        return [f"image archive: {type(e).__name__}: {str(e)[:200]}"]
    problems = []
    for raw in rebuilt:
        with tarfile.open(fileobj=io.BytesIO(raw)) as loaded:
            names = loaded.getnames()
            manifest = loaded.extractfile(imagearchive.MANIFEST)
            text = manifest.read().decode() if manifest is not None else ""
        if any(limits.member_name_problem(n) for n in names) or "RepoTags" in text:
            problems.append(f"image archive: rebuilt with {names!r} {text[:200]!r}")
    return problems


# --------------------------------------------------------------------------- watching repro


@dataclasses.dataclass
class Watch:
    """What repro itself did while a command ran: reads under the canary, writes outside the
    allowed roots, network connections (an audit hook; it sees this process, not the replayed
    command's)."""

    canary: Path
    allowed: tuple[Path, ...]
    active: bool = False
    seen: list[str] = dataclasses.field(default_factory=list)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            self._open(
                os.fsdecode(args[0]), args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else 0
            )
        elif event in (
            "os.rename",
            "os.remove",
            "os.rmdir",
            "os.mkdir",
            "os.symlink",
            "os.link",
            "os.truncate",
        ):
            for a in args[:2]:
                if isinstance(a, (str, bytes, os.PathLike)):
                    self._write(os.fsdecode(a), event)
        elif event == "socket.connect" and args:
            sock = args[0]
            if getattr(sock, "family", None) != socket.AF_UNIX:
                self.seen.append(f"network: connect {args[1]!r}")
        elif (
            event == "socket.getaddrinfo" and args and args[0] not in (None, "localhost", "127.0.0.1", "::1")
        ):
            self.seen.append(f"network: resolve {args[0]!r}")

    def _open(self, path: str, mode: Any, flags: Any) -> None:
        absolute = Path(os.path.abspath(path))
        if absolute.is_relative_to(self.canary):
            self.seen.append(f"read under the canary: {path}")
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        )
        if writing:
            self._write(path, "open")

    def _write(self, path: str, how: str) -> None:
        absolute = Path(os.path.abspath(path))
        if absolute.is_relative_to(self.canary) or not any(absolute.is_relative_to(a) for a in self.allowed):
            self.seen.append(f"write outside: {how} {path}")

    @contextlib.contextmanager
    def watching(self) -> Iterator[list[str]]:
        self.seen = []
        self.active = True
        try:
            yield self.seen
        finally:
            self.active = False


_WATCH: Watch | None = None


def _watch(canary: Path, allowed: tuple[Path, ...]) -> Watch:
    global _WATCH
    if _WATCH is None:
        _WATCH = Watch(canary, allowed)
        sys.addaudithook(lambda e, a: _WATCH.hook(e, a) if _WATCH is not None else None)
    _WATCH.canary, _WATCH.allowed = canary, allowed
    return _WATCH


# --------------------------------------------------------------------------- the genuine run


TRAIN = """import argparse
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
Path("outputs").mkdir(exist_ok=True)
for epoch in range(2):
    print(f"epoch {epoch} loss {args.lr / (epoch + 1):.4f}", flush=True)
Path("outputs/model.txt").write_text(f"weights {args.lr}\\n")
"""


@dataclasses.dataclass
class World:
    project: Project
    genuine: Path
    key: Path
    canary: Path
    watch: Watch
    root: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("fuzz")
    project = Project.init(root / "proj")
    project.write(".gitignore", "outputs/\n")
    project.write("train.py", TRAIN)
    project.commit("train")
    canary = root / "outside"
    canary.mkdir()
    (canary / "secret.txt").write_text("canary: repro must never read this\n")
    env = {"REPRO_BACKEND": "local"}
    assert (
        project.repro("run", "--backend", "local", "--", "python", "train.py", "--lr", "0.5", env=env).code
        == 0
    )
    key = root / "fuzz.key"
    assert project.repro("keygen", "--type", "ed25519", str(key)).code == 0
    exported = root / "exported.tar"
    done = project.repro("export", "latest", "-o", str(exported), "--sign", str(key), "--attest")
    assert done.code == 0, done.err
    genuine = _with_streams_and_image(exported, root / "genuine.tar")
    repo = Path(__file__).parents[2]
    allowed = (root, Path(tempfile.gettempdir()), Path(sys.prefix), repo, Path(os.devnull))
    return World(project, genuine, key, canary / "secret.txt", _watch(canary, allowed), root)


def _repro(world: World, *args: str, project: Path | None = None) -> tuple[int, str, str, list[str]]:
    """``repro ARGS`` in this process (in ``project``, by default the genuine run's), watched: exit
    code, stdout, stderr, what it did wrong."""
    from repro.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), world.watch.watching() as seen:
        code = main(["-C", str(project or world.project.root), *args])
    return code, out.getvalue(), err.getvalue(), list(seen)


def _docker_tags() -> dict[str, str]:
    """Every tagged image: tag → image id."""
    done = subprocess.run(
        ["docker", "images", "--no-trunc", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    pairs = (line.rsplit(" ", 1) for line in done.stdout.splitlines() if "<none>" not in line)
    return {tag: image for tag, image in pairs}


def _moved(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The tags that named another image after than before (new tags others make are not moves)."""
    return sorted(t for t, image in before.items() if t in after and after[t] != image)


def _docker_ready() -> bool:
    try:
        return (
            subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


# --------------------------------------------------------------------------- the walk


def _outside_code(md: str) -> str:
    md = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", md)
    return re.sub(r"`[^`\n]*`", "", md)


def _check(case: Case, what: str, code: int, out: str, err: str, seen: list[str]) -> list[str]:
    problems = [f"{what}: {s}" for s in seen]
    if code not in REPRO_CODES:
        problems.append(f"{what}: exit {code}: {[line[:300] for line in err.strip().splitlines()[-2:]]!r}")
    if "Traceback" in err or "unexpected error" in err:
        problems.append(f"{what}: {err.strip().splitlines()[-2:] if err.strip() else err!r}")
    errors = [
        line for line in err.splitlines() if line.startswith("repro: error:") or line.startswith("Error:")
    ]
    if code != 0 and len(errors) != 1 and what not in ("replay", "check", "replay docker"):
        problems.append(f"{what}: {len(errors)} error lines: {err[-300:]!r}")
    if any(c in out + err for c in ("\x1b", "\x07", "\u202e", "\r")):
        problems.append(f"{what}: a control character reached the terminal")
    if what == "diff --markdown" and re.search(r"<script|<img|\]\(javascript:", _outside_code(out)):
        problems.append(f"{what}: live markup")
    return problems


@pytest.mark.parametrize(("case", "expensive"), _params())
def test_a_hostile_capsule_is_refused_or_shown_never_obeyed(
    world: World, case: Case, expensive: bool, tmp_path: Path
) -> None:
    dest = tmp_path / "hostile.tar"
    if case.target == "field":
        tar = _forge_field(world.genuine, dest, case, world.canary, harmless=True)
    elif case.target == "row":
        tar = _forge_row(world.genuine, dest, case, world.canary)
    elif case.target == "image":
        tar = _forge_image(world.genuine, dest, case, world.canary)
    else:
        tar = _forge_member(world.genuine, dest, case, world.canary)
    t = str(tar)
    commands: list[tuple[str, list[str]]] = [
        ("show", ["show", t]),
        ("show --json", ["show", t, "--json"]),
        ("diff", ["diff", str(world.genuine), t]),
        ("diff --markdown", ["diff", str(world.genuine), t, "--markdown", "-"]),
        ("verify", ["verify", t]),
        ("verify-attestation", ["verify-attestation", t, "--key", f"{world.key}.pub"]),
    ]
    problems: list[str] = _read_image(tar) if case.target == "image" else []
    for what, args in commands:
        problems += _check(case, what, *_repro(world, *args))
    # A replay or check runs where the genuine run is not (a store refuses a second, different
    # record under one run id): each in a project of its own.
    replaying = {
        "replay": ["replay", t, "--backend", "local"],
        "check": ["check", "--against", t, "--backend", "local"],
    }
    for what, args in replaying.items() if expensive else ():
        elsewhere = Project.init(tmp_path / what).root
        problems += _check(case, what, *_repro(world, *args, project=elsewhere))
    if FULL and expensive and _docker_ready():
        before = _docker_tags()
        elsewhere = Project.init(tmp_path / "docker").root
        problems += _check(case, "replay docker", *_repro(world, "replay", t, project=elsewhere))
        problems += [f"replay docker: the tag {t} was moved" for t in _moved(before, _docker_tags())]
    assert problems == [], "\n".join(problems)


def test_the_watch_sees_what_it_must_refuse(world: World) -> None:
    """The fuzzer's own eyes: a read under the canary, a write outside, a connection off the host."""
    with world.watch.watching() as seen:
        world.canary.read_text()
        with contextlib.suppress(OSError):
            open("/proc/self/nonexistent-fuzz-write", "w")  # noqa: SIM115 - only the attempt is watched
        with contextlib.suppress(OSError), socket.socket() as s:
            s.settimeout(0.01)
            s.connect(("127.0.0.1", 9))
    assert any("canary" in s for s in seen) and any("write outside" in s for s in seen)
    assert any("network" in s for s in seen)


def test_every_field_of_the_schema_is_walked() -> None:
    schema_fields = {p for p in _schema_paths() if len(p) == 1}
    assert schema_fields <= set(FIELDS) and len(FIELDS) >= len(schema_fields)
    assert ("results", "stderr_tail") in FIELDS and ("resumed_from",) in FIELDS


def test_a_forged_capsule_is_replayed_where_the_genuine_run_is_not(world: World, tmp_path: Path) -> None:
    """The replays the walk makes get past the store: a capsule whose strings carry markup and
    control characters replays locally in a project of its own, its verdict shown escaped."""
    case = Case("field", ("warnings", 0, "message"), "control")
    tar = _forge_field(world.genuine, tmp_path / "h.tar", case, world.canary, harmless=True)
    elsewhere = Project.init(tmp_path / "elsewhere").root
    code, out, err, seen = _repro(world, "replay", str(tar), "--backend", "local", project=elsewhere)
    assert code in (ExitCode.OK, ExitCode.NOT_REPRODUCED), err
    assert seen == [] and "\x1b" not in out + err and "replay recorded as" in err


def test_the_sample_reaches_every_member_and_deep_row() -> None:
    """Whatever the seed, the sample alters every member kind, the first, middle and last row of each
    stream and every member of the image archive at least once; `make fuzz` walks all of them."""
    wanted = {(c.target, str(c.where)) for c in ALL_CASES if c.target != "field"}
    assert len(wanted) == len(MEMBER_KINDS) + len(STREAMS) * len(ROWS) + len(IMAGE_KINDS)
    for seed in (SEED, 1, 2):
        cases = _sample(random.Random(seed), SAMPLE)
        assert {(c.target, str(c.where)) for c in cases if c.target != "field"} == wanted
        assert len(cases) == min(SAMPLE, len(ALL_CASES)) and len(set(cases)) == len(cases)
