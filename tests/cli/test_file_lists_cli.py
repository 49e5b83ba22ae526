"""A real run whose untracked files and outputs number over 1,000: the lists are blobs, `repro ls`
rebuilds its index without them, `show` counts and names, `show --json` fills them in, and the
exported capsule carries them so a replay elsewhere restores every code file."""

from __future__ import annotations

import tarfile
from pathlib import Path

import yaml

from repro.store.capsule import RECORD_NAME, blob_member
from repro.store.recordio import LIST_INLINE
from tests.cli.test_json_answers import valid
from tests.conftest import Cli, Project

TRAIN = """\
import argparse
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--samples", type=int, default=1100)
args = parser.parse_args()
extra = sum(len(p.read_text()) for p in Path("notes").rglob("*.py"))
out = Path("checkpoints")
out.mkdir(exist_ok=True)
for i in range(args.samples):
    (out / f"sample_{i:05d}.txt").write_text(f"sample {i} {extra}\\n")
print(f"wrote {args.samples} samples from {extra} bytes of notes")
"""


def test_long_lists_round_trip_through_ls_show_export_and_replay(
    project: Project, cli: Cli, tmp_path: Path
) -> None:
    project.write("train.py", TRAIN)
    project.write("requirements.in", "")
    project.commit("train")
    for i in range(LIST_INLINE + 200):  # untracked source files the script reads: code
        project.write(f"notes/n{i // 100:02d}/note{i:05d}.py", f"NOTE = {i}\n")
    r = cli("run", "--backend", "local", "--", "python", "train.py", cwd=project.root)
    assert r.code == 0, r.err

    (run_dir,) = (project.root / ".repro" / "runs").iterdir()
    raw = (run_dir / RECORD_NAME).read_bytes()
    on_disk = yaml.safe_load(raw)
    assert len(raw) < 64 * 1024 and on_disk["code"]["untracked"] == [] and on_disk["results"]["outputs"] == []
    assert on_disk["lists"]["code.untracked"]["count"] == LIST_INLINE + 200
    assert on_disk["lists"]["results.outputs"]["count"] == 1100

    (project.root / ".repro" / "index.sqlite").write_bytes(b"not a database")
    ls = cli("ls", cwd=project.root)
    assert ls.code == 0 and run_dir.name in ls.out and "succeeded" in ls.out

    shown = cli("show", "latest", cwd=project.root)
    code_line = next(line for line in shown.out.splitlines() if line.startswith("code "))
    assert shown.code == 0 and f"dirty ({LIST_INLINE + 200} untracked)" in code_line, code_line
    assert "checkpoints/sample_00000.txt" in shown.out and "… and 1080 more" in shown.out
    record = valid("capsule", cli("show", "latest", "--json", cwd=project.root).out)
    assert len(record["code"]["untracked"]) == LIST_INLINE + 200 and len(record["results"]["outputs"]) == 1100

    capsule = tmp_path / "run.tar"
    assert cli("export", "latest", "-o", str(capsule), cwd=project.root).code == 0
    with tarfile.open(capsule) as t:
        names = set(t.getnames())
    assert {blob_member(ref["blob"]) for ref in on_disk["lists"].values()} <= names
    assert cli("verify", str(capsule), cwd=project.root).code == 0

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    replay = cli("replay", str(capsule), "--backend", "local", cwd=elsewhere)
    assert replay.code == 0, replay.err + replay.out
    assert "identical" in replay.out
