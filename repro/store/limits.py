"""What an untrusted capsule may say, and what reading one may cost.

A capsule from elsewhere is input from a stranger: anyone can recompute its SHA256SUMS.
So before a record is used, every path-like field must be a relative, normalised path
that stays inside its root, every id a plain name, every referenced blob digest a
content-address name, every name a plain word and every number that drives a run (seeds, process,
node and thread counts, PYTHONHASHSEED) within the ranges of `repro/ranges.py`; and the YAML and
tar readers stop at fixed bounds instead of expanding whatever they are given. Each rule lives
here once; `capsule.py` (the record) and `verify.py` (the tar) apply them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from repro import ranges
from repro.errors import CapsuleInvalid

RECORD_NAME = "capsule.yaml"

# The Dockerfile templates repro builds from (repro/templates/<name>.Dockerfile).
TEMPLATES = ("cpu", "cuda")


def is_image_id(ref: str) -> bool:
    """Whether ``ref`` is an immutable image id (``sha256:<64 hex>``) rather than a tag."""
    return re.fullmatch(r"sha256:[0-9a-f]{64}", ref) is not None


# A Docker image reference (distribution/reference's grammar): [domain/]path[:tag][@digest].
# A record's image names are checked against it before any message or engine call uses them.
MAX_NAME = 255  # the engine's own bound on a repository name
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH}(?:/{_PATH})*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,128})?",
    re.ASCII,
)


def is_reference(ref: str) -> bool:
    """Whether ``ref`` is a well-formed image reference (``repro-base:bookworm``, ``reg:5000/a/b:1``,
    ``name@sha256:…``) or a full image id, within the engine's length bounds; never a short id."""
    if not isinstance(ref, str) or len(ref) > 512:
        return False
    if is_image_id(ref):
        return True
    if re.fullmatch(r"(?:sha256:)?[0-9a-f]{1,64}", ref):
        return False  # the engine takes it for an id prefix: it could name any local image
    match = _REFERENCE.fullmatch(ref)
    return match is not None and len(match.group("name")) <= MAX_NAME


# Bounds on what a capsule may cost before it is trusted (each with its reason).
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a record with 100k manifest entries is ~11 MB
MAX_SUMS_BYTES = 64 * 1024 * 1024  # one line per member
MAX_SIGNATURE_BYTES = 4096  # SIGNATURE: one small JSON object (~200 bytes)
MAX_ATTESTATION_BYTES = 4 << 20  # an attestation names files and inputs, not their bytes: a few KiB
MAX_LIST_BYTES = 256 * 1024 * 1024  # a file list kept as a blob: 1M entries are ~110 MB
LIST_FIELDS = (
    "code.files",
    "code.untracked",
    "code.listed",
    "results.outputs",
)  # the lists a record may keep as blobs
MAX_YAML_DEPTH = 64  # our records nest 5 levels deep
MAX_MEMBERS = 500_000  # members of a capsule tar (blobs + record + sums)
MAX_EXPANSION = 100  # decompressed bytes per compressed byte (weights ~1.1, logs and code ~5-20)
MAX_PLAIN_BYTES = 1 << 30  # a plain tar: as large as it is on disk, read up to 1 GiB before the ratio
MAX_COMPARED_LOG_BYTES = 16 << 20  # of each side's stdout, compared line by line; the rest is not read
MAX_UNPACKED_BYTES = 32 << 20  # a compressed capsule may expand to 32 MiB before the ratio applies

