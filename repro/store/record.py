"""The record of one run (what ``capsule.yaml`` holds): its dataclasses, built back from plain data
with every field's type checked.

This module is the contract between every other part of repro. It imports no git, docker or torch.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from repro.errors import CapsuleInvalid
from repro.runtime.contract import DEFAULT_MODE
from repro.store import limits as rules
from repro.store.capsule import FORMAT, READABLE_FORMATS, RECORD_NAME

RunStatus = Literal["succeeded", "failed", "interrupted", "running"]  # a run's, in its record
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
CodeKind = Literal["git", "snapshot"]  # how the code was captured
SeriesSource = Literal["log_metric", "tensorboard", "files", "stdout"]  # where a metric series was read
RecordKind = Literal["run", "replay", "check"]  # what made the record (a resumed run: its original's kind)
LockVariant = Literal["cpu", "cuda", "local"]  # which lock of the project (see facts/lockvariants.py)
LOCK_VARIANTS: tuple[LockVariant, ...] = get_args(LockVariant)

# What a record's warnings are about: a stable code for programs beside the sentence for people
# (README, "Machine-readable output"). Records made before warnings had codes read as "unclassified".
WARNING_CODES: dict[str, str] = {
    "torchrun_options_ignored": "torchrun options left to repro's own single-node launcher",
    "code_file_too_large": "a code file over the size limit: hashed, not stored",
    "secret_files_excluded": "secret-looking files left out of the code snapshot",
    "secret_changes_excluded": "changes to secret-looking tracked files left out of the patch",
    "no_commits": "a git repository without commits, recorded as uncommitted files",
    "submodules_missing": "git submodules not checked out, so not in the capsule",
    "lock_failed": "the lock could not be compiled: the run is not locked",
    "not_locked": "no declared dependencies: the environment is recorded, not locked",
    "lock_mismatch": "the lock does not describe what ran",
    "outputs_outside_root": "the run wrote files outside the project, not recorded",
    "determinism_changed": "the script changed determinism switches after repro set them",
    "kernel_packages": "kernel packages outside PyTorch's deterministic switch were imported",
    "nondeterministic_ops": "nondeterministic ops ran (allowed)",
    "runtime_settings_failed": "the repro runtime could not apply its settings somewhere",
    "runtime_boot_failed": "the repro runtime failed to start in a process",
    "runtime_not_loaded": "the repro runtime never loaded: seeds and determinism not applied",
    "rank_failed": "one rank (or node) failed first; its stderr is kept",
    "undeclared_inputs": "the run read files that are not declared data",
    "inputs_not_kept": "files the run read over store.max_input_bytes: hashed, not kept",
    "secret_inputs": "files the run read that look like credentials: not recorded as inputs",
    "output_too_large": "an output over the size limit: hashed, not stored",
    "output_links": "outputs that are symbolic links, recorded as links, never followed",
    "runtime_links": "symbolic links left among repro's own runtime files, not read",
    "shared_writes": "output files written by more than one process at once",
    "framework_override": "a framework (Lightning, Hugging Face) changed a seed or switch repro set",
    "base_image_changed": "the run was built on another base image than its original",
    "resume_not_exact": "a checkpoint was loaded without its recorded RNG states: the resume is not exact",
    "resume_started_over": "a resumed run loaded no checkpoint: it started over",
    "resume_lightning_loops": "a resumed Lightning fit: its loop counters in its checkpoint files may differ",
    "repro_died": "the repro process died with the run; sealed later as interrupted",
    "in_process": "captured in-process (repro.capture): weaker than repro run, not replayable",
    "cuda_in_cpu_lock": "a CPU run's lock holds a CUDA torch: a CUDA-sized image",
    "compile_autotune_off": "torch.compile asked for autotuning by timing; a pinned mode turned it off",
    "no_compiler": "torch.compile found no C++ compiler in the run's environment",
    "replay_condition": "how a replay's conditions differ from the original's (network, backend, data …)",
    "unclassified": "a warning recorded before warnings had codes",
}


@dataclass(frozen=True)
class RunWarning:
    """One warning in a record: ``code`` (a key of `WARNING_CODES`) and the sentence ``message``."""

    code: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class FileEntry:
    """One file: its path (relative, POSIX), size, xxh3-128 and whether its bytes are kept.

    A symbolic link a run made among its outputs is recorded as a link, never read through:
    ``link`` holds its target as written, ``hash`` a digest of it (`repro.collect.produced.link_entry`),
    ``size`` is 0 and no bytes are kept. ``link`` is left out of the record for every other
    file (records made before links were recorded read the same).
    """

    path: str
    size: int
    hash: str
    stored: bool = False
    link: str | None = None


@dataclass
class CommandInfo:
    """What was run: the command line, where, its parameters and config files, how many processes."""

    argv: list[str] = field(default_factory=list)  # the command as the user gave it (`torchrun …` too)
    # The command repro launches, where it differs from argv: `torchrun --nproc-per-node 2 train.py`
    # runs as `python train.py` under repro's own launcher (`nproc_per_node`, `torchrun`). Empty: argv.
    launch: list[str] = field(default_factory=list)
    # Arguments repro appends to run it (a Hydra app's pinned `hydra.run.dir=…`): never the user's
    # hyper-parameters, never a cause in a diff.
    injected: list[str] = field(default_factory=list)
    cwd: str = "."
    params: dict[str, Any] = field(default_factory=dict)
    config_files: list[FileEntry] = field(default_factory=list)
    nproc_per_node: int = 1
    torchrun: bool = False  # launched through torchrun (always when nproc_per_node > 1)
    nodes: int = 1  # the slurm backend: torchrun on each of this many nodes

    def executed(self) -> list[str]:
        """The command line that runs: the user's (as launched), then repro's own arguments."""
        return [*(self.launch or self.argv), *self.injected]


@dataclass
class CodeInfo:
    """The code the run ran: its git state or a snapshot of its files, by hash."""

    kind: CodeKind = "snapshot"
    commit: str | None = None
    branch: str | None = None
    remote: str | None = None
    subdir: str | None = None  # the project's place inside the git work tree, when not its top
    dirty: bool = False
    patch: str | None = None  # blob of `git diff HEAD` (binary-safe)
    untracked: list[FileEntry] = field(default_factory=list)
    files: list[FileEntry] = field(default_factory=list)  # snapshot (outside git)
    excluded: list[str] = field(default_factory=list)  # left out as secret-looking
    # untracked files (every file of a snapshot) that an earlier run wrote, byte for byte: path → run id.
    # Kept in the snapshot (the run started with them), but they are outputs, not code.
    earlier_outputs: dict[str, str] = field(default_factory=dict)
    cells: str | None = None  # blob: notebook cells executed before an in-process capture
    # Untracked files that are not source (`train.out`, a `data/train.bin` a prepare step wrote): listed
    # with their hash, never stored as code, never dirt. The ones the run read are its inputs
    # (`DataInput.read`).
    listed: list[FileEntry] = field(default_factory=list)
    # Files of the snapshot the run imported or opened, as its processes reported them (None: not
    # known, the runtime did not watch). `repro resume` judges code by these and by source files.
    read: list[str] | None = None


@dataclass
class DvcSource:
    """Where DVC keeps (part of) a declared input: one DVC output as its ``.dvc`` file or
    ``dvc.lock`` names it, with DVC's own hash, so a replay can fetch exactly that version."""

    file: str  # the .dvc file or dvc.lock that tracks it, relative to the project root
    out: str  # the tracked path, relative to the project root (the input, or a folder holding it)
    hash_name: str  # md5 (DVC 3), md5-dos2unix (DVC 2 files), etag
    hash_value: str  # "<md5>", "<md5>.dir" for a directory, or an etag
    remote: str | None = None  # the remote it was pushed to: the out's own, else the default
    size: int | None = None
    nfiles: int | None = None


