"""`.reproignore` follows gitignore's rules, checked against git itself (`git check-ignore`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repro.errors import UsageError
from repro.facts.code import Ignore, capture_code
from repro.store.runs import Store
from tests.conftest import git

PATTERNS = """\
# comments and blank lines are ignored

*.log
!keep.log
/build
docs/**/*.tmp
cache/
\\#literal-hash.txt
src/*.gen.py
"""
PATHS = [
    "run.log", "sub/deep/run.log", "keep.log", "sub/keep.log", "build/out.bin", "sub/build/out.bin",
    "docs/a/b/x.tmp", "docs/x.tmp", "x.tmp", "cache/blob", "sub/cache/blob", "#literal-hash.txt",
    "src/a.gen.py", "src/sub/a.gen.py", "train.py", "data/train.csv", "src/data/loader.py",
]  # fmt: skip


def _git_ignored(root: Path, paths: list[str]) -> set[str]:
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"], cwd=root, input="\n".join(paths), text=True,
        capture_output=True,
    )  # fmt: skip
    return set(done.stdout.split())


def test_reproignore_matches_what_git_ignores(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text(PATTERNS)
    ignore = Ignore(PATTERNS.splitlines())
    ours = {p for p in PATHS if ignore(p)}
    assert ours == _git_ignored(root, PATHS)
    assert "keep.log" not in ours and "sub/build/out.bin" not in ours and "docs/a/b/x.tmp" in ours


def test_data_and_output_paths_are_anchored_at_the_root(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for rel in ("train.py", "data/train.csv", "src/data/loader.py", "outputs/m.pt", "src/outputs.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    (root / ".reproignore").write_text("*.csv\n!keep.csv\n")
    store = Store(tmp_path / "home")
    store.ensure()
    cap = capture_code(root, store.put_file, exclude=["data", "outputs"])
    assert [f.path for f in cap.info.files] == [
        ".reproignore",
        "src/data/loader.py",
        "src/outputs.py",
        "train.py",
    ]


def test_a_pattern_git_rejects_is_a_usage_error(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / ".reproignore").write_text("ok.txt\nbroken\\\n")  # a trailing backslash
    with pytest.raises(UsageError, match="reproignore"):
        Ignore.for_project(root, [])


def test_submodule_files_are_captured(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "helpers.py").write_text("def helper():\n    return 1\n")
    git(lib, "add", "-A")
    git(lib, "commit", "-qm", "lib")
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text("from vendor.helpers import helper\n")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "with a submodule")
    store = Store(tmp_path / "home")
    store.ensure()
    cap = capture_code(root, store.put_file, exclude=[])
    assert "vendor/helpers.py" in [f.path for f in cap.info.files]
    assert not cap.warnings


def test_the_one_search_that_clears_unmatched_paths_agrees_with_gitignore_precedence() -> None:
    """A path no pattern matches is cleared by one joined search; every other path still gets
    gitignore's precedence (negation, directory patterns): both agree with the full matcher."""
    ignore = Ignore(PATTERNS.splitlines() + ["node_modules", "!src/keep.gen.py", "/data"])
    assert ignore._any is not None
    paths = [*PATHS, "src/keep.gen.py", "node_modules/x.js", "a/node_modules/y/z.js", "data", "a/data"]
    for rel in paths:
        for is_dir in (False, True):
            name = rel + "/" if is_dir else rel
            assert ignore(rel, is_dir) == bool(ignore.spec.match_file(name)), name
    assert not ignore("src/keep.gen.py") and ignore("src/a.gen.py") and ignore("data", is_dir=True)