# The streams of rows a run writes and repro reads back (from its run directory or a capsule): each is
# read no further than its bound, at the one place it is read; past it the rest is not read (a capsule
# may carry an endless stream, or one gigantic line), and a comparison says where it was cut.
MAX_COMPARED_OPS_BYTES = 256 << 20  # an op stream (--ops): the runtime itself stops one at 256 MiB a process
MAX_COMPARED_TRACE_BYTES = 128 << 20  # trace.jsonl: ~80 bytes a parameter a step; 200 params x 8k steps
MAX_COMPARED_DATA_ORDER_BYTES = 64 << 20  # a data-order log: one row a batch, 100k batches of 64 indices
MAX_RESUME_TRACE_BYTES = 64 << 20  # a resume trace: parameter and RNG sums a step, as trace.jsonl, few steps
MAX_METRICS_BYTES = 64 << 20  # metrics.jsonl (logged or harvested): ~70 bytes a value, ~1M values
MAX_PROC_REPORT_BYTES = 64 << 20  # proc.<pid>.jsonl: the runtime stops at 50k events of ~300 bytes
MAX_LINKS_BYTES = 16 << 20  # links*.jsonl: a few facts a process (tracker run URLs, ids)
MAX_RESUME_EVENTS_BYTES = 16 << 20  # resume-events.jsonl: one event a checkpoint a process loads


def stream_head(raw: bytes | None, limit: int) -> tuple[str, bool]:
    """The text of a stream's first ``limit`` bytes up to its last whole line, and whether the
    stream was cut there (a line the cut splits is not read at all, nor anything after it)."""
    if raw is None:
        return "", False
    if len(raw) <= limit:
        return raw.decode("utf-8", "replace"), False
    head = raw[:limit]
    return head[: head.rfind(b"\n") + 1].decode("utf-8", "replace"), True


def cut_note(stream: str, limit: int) -> str:
    """The one line saying that ``stream`` was cut at its bound ``limit``."""
    size = f"{limit / (1 << 20):g} MiB"
    return f"{stream} was cut at {size}: nothing past it was read or compared"


_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^[0-9a-f]{16,128}$")
_NAME = re.compile(r"^[0-9A-Za-z_-]{1,128}$")  # a blob reference usable as one file name
_WORD = re.compile(r"^[A-Za-z0-9?][A-Za-z0-9?._-]{0,63}$")  # a backend, mode, status: one plain word


def is_safe_id(value: str) -> bool:
    """A run id usable as one directory name: no separators, no `..`."""
    return bool(_ID.match(value)) and ".." not in value


MAX_PATH_BYTES = 4096  # PATH_MAX: a longer path cannot be opened, written or restored anywhere
MAX_PATH_PART_BYTES = 255  # NAME_MAX: the longest file or folder name a file system takes
# The output directories a run declared reach its process joined in one environment variable, and the
# kernel takes no variable over 128 KiB (MAX_ARG_STRLEN): a record naming more cannot be run again.
MAX_OUTPUT_ROOTS_BYTES = 64 << 10


def is_safe_relpath(value: str, allow_dot: bool = False) -> bool:
    """A relative, normalised POSIX path that stays inside its root (`a/b`, not `/a`, `a/../b`, `../a`),
    no longer than a file system takes (`MAX_PATH_BYTES`, each part `MAX_PATH_PART_BYTES`)."""
    if not isinstance(value, str) or not value or "\0" in value or "\\" in value:
        return False
    if len(value) > MAX_PATH_BYTES:
        return False
    if value == ".":
        return allow_dot
    # Normalised and inside: no empty part (`/a`, `a//b`, `a//`), no `.` and no `..` (one `/` may end it).
    parts = (value[:-1] if value.endswith("/") else value).split("/")
    if "" in parts or "." in parts or ".." in parts:
        return parts == ["."]  # `./`: what normpath leaves as it is
    if value.isascii() and len(value) <= MAX_PATH_PART_BYTES:  # no part can be longer (a byte a character)
        return True
    return all(len(part.encode("utf-8", "surrogateescape")) <= MAX_PATH_PART_BYTES for part in parts)