@dataclass
class DataInput:
    """One declared input. Up to ``MANIFEST_INLINE`` files are listed in the record; a larger
    tree's manifest is a blob (``manifest``) and the record keeps its digest and ``count``."""

    path: str
    digest: str
    size: int = 0
    files: list[FileEntry] = field(default_factory=list)
    count: int = 0  # files in the input (inline or in the manifest blob)
    manifest: str | None = None  # blob of the manifest, for trees over MANIFEST_INLINE files
    dvc: list[DvcSource] = field(default_factory=list)  # DVC outputs that hold it (repro/facts/dvc.py)
    # Recorded because the run read it (neither code nor declared data): kept in the store up to
    # `store.max_input_bytes`, restored on replay like declared data.
    read: bool = False

    def entries(self, read_blob: Callable[[str], bytes | None]) -> list[FileEntry]:
        """The input's files, inline or from its manifest blob.

        Raises:
            CapsuleInvalid: the manifest blob is missing or malformed.
        """
        if self.manifest is None:
            return self.files
        raw = read_blob(self.manifest)
        if raw is None:
            raise CapsuleInvalid(f"the manifest of data input {self.path} is missing", member=self.manifest)
        return decode_manifest(raw)


MANIFEST_INLINE = 1000  # files listed in the record itself; beyond that a manifest blob


