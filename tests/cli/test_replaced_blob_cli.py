"""A blob replaced in the store is caught before a stored run is replayed, resumed or exported.

Blobs are named by the xxh3-128 of their bytes; someone with write access to `.repro/blobs/`
(or a damaged disk) can put other bytes under a name. A replay restores code, the lockfile and
data manifests from blobs: each is re-hashed as it is read, and a mismatch stops the replay with
exit 6 naming the blob, before anything runs (a data manifest is read when the data changed, to
name what did). Real runs, local backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

TRAIN = """\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data")
args = parser.parse_args()
count = len(os.listdir(args.data))
os.makedirs("outputs", exist_ok=True)
with open("outputs/count.txt", "w") as f:
    f.write(str(count))
print("files", count)
"""
EVIL = "open({marker!r}, 'w').write('ran')\n"


@pytest.fixture
def stored(project: Project) -> tuple[Project, dict[str, Any]]:
    project.write("train.py", TRAIN)
    for i in range(1001):  # over MANIFEST_INLINE: the data's manifest is a blob of its own
        project.write(f"data/{i:04d}.txt", str(i))
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--data", "data", "--", "python", "train.py")
    assert r.code == 0, r.err
    return project, json.loads(project.repro("show", "latest", "--json").out)


def _blob(project: Project, digest: str) -> Path:
    return project.root / ".repro" / "blobs" / digest[:2] / digest


@pytest.mark.parametrize("which", ["code", "manifest"])
def test_a_replaced_blob_stops_the_replay_naming_it(
    stored: tuple[Project, dict[str, Any]], tmp_path: Path, which: str
) -> None:
    project, record = stored
    marker = tmp_path / "ran"
    if which == "code":
        digest = next(f["hash"] for f in record["code"]["files"] if f["path"] == "train.py")
    else:  # read when the data changed, to name the files that did
        digest = record["data"]["inputs"][0]["manifest"]
        project.write("data/0000.txt", "changed")
    _blob(project, digest).write_text(EVIL.format(marker=str(marker)))
    before = json.loads(project.repro("ls", "--json").out)

    r = project.repro("replay", "latest")
    assert r.code == 6, r.out + r.err
    assert f"blob {digest} does not match its content-address name" in r.err, r.err
    assert "Traceback" not in r.err and r.err.count("\n") == 2, r.err
    assert not marker.exists()
    assert json.loads(project.repro("ls", "--json").out) == before  # no replay was recorded
    exported = project.repro("export", "latest", "-o", str(tmp_path / "x.tar"))
    assert exported.code == 6 and digest in exported.err and not (tmp_path / "x.tar").exists()
    assert not list(tmp_path.glob(".x.tar*"))
    assert project.repro("verify", "latest").code == 6


def test_a_log_that_grows_while_it_is_stored_is_kept_under_its_true_name(project: Project) -> None:
    """A file whose bytes change between hashing and copying is stored under what was copied."""
    from repro.store.hashing import hash_bytes, hash_file
    from repro.store.runs import Store

    store = Store(project.root)
    store.ensure()
    log = project.write("train.log", "epoch 1\n")
    stale = hash_file(log)
    log.write_text("epoch 1\nepoch 2\n")  # grew after it was hashed
    digest = store.put_file(log, stale)
    assert digest == hash_bytes(b"epoch 1\nepoch 2\n") != stale
    assert store.read_blob(digest) == b"epoch 1\nepoch 2\n"
    assert not store.has_blob(stale)