def member_name_problem(name: str) -> str | None:
    """Why ``name`` is not a member name in canonical form (what an archive repro reads may hold, the
    one spelling of each path), None when it is: relative, segments joined by one ``/``, none empty,
    ``.`` or ``..``, no backslash or control character. Engines and extractors clean names
    (``x/../manifest.json`` becomes ``manifest.json``), so a name that cleans to another is refused
    rather than cleaned: what repro checked is then what any reader sees."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if name.startswith("/"):
        return "starts with /"
    if "\\" in name or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "holds a backslash or a control character"
    parts = name.split("/")
    if "" in parts:
        return "has an empty segment"
    if "." in parts or ".." in parts:
        return "has a . or .. segment"
    return None


DVC_HASH_NAMES = ("md5", "md5-dos2unix", "etag")  # DVC 3's md5, DVC 2's (files without `hash: md5`)
_DVC_MD5 = re.compile(r"^[0-9a-f]{32}(\.dir)?$")
_DVC_ETAG = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_DVC_REMOTE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")  # a remote name repro passes to DVC


def dvc_source_problem(
    hash_name: object, hash_value: object, remote: object, size: object, nfiles: object
) -> tuple[str, str] | None:
    """The field of a DVC output (hash, remote name, counts, as a ``.dvc`` file, ``dvc.lock`` or a
    record gives them) that is wrong, and what is wrong with it; None when all hold. The one rule
    for both: capture leaves such an output out, a record holding one is refused."""
    if hash_name not in DVC_HASH_NAMES:
        return "hash_name", f"is not a DVC hash: {str(hash_name)[:40]!r}"
    pattern = _DVC_ETAG if hash_name == "etag" else _DVC_MD5
    if not (isinstance(hash_value, str) and pattern.match(hash_value)):
        return "hash_value", f"is not a {hash_name}: {str(hash_value)[:80]!r}"
    if remote is not None and not (isinstance(remote, str) and _DVC_REMOTE.match(remote)):
        return "remote", f"is not a plain DVC remote name: {str(remote)[:80]!r}"
    for name, value in (("size", size), ("nfiles", nfiles)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 62
        ):
            return name, f"is out of range: {str(value)[:40]!r}"
    return None


def is_digest(value: str) -> bool:
    """A content-address name: lowercase hex (xxh3-128 is 32 digits)."""
    return isinstance(value, str) and bool(_DIGEST.match(value))


def _path_fields(record: Any) -> Iterator[tuple[str, tuple[int, ...], str | None, bool]]:
    """(field name, the list indices to put in it, value, whether "." is allowed) of every path-like
    field of a record: the name of a field among thousands is only written out for the one refused."""
    yield "command.cwd", (), record.command.cwd, True
    yield "code.subdir", (), record.code.subdir, False
    yield "deps.lockfile", (), record.deps.lockfile, False
    for i, entry in enumerate(record.command.config_files):
        yield "command.config_files[{}].path", (i,), entry.path, False
    for i, entry in enumerate(record.code.files):
        yield "code.files[{}].path", (i,), entry.path, False
    for i, entry in enumerate(record.code.untracked):
        yield "code.untracked[{}].path", (i,), entry.path, False
    for i, entry in enumerate(record.code.listed):
        yield "code.listed[{}].path", (i,), entry.path, False
    for i, rel in enumerate(record.code.read or ()):
        yield "code.read[{}]", (i,), rel, False
    for i, item in enumerate(record.data.inputs):
        yield "data.inputs[{}].path", (i,), item.path, True
        for j, entry in enumerate(item.files):
            yield "data.inputs[{}].files[{}].path", (i, j), entry.path, False
        for j, source in enumerate(item.dvc):
            yield "data.inputs[{}].dvc[{}].file", (i, j), source.file, False
            yield "data.inputs[{}].dvc[{}].out", (i, j), source.out, True
    for i, root in enumerate(record.results.output_roots):
        yield "results.output_roots[{}]", (i,), root, False
    for i, entry in enumerate(record.results.outputs):
        yield "results.outputs[{}].path", (i,), entry.path, False
    for i, shared in enumerate(record.results.shared_writes):
        yield "results.shared_writes[{}].path", (i,), shared.path, False


def _number_fields(record: Any) -> Iterator[tuple[str, object, ranges.Bound]]:
    """(field name, value, its range) of every number of a record that decides how a run executes."""
    seeds = record.seeds
    yield "seeds.master", seeds.master, ranges.SEED
    yield "seeds.pythonhashseed", seeds.pythonhashseed, ranges.PYTHONHASHSEED
    for lib, value in seeds.derived.items():
        yield f"seeds.derived.{lib}", value, ranges.SEED
    for rank, derived in seeds.per_rank.items():
        for lib, value in derived.items():
            yield f"seeds.per_rank.{rank}.{lib}", value, ranges.SEED
    yield "command.nproc_per_node", record.command.nproc_per_node, ranges.NPROC
    yield "command.nodes", record.command.nodes, ranges.NODES
    yield "env.world_size", record.env.world_size, ranges.WORLD
    if record.determinism.threads is not None:
        yield "determinism.threads", record.determinism.threads, ranges.THREADS
    for i, checkpoint in enumerate(record.results.checkpoints):
        yield f"results.checkpoints[{i}].step", checkpoint.step, ranges.STEP


def _text_number_fields(record: Any) -> Iterator[tuple[str, object]]:
    """(field name, value) of the environment variables of a record that carry a number."""
    for name in ranges.THREAD_VARIABLES:
        if name in record.determinism.env:
            yield f"determinism.env.{name}", record.determinism.env[name]
    for where, env in (("determinism.env", record.determinism.env), ("env.variables", record.env.variables)):
        if "PYTHONHASHSEED" in env:
            yield f"{where}.PYTHONHASHSEED", env["PYTHONHASHSEED"]


def _process_texts(record: Any) -> Iterator[tuple[str, object]]:
    """(field name, text) of what reaches a process's command line or environment, where no NUL can:
    the system refuses it (``embedded null byte``), so a record holding one is refused first."""
    for name in ("argv", "launch", "injected"):
        for i, arg in enumerate(getattr(record.command, name) or ()):
            yield f"command.{name}[{i}]", arg
    for where, env in (("determinism.env", record.determinism.env), ("env.variables", record.env.variables)):
        for key, value in (env or {}).items():
            yield f"{where} name", key
            yield f"{where}.{str(key)[:80]}", value


def _word_fields(record: Any) -> Iterator[tuple[str, str | None]]:
    """(field name, value) of the names a record carries that repro prints or decides on."""
    yield "kind", record.kind
    yield "backend.name", record.backend.name
    yield "backend.requested", record.backend.requested
    yield "determinism.mode", record.determinism.mode
    yield "determinism.isa", record.determinism.isa
    yield "deps.variant", record.deps.variant
    yield "results.status", record.results.status


def check_record(record: Any) -> None:
    """Refuse a record whose ids, paths or blob names could reach outside their roots, whose names
    are not plain words, or whose numbers are out of the ranges of `repro/ranges.py`.

    Raises:
        CapsuleInvalid: the first offending field, by name (exit 6).
    """
    hint = "the capsule was made by hand or tampered with; do not replay it"
    for name, value in (("id", record.id), ("parent", record.parent), ("resumed_from", record.resumed_from)):
        if value is not None and not (isinstance(value, str) and is_safe_id(value)):
            raise CapsuleInvalid(
                f"capsule field {name} is not a plain run id: {str(value)[:80]!r}", RECORD_NAME, hint
            )
    for name, at, value, allow_dot in _path_fields(record):
        if value is None and name in ("code.subdir", "deps.lockfile"):
            continue
        if not is_safe_relpath(value, allow_dot):  # type: ignore[arg-type]
            raise CapsuleInvalid(
                f"capsule field {name.format(*at)} is not a relative path inside the project: "
                f"{str(value)[:80]!r}",
                RECORD_NAME,
                hint,
            )
    roots = record.results.output_roots
    if sum(len(root) + 1 for root in roots) > MAX_OUTPUT_ROOTS_BYTES:
        raise CapsuleInvalid(
            f"capsule field results.output_roots names {len(roots)} output directories, over "
            f"{MAX_OUTPUT_ROOTS_BYTES >> 10} KiB together; a run declares a few",
            RECORD_NAME,
            hint,
        )
    for name, value, bound in _number_fields(record):
        why = bound.problem(value)
        if why:
            raise CapsuleInvalid(f"capsule field {name} is out of range: it {why}", RECORD_NAME, hint)
    for name, value in _text_number_fields(record):
        why = (
            ranges.pythonhashseed_problem(value)
            if name.endswith("PYTHONHASHSEED")
            else ranges.number_text_problem(ranges.THREADS, value)
        )
        if why:
            raise CapsuleInvalid(f"capsule field {name} is out of range: it {why}", RECORD_NAME, hint)
    for name, text in _process_texts(record):
        if isinstance(text, str) and "\0" in text:
            raise CapsuleInvalid(f"capsule field {name} holds a NUL character", RECORD_NAME, hint)
    for name, word in _word_fields(record):
        if word is not None and not (isinstance(word, str) and _WORD.match(word)):
            raise CapsuleInvalid(
                f"capsule field {name} is not a plain name: {str(word)[:80]!r}", RECORD_NAME, hint
            )
    gpus = record.backend.gpus
    why = None if gpus is None else ranges.gpus_problem(gpus)
    if why:
        raise CapsuleInvalid(f"capsule field backend.gpus {why}", RECORD_NAME, hint)
    for name in record.lists:
        if name not in LIST_FIELDS:
            raise CapsuleInvalid(
                f"capsule field lists names an unknown list: {name[:80]!r}", RECORD_NAME, hint
            )
    for digest in record.blobs():
        if not (isinstance(digest, str) and _NAME.match(digest)):
            raise CapsuleInvalid(
                f"capsule names a blob {str(digest)[:80]!r} that is not a content digest", RECORD_NAME
            )
    for i, item in enumerate(record.data.inputs):
        for j, source in enumerate(item.dvc):
            bad = dvc_source_problem(
                source.hash_name, source.hash_value, source.remote, source.size, source.nfiles
            )
            if bad:
                field_name, why = bad
                raise CapsuleInvalid(
                    f"capsule field data.inputs[{i}].dvc[{j}].{field_name} {why}", RECORD_NAME, hint
                )
    check_image(record.deps.image)


def check_image(image: Any) -> None:
    """Refuse image names a record carries that are not what they claim: ids ``sha256:<64 hex>``,
    tags and base names Docker references of bounded length, the template a known one. Checked
    before any of them reaches a message or the engine.

    Raises:
        CapsuleInvalid: the first offending field, by name (exit 6).
    """
    if image is None:
        return
    hint = "the capsule was made by hand or tampered with; do not replay it"
    rules = (
        ("id", image.id, is_image_id, "an image id"),
        ("base_id", image.base_id, is_image_id, "an image id"),
        ("tag", image.tag, is_reference, "an image reference"),
        ("base", image.base, is_reference, "an image reference"),
        ("template", image.template, TEMPLATES.__contains__, f"one of {', '.join(TEMPLATES)}"),
    )
    for name, value, valid, what in rules:
        if value is None or value == "":
            continue
        if not (isinstance(value, str) and valid(value)):
            shown = repr(value[:80] if isinstance(value, str) else value)
            raise CapsuleInvalid(f"capsule field deps.image.{name} is not {what}: {shown}", RECORD_NAME, hint)


# --------------------------------------------------------------------------- YAML


# libyaml's C parser and emitter where PyYAML was built with it (the wheels are): a large record
# (thousands of outputs) loads and dumps several times faster; the pure-Python classes otherwise.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_Dumper):  # type: ignore[valid-type,misc]
    """Writes every value in place, so a record never needs aliases to be read back."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _check_shape(raw: bytes) -> None:
    """Refuse aliases (a billion-laughs record expands through them) and nesting past the bound,
    from the parser's events, before anything is built.

    Raises:
        yaml.YAMLError: an alias, too deep, or not YAML.
    """
    depth = 0
    for event in yaml.parse(raw, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.YAMLError(f"aliases are not allowed in a capsule record{_at(event)}")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise yaml.YAMLError(f"nesting deeper than {MAX_YAML_DEPTH} levels{_at(event)}")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _at(event: yaml.Event) -> str:
    mark = event.start_mark
    return f" (line {mark.line + 1})" if mark is not None else ""


def load_yaml(raw: bytes) -> Any:
    """Parse a record's YAML within the bounds.

    Raises:
        CapsuleInvalid: too large, aliases, too deep, or not YAML.
    """
    if len(raw) > MAX_RECORD_BYTES:
        raise CapsuleInvalid(f"{RECORD_NAME} is larger than {MAX_RECORD_BYTES >> 20} MiB", RECORD_NAME)
    try:
        _check_shape(raw)
        return yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader (C or Python), shape checked first
    except yaml.YAMLError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CapsuleInvalid(f"{RECORD_NAME} is not a valid record: {first}", RECORD_NAME) from e
    except RecursionError as e:
        raise CapsuleInvalid(f"{RECORD_NAME} nests too deeply", RECORD_NAME) from e


def dump_yaml(data: Any) -> bytes:
    return yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True).encode()