def encode_manifest(files: list[FileEntry]) -> bytes:
    """Files as ``path\\0size\\0hash\\0`` in path order: the very bytes the tree digest hashes."""
    ordered = sorted(files, key=lambda e: e.path)
    return "".join(f"{f.path}\0{f.size}\0{f.hash}\0" for f in ordered).encode("utf-8", "surrogateescape")


def decode_manifest(raw: bytes) -> list[FileEntry]:
    """The files of a manifest blob.

    Raises:
        CapsuleInvalid: not a manifest, or a path that leaves its root.
    """
    parts = raw.decode("utf-8", "surrogateescape").split("\0")
    if parts[-1] != "" or (len(parts) - 1) % 3:
        raise CapsuleInvalid("a data manifest blob is malformed")
    files: list[FileEntry] = []
    for i in range(0, len(parts) - 1, 3):
        path, size, digest = parts[i : i + 3]
        if rules.member_name_problem(path) is not None or not size.isdigit():
            raise CapsuleInvalid(f"a data manifest names an unsafe or malformed entry: {path[:200]!r}")
        files.append(FileEntry(path, int(size), digest))
    refuse_twice([f.path for f in files], "a data manifest")
    return files


def refuse_twice(paths: list[str], what: str) -> None:
    """Raises: CapsuleInvalid: a path listed twice (each file has one entry)."""
    seen: set[str] = set()
    for path in paths:
        if path in seen:
            raise CapsuleInvalid(f"{what} lists {path[:200]!r} twice")
        seen.add(path)


@dataclass
class ListRef:
    """A file list kept as a blob: its digest and how many entries it holds."""

    blob: str
    count: int = 0


@dataclass
class DataInfo:
    """The data the run declared (each input's manifest), and what it read undeclared."""

    inputs: list[DataInput] = field(default_factory=list)
    undeclared: list[str] = field(default_factory=list)


@dataclass
class ImageInfo:
    """The environment image: its id, tag, base image and Dockerfile, and how each package went in."""

    id: str | None = None
    tag: str | None = None
    base: str | None = None
    base_id: str | None = None
    dockerfile: str | None = None  # blob
    template: str | None = None
    reused: bool = False
    build_seconds: float | None = None
    loaded: bool = False  # loaded from the image archive a capsule carries, not built
    # {normal name: "wheel" | "source"}: how each locked package went into the image (a wheel from an
    # index, or built from its source distribution in the sandbox); {}: not recorded
    installed_from: dict[str, str] = field(default_factory=dict)


