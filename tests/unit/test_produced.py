"""What a run produced is read without following a link it made (repro/collect/produced.py, its readers)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from repro.backends import scratch
from repro.collect import attribution, checkpoints, produced
from repro.collect.reports import read_reports
from repro.compare.verdict import Side, compare_runs
from repro.store.record import FileEntry, Record, SharedWrite
from repro.store.recordio import dump_record, load_record
from repro.store.runs import Store

SECRET = b'{"e": "error", "where": "SECRET-7f3a", "name": "SECRET-7f3a", "value": 1}\n'


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A root-only file outside every root the tests read."""
    path = tmp_path / "elsewhere" / "id_rsa"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def _write(root: Path, rel: str, data: bytes = b"x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("reported", "kept"),
    [
        ("model.pt", "model.pt"),
        ("outputs/../model.pt", "model.pt"),
        ("./a//b", "a/b"),
        ("../secret", None),
        ("outputs/x/../../../secret", None),
        ("/etc/shadow", None),
        ("..", None),
        (".", None),
        ("", None),
        ("a\0b", None),
    ],
)
def test_a_reported_path_stays_inside_its_root(reported: str, kept: str | None) -> None:
    assert produced.inside(reported) == kept


def test_a_link_anywhere_on_the_way_is_never_read_through(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "root"
    _write(root, "real.txt", b"mine")
    (root / "leak").symlink_to(secret)
    (root / "dir").symlink_to(secret.parent)
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    assert produced.read_bytes(root, "real.txt") == b"mine"
    for rel in ("leak", "dir/id_rsa", "dangling", "../elsewhere/id_rsa", str(secret)):
        assert produced.read_bytes(root, rel) is None, rel
        assert not produced.is_file(root, rel)
    with pytest.raises(produced.NotRegular) as raised:
        with produced.open_file(root, "leak"):
            pass
    assert raised.value.found.kind == "link" and raised.value.found.target == str(secret)
    assert produced.read_json(root, "leak") == {} and produced.json_lines(root, "leak", 1 << 20) == []


def test_directories_kept_open_for_a_batch_read_what_one_path_at_a_time_reads(
    tmp_path: Path, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    rels = [f"out/{d}/f{i}.txt" for d in ("a", "b", "c/d") for i in range(3)] + ["top.txt"]
    for i, rel in enumerate(rels):
        _write(root, rel, f"file {i}".encode())
    (root / "out" / "linked").symlink_to(secret.parent)
    (root / "out" / "a" / "leak").symlink_to(secret)
    asked = [*rels, "out/linked/id_rsa", "out/a/leak", "out/missing/x", "../elsewhere/id_rsa", "out/a"]
    alone = [produced.entry(root, rel, None, 1 << 20) for rel in asked]
    assert alone[len(rels)] is None and alone[len(rels) + 1] == produced.link_entry("out/a/leak", str(secret))
    opened: list[str] = []
    real_open = os.open

    def counted(path: object, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counted)
    with produced.Dirs() as dirs:
        assert [produced.entry(root, rel, None, 1 << 20, dirs=dirs) for rel in asked] == alone
    assert opened.count("out") == 1 and opened.count("b") == 1  # each directory opened once
    assert dirs.fds == {}  # and closed with the block
    monkeypatch.setattr(
        produced.Dirs, "MAX_OPEN", 2
    )  # all closed, then opened again, when that many are open
    with produced.Dirs() as dirs:
        assert [produced.find(root, rel, dirs) for rel in asked] == [
            produced.find(root, rel) for rel in asked
        ]
        assert len(dirs.fds) <= 2


def test_a_fifo_is_never_opened_for_reading(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "metrics.jsonl")
    done: list[bytes | None] = []
    reader = threading.Thread(target=lambda: done.append(produced.read_bytes(tmp_path, "metrics.jsonl")))
    reader.start()
    reader.join(timeout=10)
    assert done == [None]  # returned at once: no writer was ever needed


def test_walk_yields_links_as_links_and_never_enters_them(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "root"
    _write(root, "a/b.txt")
    (root / "a" / "to-dir").symlink_to(secret.parent)
    (root / "to-file").symlink_to(secret)
    found = {f.rel: (f.kind, f.target) for f in produced.walk(root)}
    assert found == {
        "a/b.txt": ("file", None),
        "a/to-dir": ("link", str(secret.parent)),
        "to-file": ("link", str(secret)),
    }
    assert produced.files(root, "*") == [] and produced.files(root, "*.txt", "a") == ["a/b.txt"]


def test_an_output_link_is_recorded_by_its_target_and_compared_by_it(tmp_path: Path, secret: Path) -> None:
    store = Store(tmp_path / "proj")
    store.ensure()
    (store.root / "model.pt").symlink_to(secret)
    _write(store.root, "real.pt", b"weights")
    link = produced.entry(store.root, "model.pt", store.put_fd, 1 << 20)
    real = produced.entry(store.root, "real.pt", store.put_fd, 1 << 20)
    assert link == produced.link_entry("model.pt", str(secret))
    assert link is not None and link.link == str(secret) and not link.stored and link.size == 0
    assert real is not None and real.stored and store.read_blob(real.hash) == b"weights"
    assert produced.entry(store.root, "real.pt", store.put_fd, 3).stored is False  # type: ignore[union-attr]
    blobs = [p.read_bytes() for p in store.blobs_dir.rglob("*") if p.is_file()]
    assert not any(SECRET in b for b in blobs)

    # A file whose bytes are the target string is still not the link.
    _write(store.root, "same.pt", str(secret).encode())
    as_file = produced.entry(store.root, "same.pt", None, 0)
    assert as_file is not None and as_file.hash != link.hash

    def side(label: str, outputs: list[FileEntry]) -> Side:
        return Side(label, outputs, lambda e: None, [], "")

    other = produced.link_entry("model.pt", "/somewhere/else")
    assert compare_runs(side("a", [link]), side("b", [link]), "strict").status == "identical"
    verdict = compare_runs(side("a", [link]), side("b", [other]), "strict")
    assert verdict.status == "diverged" and verdict.outputs[0].kind == "link"
    assert verdict.outputs[0].note == f"a link to {secret} vs a link to /somewhere/else"


def test_a_link_entry_survives_the_record_and_old_records_still_load() -> None:
    record = Record(id="r1", created="now")
    record.results.outputs = [
        produced.link_entry("ckpt/last.pt", "ckpt_5.pt"),
        FileEntry("m.pt", 3, "ab" * 16),
    ]
    raw = dump_record(record)
    assert raw.count(b"link:") == 1  # left out for a file
    back = load_record(raw)
    assert back.results.outputs[0].link == "ckpt_5.pt" and back.results.outputs[1].link is None
    assert back.blobs() == set()


def test_selection_records_links_and_reaches_nothing_through_them(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "proj"
    _write(root, "outputs/kept.txt")
    before = attribution.snapshot(root, ["outputs"])
    (root / "outputs" / "leak").symlink_to(secret)
    (root / "outputs" / "dir").symlink_to(secret.parent)
    (root / "model.pt").symlink_to(secret)
    written = {
        "model.pt",
        "dir/id_rsa",
        "outputs/dir/id_rsa",
        "../elsewhere/id_rsa",
        "outputs/x/../../model.pt",
    }
    found = attribution.select(
        root, written=written, declared=["outputs"], before=before, data=[], exclude=[], claimed=set()
    )
    assert found == ["model.pt", "outputs/dir", "outputs/leak"]


def test_reports_that_are_links_are_not_read_and_escaping_paths_are_not_project_files(
    tmp_path: Path, secret: Path
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "proc.7.jsonl").symlink_to(secret)
    events = [
        {"e": "boot", "pid": 8, "rank": 0, "main": True},
        {"e": "w", "p": "../elsewhere/id_rsa"},
        {"e": "w", "p": "outputs/../model.pt"},
        {"e": "r", "p": "a/../../b"},
    ]
    (runtime / "proc.8.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    reports = read_reports(runtime)
    assert reports.processes == 1 and reports.errors == []
    assert reports.written == {"model.pt"} and reports.written_outside == {"../elsewhere/id_rsa"}
    assert reports.read == set()


def test_checkpoint_states_and_copies_that_are_links_are_not_stored(tmp_path: Path, secret: Path) -> None:
    store = Store(tmp_path / "proj")
    store.ensure()
    runtime = tmp_path / "runtime"
    (runtime / "rng").mkdir(parents=True)
    (runtime / "ckpt").mkdir()
    (runtime / "rng" / "abc.rank0.json").write_text(json.dumps({"step": 2, "path": "ck.pt"}))
    (runtime / "rng" / "abc.rank1.json").symlink_to(secret)
    (runtime / "ckpt" / "abc").symlink_to(secret)
    (runtime / "rtrace.rank0.jsonl").symlink_to(secret)
    (runtime / "resume-events.jsonl").symlink_to(secret)
    record = Record(id="r", created="now")
    checkpoints.collect(record, runtime, store.put_fd, 1 << 30)
    (info,) = record.results.checkpoints
    assert set(info.states) == {"0"} and info.blob is None and record.results.logs == {}
    assert not any(SECRET in p.read_bytes() for p in store.blobs_dir.rglob("*") if p.is_file())


def test_a_containers_links_come_back_as_links_and_nothing_goes_through_one(
    tmp_path: Path, secret: Path
) -> None:
    root, work = tmp_path / "proj", tmp_path / "work"
    _write(root, "train.py")
    tree = work / scratch.TREE
    scratch.make(root, tree, [])
    (tree / "model.pt").symlink_to(secret)
    (tree / "ckpts").symlink_to(secret.parent)
    (tree / "dangling").symlink_to(tmp_path / "nowhere")
    _write(tree, "runs/a.txt", b"mine")
    written = scratch.recover(work, root)
    assert written == ["ckpts", "dangling", "model.pt", "runs/a.txt"]
    assert os.readlink(root / "model.pt") == str(secret) and os.readlink(root / "ckpts") == str(secret.parent)
    assert (root / "dangling").is_symlink() and (root / "runs" / "a.txt").read_bytes() == b"mine"
    assert secret.read_bytes() == SECRET and sorted(os.listdir(secret.parent)) == ["id_rsa"]


def test_a_link_in_the_way_of_a_moved_file_is_not_written_through(tmp_path: Path, secret: Path) -> None:
    source, dest = tmp_path / "copy", tmp_path / "dest"
    _write(source, "sub/id_rsa", b"overwritten")
    (source / "link").symlink_to(secret.parent)
    dest.mkdir()
    assert not produced.move(source, dest, "link/id_rsa")  # behind a link in what the run produced
    assert not produced.move(source, dest, "../elsewhere/id_rsa")
    assert (
        produced.move(source, dest, "sub/id_rsa") and (dest / "sub" / "id_rsa").read_bytes() == b"overwritten"
    )
    assert secret.read_bytes() == SECRET


def test_shared_writes_name_the_ranks_or_processes() -> None:
    assert SharedWrite("m.pt", [0, 1], [41, 42]).writers() == "ranks 0 and 1"
    assert SharedWrite("m.pt", [0, 0], [41, 42]).writers() == "2 processes of rank 0 (pids 41, 42)"
    assert SharedWrite("m.pt", [-1, -1, -1], [4, 5, 6]).writers() == "processes 4, 5 and 6"


def test_a_file_two_processes_wrote_is_a_shared_write(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for pid, rank in ((11, 0), (12, 1)):
        events = [
            {"e": "boot", "pid": pid, "rank": rank},
            {"e": "w", "p": "model.pt"},
            {"e": "w", "p": f"r{rank}"},
        ]
        (runtime / f"proc.{pid}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    shared = read_reports(runtime).shared({"model.pt", "r0", "r1"})
    assert list(shared) == ["model.pt"] and [(w.pid, w.rank) for w in shared["model.pt"]] == [
        (11, 0),
        (12, 1),
    ]
