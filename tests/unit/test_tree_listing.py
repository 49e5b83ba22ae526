"""The whole-tree fast path: an unchanged find(1) listing returns the recorded manifest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from repro.store import hashing, statcache, treehash
from repro.store.listing import file_keys, tree_listing
from repro.store.statcache import HashCache
from repro.store.treehash import hash_tree


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "a" / "deep").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "x.bin").write_bytes(b"x" * 100)
    (root / "a" / "deep" / "name with spaces.csv").write_text("1,2\n")
    (root / "b" / "y.bin").write_bytes(b"y" * 10)
    return root


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written a moment ago count as settled (the racy window is for slow clocks)."""
    monkeypatch.setattr(statcache, "RACY_WINDOW_NS", -(10**12))


def _no_walk(*args: object) -> None:
    raise AssertionError("the tree was walked file by file")


def test_listing_keys_match_os_stat(tree: Path) -> None:
    listing = tree_listing(str(tree))
    assert listing is not None
    keys = file_keys(listing)
    assert keys is not None and len(keys) == 3
    path = tree / "a" / "deep" / "name with spaces.csv"
    st = path.stat()
    assert keys[str(path)] == f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_ctime_ns}"


def test_a_first_hash_takes_no_listing(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(treehash, "tree_listing", _no_walk)
    with HashCache(tmp_path / "c.sqlite") as cache:
        assert len(hash_tree(tree, tmp_path, cache).files) == 3


def test_unchanged_tree_is_answered_from_its_listing(
    tree: Path, tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with HashCache(tmp_path / "c.sqlite") as cache:
        first = hash_tree(tree, tmp_path, cache)  # hashes every file
        second = hash_tree(tree, tmp_path, cache)  # a re-check: walks, and records the listing
        monkeypatch.setattr(treehash, "_scan", _no_walk)
        third = hash_tree(tree, tmp_path, cache)
    assert first == second == third


def test_a_rewrite_with_size_and_mtime_forced_back_is_seen(tree: Path, tmp_path: Path, settled: None) -> None:
    target = tree / "a" / "x.bin"
    with HashCache(tmp_path / "c.sqlite") as cache:
        first = hash_tree(tree, tmp_path, cache)
        hash_tree(tree, tmp_path, cache)  # records the listing
        st = target.stat()
        target.write_bytes(b"z" * 100)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        again = hash_tree(tree, tmp_path, cache)
    assert again.digest != first.digest
    assert {f.path: f.hash for f in again.files}["data/a/x.bin"] == hashing.hash_bytes(b"z" * 100)


def test_added_and_removed_files_are_seen(tree: Path, tmp_path: Path, settled: None) -> None:
    with HashCache(tmp_path / "c.sqlite") as cache:
        first = hash_tree(tree, tmp_path, cache)
        hash_tree(tree, tmp_path, cache)
        (tree / "b" / "new.bin").write_bytes(b"n")
        added = hash_tree(tree, tmp_path, cache)
        (tree / "a" / "x.bin").unlink()
        removed = hash_tree(tree, tmp_path, cache)
    assert len(added.files) == 4 and len(removed.files) == 3
    assert len({first.digest, added.digest, removed.digest}) == 3


def test_recent_writes_are_not_recorded_as_settled(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with HashCache(tmp_path / "c.sqlite") as cache:
        hash_tree(tree, tmp_path, cache)
        hash_tree(tree, tmp_path, cache)  # files written just now: within the racy window
        calls: list[object] = []
        real = treehash._scan

        def counted(*a: Any) -> Any:
            calls.append(a)
            return real(*a)

        monkeypatch.setattr(treehash, "_scan", counted)
        hash_tree(tree, tmp_path, cache)
    assert calls  # walked again: nothing was recorded for the whole tree


def test_a_symlink_disables_the_fast_path(tree: Path, tmp_path: Path, settled: None) -> None:
    (tree / "b" / "link.bin").symlink_to(tree / "a" / "x.bin")
    assert tree_listing(str(tree)) is None
    with HashCache(tmp_path / "c.sqlite") as cache:
        digest = hash_tree(tree, tmp_path, cache)
    assert "data/b/link.bin" in {f.path for f in digest.files}


def test_the_manifest_is_keyed_by_the_base_too(tree: Path, tmp_path: Path, settled: None) -> None:
    with HashCache(tmp_path / "c.sqlite") as cache:
        hash_tree(tree, tmp_path, cache)
        outer = hash_tree(tree, tmp_path, cache)
        inner = hash_tree(tree, tree.parent.parent, cache)
    assert outer.files[0].path.startswith("data/")
    assert inner.files[0].path.startswith(f"{tmp_path.name}/data/")