@dataclass
class DepsInfo:
    """The dependencies: the lock, what it pinned and what actually ran, the image built from it."""

    lockfile: str | None = None  # path relative to the project root
    lock_blob: str | None = None
    lock_inputs: str | None = None  # hash of what the lock was compiled from
    requirements: list[str] = field(default_factory=list)  # name==version from the lockfile
    variant: LockVariant | None = None
    cuda: str | None = None  # a cuda lock: the CUDA version its torch wheels are built for ("12.8")
    project_lock: str | None = None  # the project's own lockfile the lock was read from (uv.lock, …)
    groups: list[str] = field(default_factory=list)  # … for these groups and extras besides the main ones
    pylock_blob: str | None = None  # the lock as a PEP 751 pylock.toml (exported as the pylock.toml member)
    freeze: list[str] = field(default_factory=list)  # what actually ran
    mismatches: list[str] = field(default_factory=list)  # locked packages that ran at another version
    site_fingerprint: str | None = None
    image: ImageInfo | None = None


@dataclass
class SeedInfo:
    """The master seed and every seed derived from it."""

    master: int = 0
    drawn: bool = False  # True when no --seed was given and one was drawn
    pythonhashseed: int = 0
    derived: dict[str, int] = field(default_factory=dict)
    per_rank: dict[str, dict[str, int]] = field(default_factory=dict)
    # RNGs the script seeded itself: {"api": "torch.manual_seed", "value": 1337, "where": "train.py:12"}
    script_seeds: list[dict[str, Any]] = field(default_factory=list)
    # A training framework's own seeding, as it reported it (Lightning's seed_everything, HF's seed).
    framework: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class DeterminismInfo:
    """The determinism mode and every switch it set."""

    mode: str = DEFAULT_MODE  # a Mode when repro wrote it; a capsule from elsewhere may say anything
    threads: int | None = None
    isa: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # True: the runtime reported in from the main process; False: it never loaded, so no seed
    # or knob was applied; None: a record made before this was known.
    applied: bool | None = None
    allow_nondeterministic_ops: bool = False
    # {"op", "count", "rank", "where", "first_step"} for each nondeterministic op alert
    nondeterministic_ops: list[dict[str, Any]] = field(default_factory=list)
    effective: dict[str, Any] = field(default_factory=dict)  # knobs read back at the end of the run
    changed_by_script: dict[str, Any] = field(default_factory=dict)  # {knob: {"set": …, "found": …}}
    # SOURCE_DATE_EPOCH every process of the run gets (and its replays): the clock that tools which
    # honour it (Matplotlib's PDF/PS/SVG) write into files instead of the time they are written.
    source_date_epoch: int | None = None


@dataclass
class EnvInfo:
    """The machine and software the run ran on, and its environment variables (secrets redacted)."""

    python: str | None = None
    implementation: str | None = None
    os: str | None = None
    machine: str | None = None
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    cpu_flags: list[str] = field(default_factory=list)
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    compiler: str | None = None  # the C++ compiler torch.compile called ("g++ 12.2.0"); None: no compile
    driver: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    world_size: int = 1
    rank_devices: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)


@dataclass
class BackendInfo:
    """Where the run executed: the backend chosen and asked for, network, GPUs, its details."""

    name: str = "local"
    requested: str = "auto"
    network: bool = False
    gpus: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckpointInfo:
    """A checkpoint the run saved: its sha256 and, per rank, the blob of its RNG states at that save."""

    path: str  # as saved, relative to the project root when inside it
    hash: str  # sha256 of the checkpoint file (or stat-<size>-<mtime_ns> when the run died hashing it)
    step: int = 0  # optimizer steps taken before the save
    states: dict[str, str] = field(default_factory=dict)  # rank -> blob of its RNG states
    blob: str | None = None  # the file's own bytes (traced runs, within store.max_checkpoint_bytes)
    size: int | None = None


@dataclass
class SharedWrite:
    """An output more than one process of the run wrote (two torchrun ranks saving one ``model.pt``):
    which bytes it holds depends on which process wrote last, and a torn write may not even load."""

    path: str
    ranks: list[int] = field(default_factory=list)  # torchrun rank of each writer (-1: none), sorted
    pids: list[int] = field(default_factory=list)  # in the same order

    def writers(self) -> str:
        """``ranks 0 and 1``, ``2 processes of rank 0 (pids 41, 42)``, or ``processes 41 and 42``."""
        ranks = sorted(set(self.ranks))
        if not ranks or ranks[0] < 0:  # not all of them torchrun ranks
            return "processes " + _and(self.pids)
        head = f"ranks {_and(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}"
        if len(self.pids) == len(ranks):
            return head
        return f"{len(self.pids)} processes of {head} (pids {', '.join(map(str, self.pids))})"