# --------------------------------------------------------------------------- tar


class TarBudget:
    """Counts members and bytes while a capsule tar is read; refuses at the bounds.

    ``compressed`` is the file's size on disk; a plain tar cannot expand beyond it, a compressed
    one (``packed``) may expand ``MAX_EXPANSION`` times, from a floor of ``MAX_UNPACKED_BYTES``:
    compression hides a size, so it is bounded by what the file weighs.
    """

    def __init__(self, compressed: int, packed: bool = False) -> None:
        floor = MAX_UNPACKED_BYTES if packed else MAX_PLAIN_BYTES
        self.limit = max(floor, compressed * MAX_EXPANSION)
        self.members = 0
        self.bytes = 0

    def take(self, name: str, size: int) -> None:
        """Account for one member before it is read.

        Raises:
            CapsuleInvalid: too many members, or more bytes than the bound.
        """
        self.members += 1
        self.bytes += max(0, size)
        if self.members > MAX_MEMBERS:
            raise CapsuleInvalid(f"the capsule has more than {MAX_MEMBERS} members", member=name)
        if self.bytes > self.limit:
            raise CapsuleInvalid(
                f"the capsule expands to more than {self.limit >> 20} MiB (at member {name})",
                member=name,
                hint="a compressed capsule may expand at most "
                f"{MAX_EXPANSION} times its size; export it again, or pass the uncompressed .tar",
            )
        if name == RECORD_NAME and size > MAX_RECORD_BYTES:
            raise CapsuleInvalid(f"{RECORD_NAME} is larger than {MAX_RECORD_BYTES >> 20} MiB", member=name)
        if name == "SHA256SUMS" and size > MAX_SUMS_BYTES:
            raise CapsuleInvalid(f"SHA256SUMS is larger than {MAX_SUMS_BYTES >> 20} MiB", member=name)
        if name == "SIGNATURE" and size > MAX_SIGNATURE_BYTES:
            raise CapsuleInvalid(f"SIGNATURE is larger than {MAX_SIGNATURE_BYTES} bytes", member=name)
        if name in ("ATTESTATION.intoto.jsonl", "MODEL_SIGNATURE.sig") and size > MAX_ATTESTATION_BYTES:
            raise CapsuleInvalid(f"{name} is larger than {MAX_ATTESTATION_BYTES >> 20} MiB", member=name)


# `repro export --with-data` and a replay placing carried data: the most bytes of data, unless raised.
MAX_DATA_BYTES = 2 << 30
_SIZE = re.compile(r"^\s*(\d+)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)\s*$", re.IGNORECASE)
_UNIT = {"": 0, "b": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def parse_size(text: str) -> int | None:
    """Bytes from ``2147483648``, ``500MiB``, ``2GiB``, ``2G`` (powers of 1024); None when unreadable."""
    match = _SIZE.match(text)
    if match is None:
        return None
    return int(match.group(1)) << _UNIT[match.group(2)[:1].lower()]
