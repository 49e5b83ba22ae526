"""`repro get`: a run's files back out of the store or a capsule, checked against their hashes.

A real run of a torch-free script shaped like public training code (argparse, checkpoints folder,
the model saved in the working directory, a `latest.pt` link to the last checkpoint, one output over
the store's size limit), local backend, real git repository."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import xxhash

from repro.errors import CapsuleInvalid
from repro.get import get_files
from repro.store.record import FileEntry, Record
from repro.store.runs import LoadedRun
from tests.cli.test_json_answers import valid
from tests.conftest import Project

TRAIN = """\
import argparse
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
os.makedirs("checkpoints", exist_ok=True)
w = [random.random() for _ in range(8)]
for epoch in range(args.epochs):
    w = [x * 0.9 + random.random() * 0.1 for x in w]
    with open(f"checkpoints/ep{epoch}.pt", "w") as f:
        f.write(repr(w))
os.symlink(f"ep{args.epochs - 1}.pt", "checkpoints/latest.pt")
with open("model.pt", "w") as f:
    f.write(repr(w))
with open("embeddings.bin", "wb") as f:
    f.write(bytes(random.getrandbits(8) for _ in range(8192)))
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = Project.init(tmp_path_factory.mktemp("get") / "proj")
    project.write(".gitignore", "outputs/\n")
    project.write("train.py", TRAIN)
    project.write("repro.yaml", "store:\n  max_output_bytes: 4096\n")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--seed", "2", "--", "python", "train.py")
    assert r.code == 0, r.err
    return project


def test_get_writes_the_kept_outputs_names_the_rest_and_never_overwrites(
    ran: Project, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    r = ran.repro("get", "latest", "-o", str(out), "--json")
    assert r.code == 0, r.err
    got = valid("get", r.out)
    assert sorted(e["path"] for e in got["written"]) == [
        "checkpoints/ep0.pt",
        "checkpoints/ep1.pt",
        "model.pt",
    ]
    for rel in ("model.pt", "checkpoints/ep1.pt"):
        assert (out / rel).read_bytes() == (ran.root / rel).read_bytes()
    assert [e["path"] for e in got["not_kept"]] == ["embeddings.bin"]  # over store.max_output_bytes
    assert [(e["path"], e["link"]) for e in got["links"]] == [("checkpoints/latest.pt", "ep1.pt")]
    assert not os.path.lexists(out / "checkpoints" / "latest.pt") and not (out / "embeddings.bin").exists()

    (out / "model.pt").write_text("edited")
    r = ran.repro("get", "latest", "model.pt", "-o", str(out))
    assert r.code == 2 and "already holds model.pt" in r.err and "--force" in r.err
    assert (out / "model.pt").read_text() == "edited"
    r = ran.repro("get", "latest", "model.pt", "-o", str(out), "--force")
    assert r.code == 0, r.err
    assert (out / "model.pt").read_bytes() == (ran.root / "model.pt").read_bytes()
    assert "wrote 1 file" in r.out

    r = ran.repro("get", "latest", "embeddings.bin", "-o", str(tmp_path / "big"))
    assert r.code == 2 and "did not keep embeddings.bin" in r.err
    r = ran.repro("get", "latest", "nothing.pt", "-o", str(tmp_path / "none"))
    assert r.code == 2 and "has no output 'nothing.pt'" in r.err

    shown = ran.repro("show", "latest").out
    assert "embeddings.bin (8.0 KiB" in shown and "hashed, not kept" in shown
    assert "writes 3 kept outputs" in shown


def test_get_from_a_capsule_and_after_a_replay(ran: Project, tmp_path: Path) -> None:
    tar = tmp_path / "run.tar"
    assert ran.repro("export", "latest", "-o", str(tar)).code == 0
    r = ran.repro("get", str(tar), "checkpoints", "-o", str(tmp_path / "c"), cwd=tmp_path)
    assert r.code == 0, r.err
    assert sorted(p.name for p in (tmp_path / "c" / "checkpoints").iterdir()) == ["ep0.pt", "ep1.pt"]
    assert "link: checkpoints/latest.pt -> ep1.pt (recorded, not recreated)" in r.out

    original = json.loads(ran.repro("show", "latest", "--json").out)["id"]
    assert ran.repro("replay", "latest", "--backend", "local").code == 0
    r = ran.repro("get", "latest", "model.pt", "-o", str(tmp_path / "r"))
    assert r.code == 0, r.err
    assert f"is a replay of {original}; `repro get {original}` acts on the original" in r.err
    for verb in ("export", "attest"):
        said = ran.repro(verb, "latest", "-o", str(tmp_path / f"{verb}.out")).err
        assert f"is a replay of {original}; `repro {verb} {original}`" in said, said


def _loaded(tmp_path: Path, rel: str) -> LoadedRun:
    """A run whose record names ``rel`` as an output kept in its blobs (a stranger's record)."""
    data = b"weights"
    digest = xxhash.xxh3_128_hexdigest(data)
    blob = tmp_path / "blobs" / "blobs" / digest[:2] / digest
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.results.outputs = [FileEntry(rel, len(data), digest, stored=True)]
    return LoadedRun(record, tmp_path, tmp_path / "blobs", from_capsule=True)


@pytest.mark.parametrize("rel", ["../escape.pt", "/etc/escape.pt", "a/../../escape.pt"])
def test_a_hostile_path_writes_nothing_outside(tmp_path: Path, rel: str) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(CapsuleInvalid):
        get_files(_loaded(tmp_path, rel), [], dest)
    assert not (tmp_path / "escape.pt").exists() and not Path("/etc/escape.pt").exists()


def test_a_link_in_the_destination_is_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "checkpoints").symlink_to(elsewhere)
    with pytest.raises(CapsuleInvalid):
        get_files(_loaded(tmp_path, "checkpoints/model.pt"), [], dest, force=True)
    assert list(elsewhere.iterdir()) == []


def test_a_kept_copy_whose_bytes_changed_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "checkpoints/model.pt")
    blob = next(p for p in (tmp_path / "blobs").rglob("*") if p.is_file())
    blob.chmod(0o644)
    blob.write_bytes(b"replaced")
    dest = tmp_path / "dest"
    with pytest.raises(CapsuleInvalid, match="does not match"):
        get_files(loaded, [], dest)
    assert not dest.exists() or [p for p in dest.rglob("*") if not p.is_dir()] == []  # no partial copy