def _and(items: list[int]) -> str:
    words = [str(i) for i in items]
    if not words:  # a record that names no writer (a capsule can say anything)
        return "unknown"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


@dataclass
class SeriesInfo:
    """A metric series of the run: its name, where it came from, how many points, the last one."""

    name: str
    source: SeriesSource = "log_metric"  # (repro.collect.harvest)
    origin: str | None = None  # the file or event directory it was read from (project-relative), or stdout
    points: int = 0
    last_step: float | None = None
    last: float | None = None


@dataclass
class ResultInfo:
    """What the run produced: its status, logs, metrics, outputs and checkpoints."""

    status: RunStatus = "running"
    exit_code: int | None = None
    failure: dict[str, Any] | None = None  # why the command failed, when repro knows: code, message, hint
    started: str | None = None
    finished: str | None = None
    duration_s: float | None = None
    logs: dict[str, str] = field(default_factory=dict)  # name -> blob
    stderr_tail: list[str] = field(default_factory=list)
    metrics: str | None = None  # blob of metrics.jsonl
    harvested: str | None = None  # blob of the series harvested with no code change (rows as metrics.jsonl)
    series: list[SeriesInfo] = field(default_factory=list)  # every series, logged and harvested
    final_metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # from repro.log_params
    output_roots: list[str] = field(default_factory=list)
    output_excludes: list[str] = field(default_factory=list)  # outputs.exclude globs in force
    outputs: list[FileEntry] = field(default_factory=list)
    outputs_outside_root: list[str] = field(default_factory=list)  # written outside the project
    checkpoints: list[CheckpointInfo] = field(default_factory=list)  # exact resume (repro resume)
    # A resumed run that loaded no checkpoint: it started over, whatever `repro resume` ran it as.
    resume_started_over: bool = False
    shared_writes: list[SharedWrite] = field(default_factory=list)  # outputs several processes wrote
    # Experiment-tracker runs the command started: {"tool": "mlflow", "tracking_uri", "runs": [...]}, …
    trackers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Record:
    """The whole record of one run: what ``capsule.yaml`` holds."""

    id: str
    created: str
    format: str = FORMAT
    kind: RecordKind = "run"
    parent: str | None = None  # the run this one replays
    resumed_from: str | None = None  # the interrupted run this one continues (repro resume)
    project: str | None = None
    repro_version: str | None = None
    command: CommandInfo = field(default_factory=CommandInfo)
    code: CodeInfo = field(default_factory=CodeInfo)
    data: DataInfo = field(default_factory=DataInfo)
    deps: DepsInfo = field(default_factory=DepsInfo)
    seeds: SeedInfo = field(default_factory=SeedInfo)
    determinism: DeterminismInfo = field(default_factory=DeterminismInfo)
    env: EnvInfo = field(default_factory=EnvInfo)
    backend: BackendInfo = field(default_factory=BackendInfo)
    results: ResultInfo = field(default_factory=ResultInfo)
    warnings: list[RunWarning] = field(default_factory=list)
    redactions: list[str] = field(default_factory=list)
    verification: dict[str, Any] | None = None  # a replay's verdict against its parent
    captured_in_process: bool = False  # recorded by repro.capture() inside the process, not by repro run
    # File lists kept as blobs (`SPILLED_LISTS` name → blob); empty in records that list every file inline.
    lists: dict[str, ListRef] = field(default_factory=dict)

    def warn(self, code: str, message: str) -> None:
        """Add a warning (``code`` from `WARNING_CODES`), once."""
        warning = RunWarning(code, message)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def listed(self, name: str) -> int:
        """How many entries the file list ``name`` (``code.files``, …) holds, read or only named."""
        section, attr = name.split(".")
        entries: list[FileEntry] = getattr(getattr(self, section), attr)
        ref = self.lists.get(name)
        return ref.count if ref is not None and not entries else len(entries)

    def blobs(self) -> set[str]:
        """Every blob digest the record refers to."""
        found: set[str] = set()
        for entry in _walk_file_entries(self):
            if entry.stored:
                found.add(entry.hash)
        for digest in (
            *(item.manifest for item in self.data.inputs),
            *(ref.blob for ref in self.lists.values()),
            self.code.patch,
            self.code.cells,
            self.deps.lock_blob,
            self.deps.pylock_blob,
            self.deps.image.dockerfile if self.deps.image else None,
            self.results.metrics,
            self.results.harvested,
            *self.results.logs.values(),
            *(c.blob for c in self.results.checkpoints),
            *(b for c in self.results.checkpoints for b in c.states.values()),
        ):
            if digest:
                found.add(digest)
        return found

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        code, results = data["code"], data["results"]
        lists = [code["files"], code["untracked"], code["listed"], data["command"]["config_files"]]
        lists.append(results["outputs"])
        for entries in [*lists, *(item["files"] for item in data["data"]["inputs"])]:
            for entry in entries:
                if entry.get("link") is None:
                    entry.pop("link", None)
        # `format` first so a reader sees what it is holding.
        return {"format": data.pop("format"), **data}

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        """Build a Record from parsed YAML/JSON.

        Raises:
            CapsuleInvalid: not a mapping, an unknown format version, or a malformed field.
        """
        if not isinstance(data, dict):
            raise CapsuleInvalid(f"{RECORD_NAME} is not a mapping", member=RECORD_NAME)
        fmt = data.get("format")
        if fmt not in READABLE_FORMATS:
            raise CapsuleInvalid(
                f"unknown capsule format {fmt!r}; this repro reads {', '.join(READABLE_FORMATS)}",
                member=RECORD_NAME,
                hint="upgrade repro to read newer capsules",
            )
        warnings = data.get("warnings")
        if isinstance(warnings, list):  # before warnings had codes: plain sentences
            data = {**data, "warnings": [_coded(w) for w in warnings]}
        try:
            record: Record = _build(cls, data)
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
            raise CapsuleInvalid(f"{RECORD_NAME} is malformed: {e}", member=RECORD_NAME) from e
        rules.check_record(record)
        return record


def _coded(warning: Any) -> Any:
    return {"code": "unclassified", "message": warning} if isinstance(warning, str) else warning


def _walk_file_entries(record: Record) -> Iterator[FileEntry]:
    yield from record.command.config_files
    yield from record.code.untracked
    yield from record.code.files
    for item in record.data.inputs:
        yield from item.files
    yield from record.results.outputs


_HINTS_CACHE: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS_CACHE:
        _HINTS_CACHE[cls] = typing.get_type_hints(cls)
    return _HINTS_CACHE[cls]


def _build(tp: Any, value: Any) -> Any:
    """Convert plain data into the annotated type (dataclasses, lists, dicts, optionals)."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise TypeError(f"{tp.__name__} expects a mapping, got {type(value).__name__}")
        hints = _hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: _build(hints[k], v) for k, v in value.items() if k in known}
        return tp(**kwargs)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return [_build(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        if not isinstance(value, dict):
            raise TypeError(f"expected a mapping, got {type(value).__name__}")
        return {str(k): _build(item, v) for k, v in value.items()}
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args and origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return _build(args[0], value)
    if origin is Literal:  # a closed set of strings in the model: any string reads, as a str field
        tp = type(get_args(tp)[0])  # (a newer repro's value is shown as written; nothing decides on it)
    if tp in _SCALARS and not isinstance(value, _SCALARS[tp]) or (tp is int and isinstance(value, bool)):
        raise TypeError(f"expected {tp.__name__}, got {type(value).__name__} {str(value)[:40]!r}")
    return value


_SCALARS: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}
