"""Hashing of bytes, files and trees, and the stat cache's correctness."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
import xxhash

from repro.store import hashing, statcache, treehash
from repro.store.hashing import hash_bytes, hash_file
from repro.store.statcache import HashCache, hash_file_cached
from repro.store.treehash import hash_tree, tree_digest


@pytest.fixture
def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every file the stat cache and the tree walk actually read."""
    seen: list[str] = []
    real_open, real_known, real_at = hashing._hash_open, treehash._hash_known, treehash._hash_at

    def spy_open(path: str, on_bytes=None):  # type: ignore[no-untyped-def]
        seen.append(path)
        return real_open(path, on_bytes)

    def spy_known(item, on_bytes):  # type: ignore[no-untyped-def]
        seen.append(item.path)
        return real_known(item, on_bytes)

    def spy_at(dir_fd, name, path, on_bytes):  # type: ignore[no-untyped-def]
        seen.append(path)
        return real_at(dir_fd, name, path, on_bytes)

    monkeypatch.setattr(statcache, "_hash_open", spy_open)
    monkeypatch.setattr(treehash, "_hash_known", spy_known)
    monkeypatch.setattr(treehash, "_hash_at", spy_at)
    return seen


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust rows of files written just now (tests create files and re-check at once)."""
    monkeypatch.setattr(statcache, "RACY_WINDOW_NS", -10_000_000_000)


@pytest.fixture
def cache(tmp_path: Path):  # type: ignore[no-untyped-def]
    with HashCache(tmp_path / "state" / "sub" / "hashes.db") as c:
        yield c


def make_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


TREE = {"a.txt": b"alpha", "sub/b.bin": b"\x00" * 5000, "sub/deeper/c": b"gamma\n", "z": b""}


# --------------------------------------------------------------------------- bytes and files


def test_hash_bytes_is_xxh3_128_hex() -> None:
    assert hash_bytes(b"hello") == xxhash.xxh3_128_hexdigest(b"hello")
    assert len(hash_bytes(b"")) == 32


SIZES = [0, 1, 4096, hashing.READ_SIZE - 1, hashing.READ_SIZE, 3 * hashing.READ_SIZE + 7]


@pytest.mark.parametrize("size", SIZES)
def test_hash_file_matches_hash_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    p = tmp_path / "f"
    p.write_bytes(data)
    assert hash_file(p) == hash_bytes(data)


def test_hash_file_missing_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        hash_file(tmp_path / "nope")


# --------------------------------------------------------------------------- stat cache


def test_cache_creates_parent_dirs_and_wal(tmp_path: Path, cache: HashCache) -> None:
    assert cache.db_path.exists()
    with closing(sqlite3.connect(cache.db_path)) as db:
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_a_damaged_cache_is_dropped_and_started_afresh(tmp_path: Path) -> None:
    db = tmp_path / "cache" / "hashes.sqlite"
    db.parent.mkdir()
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)  # a torn page after a power loss
    (tmp_path / "a.bin").write_bytes(b"x" * 100)
    with HashCache(db) as cache:
        assert cache.enabled
        first = hash_file_cached(tmp_path / "a.bin", cache)
    with HashCache(db) as cache:
        assert hash_file_cached(tmp_path / "a.bin", cache) == first == hash_file(tmp_path / "a.bin")


def test_unchanged_file_is_not_read_again(
    tmp_path: Path, cache: HashCache, count_reads: list[str], no_racy_window: None
) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"data")
    first = hash_file_cached(p, cache)
    second = hash_file_cached(p, cache)
    assert first == second == hash_bytes(b"data")
    assert len(count_reads) == 1


def test_same_size_change_with_mtime_forced_back_is_detected(
    tmp_path: Path, cache: HashCache, no_racy_window: None
) -> None:
    root = make_tree(tmp_path / "d", {"f": b"aaaa", "g": b"unchanged"})
    before = hash_tree(root, root, cache)
    st = os.stat(root / "f")
    time.sleep(0.05)  # past the kernel's timestamp granularity, so only ctime can tell
    (root / "f").write_bytes(b"bbbb")
    os.utime(root / "f", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(root / "f").st_mtime_ns == st.st_mtime_ns
    after = hash_tree(root, root, cache)
    assert {f.path: f.hash for f in after.files}["f"] == hash_bytes(b"bbbb")
    assert after.digest != before.digest


def test_replaced_file_with_same_stat_times_is_detected(
    tmp_path: Path, cache: HashCache, no_racy_window: None
) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"1111")
    hash_file_cached(p, cache)
    st = os.stat(p)
    tmp = tmp_path / "f.new"
    tmp.write_bytes(b"2222")
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, p)  # new inode
    assert hash_file_cached(p, cache) == hash_bytes(b"2222")


def test_racy_rows_are_not_trusted(tmp_path: Path, cache: HashCache, count_reads: list[str]) -> None:
    # A file changed within the timestamp granularity of its hashing could change again
    # unseen, so a fresh row is re-checked by reading.
    p = tmp_path / "f"
    p.write_bytes(b"x")
    hash_file_cached(p, cache)
    hash_file_cached(p, cache)
    assert len(count_reads) == 2


def test_touched_identical_file_keeps_the_digest(
    tmp_path: Path, cache: HashCache, count_reads: list[str], no_racy_window: None
) -> None:
    root = make_tree(tmp_path / "d", TREE)
    before = hash_tree(root, root, cache)
    time.sleep(0.02)
    os.utime(root / "a.txt")
    reads_before = len(count_reads)
    after = hash_tree(root, root, cache)
    assert after.digest == before.digest
    assert count_reads[reads_before:] == [str(root / "a.txt")]


def test_recheck_reads_nothing_when_unchanged(
    tmp_path: Path, cache: HashCache, count_reads: list[str], no_racy_window: None
) -> None:
    root = make_tree(tmp_path / "d", TREE)
    first = hash_tree(root, root, cache)
    n = len(count_reads)
    assert n == len(TREE)
    second = hash_tree(root, root, cache)
    assert len(count_reads) == n
    assert second == first


def test_deleted_file(tmp_path: Path, cache: HashCache, no_racy_window: None) -> None:
    root = make_tree(tmp_path / "d", TREE)
    before = hash_tree(root, root, cache)
    (root / "sub" / "b.bin").unlink()
    after = hash_tree(root, root, cache)
    assert "sub/b.bin" not in [f.path for f in after.files]
    assert after.size == before.size - 5000
    assert after.digest != before.digest
    with closing(sqlite3.connect(cache.db_path)) as db:
        rows = db.execute("SELECT path FROM stat_cache").fetchall()
    assert str(root / "sub" / "b.bin") not in {r[0] for r in rows}


def test_new_file(tmp_path: Path, cache: HashCache, no_racy_window: None) -> None:
    root = make_tree(tmp_path / "d", TREE)
    before = hash_tree(root, root, cache)
    (root / "sub" / "new").write_bytes(b"new")
    after = hash_tree(root, root, cache)
    assert [f.path for f in after.files] == sorted([*TREE, "sub/new"])
    assert after.digest != before.digest
    assert after.digest == hash_tree(root, root).digest


def test_exclude_files_and_directories(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "d", {**TREE, ".git/HEAD": b"ref", "keep/.env": b"SECRET=1"})
    seen: list[str] = []

    def exclude(rel: str) -> bool:
        seen.append(rel)
        return rel == ".git" or rel.endswith(".env")

    tree = hash_tree(root, root, exclude=exclude)
    assert [f.path for f in tree.files] == sorted(TREE)
    assert ".git/HEAD" not in seen  # an excluded directory is not entered
    assert "keep/.env" in seen
    assert tree.digest == hash_tree(make_tree(tmp_path / "e", TREE), tmp_path / "e").digest


def test_exclude_receives_paths_relative_to_rel_to(tmp_path: Path) -> None:
    make_tree(tmp_path / "proj", {"data/x": b"1", "data/y": b"2"})
    seen: list[str] = []

    def exclude(rel: str) -> bool:
        seen.append(rel)
        return False

    tree = hash_tree(tmp_path / "proj" / "data", tmp_path / "proj", exclude=exclude)
    assert sorted(seen) == ["data/x", "data/y"]
    assert [f.path for f in tree.files] == ["data/x", "data/y"]


def test_symlinks(tmp_path: Path) -> None:
    outside = make_tree(tmp_path / "outside", {"big": b"outside data", "inner/f": b"nested"})
    root = make_tree(tmp_path / "d", {"real": b"real data"})
    (root / "link_to_file").symlink_to(outside / "big")
    (root / "link_to_dir").symlink_to(outside / "inner", target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "dangling").symlink_to(tmp_path / "missing")
    tree = hash_tree(root, root)
    entries = {f.path: f for f in tree.files}
    assert sorted(entries) == ["link_to_file", "real"]
    assert entries["link_to_file"].hash == hash_bytes(b"outside data")
    assert entries["link_to_file"].size == len(b"outside data")


def test_symlinked_root_directory_is_followed(tmp_path: Path) -> None:
    real = make_tree(tmp_path / "real", TREE)
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    via_link = hash_tree(tmp_path / "alias", tmp_path / "alias")
    assert via_link.digest == hash_tree(real, real).digest


def test_empty_directory(tmp_path: Path, cache: HashCache) -> None:
    (tmp_path / "empty" / "also_empty").mkdir(parents=True)
    tree = hash_tree(tmp_path / "empty", tmp_path, cache)
    assert tree.files == [] and tree.size == 0
    assert tree.digest == tree_digest([]) == xxhash.xxh3_128_hexdigest(b"")


def test_single_file_root(tmp_path: Path, cache: HashCache) -> None:
    make_tree(tmp_path, {"cfg/params.yaml": b"lr: 0.1\n"})
    tree = hash_tree(tmp_path / "cfg" / "params.yaml", tmp_path, cache)
    assert [(f.path, f.size, f.hash, f.stored) for f in tree.files] == [
        ("cfg/params.yaml", 8, hash_bytes(b"lr: 0.1\n"), False)
    ]
    assert tree.size == 8


def test_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        hash_tree(tmp_path / "nope", tmp_path)


def test_digest_is_stable_across_creation_order_and_runs(tmp_path: Path) -> None:
    a = make_tree(tmp_path / "a", TREE)
    b = make_tree(tmp_path / "b", dict(reversed(list(TREE.items()))))
    da, db = hash_tree(a, a), hash_tree(b, b)
    assert da == db
    assert [f.path for f in da.files] == sorted(TREE)
    # A fixed value: the digest must not change between runs or versions.
    assert da.digest == GOLDEN_DIGEST
    code = (
        "import sys; from pathlib import Path; from repro.store.treehash import hash_tree;"
        "print(hash_tree(Path(sys.argv[1]), Path(sys.argv[1])).digest)"
    )
    other_run = subprocess.run(
        [sys.executable, "-c", code, str(a)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert other_run == da.digest


GOLDEN_DIGEST = "f2304fa73933286b11be9943b1a5f83a"


def test_digest_depends_on_paths_not_only_contents(tmp_path: Path) -> None:
    a = make_tree(tmp_path / "a", {"x": b"1", "y": b"2"})
    b = make_tree(tmp_path / "b", {"x": b"2", "y": b"1"})
    assert hash_tree(a, a).digest != hash_tree(b, b).digest


def test_many_files_match_uncached_and_report_progress(
    tmp_path: Path, cache: HashCache, no_racy_window: None
) -> None:
    files = {f"d{i % 7}/f{i:04d}": os.urandom(i % 300) for i in range(700)}
    files["big"] = os.urandom(2 * hashing.READ_SIZE + 3)
    root = make_tree(tmp_path / "d", files)
    calls: list[tuple[int, int]] = []
    tree = hash_tree(root, root, cache, on_progress=lambda d, t: calls.append((d, t)))
    assert {f.path: f.hash for f in tree.files} == {k: hash_bytes(v) for k, v in files.items()}
    total = sum(len(v) for v in files.values())
    assert tree.size == total
    assert calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    calls.clear()
    assert hash_tree(root, root, cache, on_progress=lambda d, t: calls.append((d, t))) == tree
    assert calls == [(total, total)]


def test_cache_shared_by_concurrent_processes(tmp_path: Path, no_racy_window: None) -> None:
    root = make_tree(tmp_path / "d", {f"f{i}": str(i).encode() for i in range(300)})
    db = tmp_path / "hashes.db"
    code = (
        "import sys; from pathlib import Path; from repro.store.statcache import HashCache\n"
        "from repro.store.treehash import hash_tree\n"
        "with HashCache(Path(sys.argv[2])) as c:\n"
        "    for _ in range(5): d = hash_tree(Path(sys.argv[1]), Path(sys.argv[1]), c).digest\n"
        "print(d)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(root), str(db)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert set(outs) == {hash_tree(root, root).digest}
    with HashCache(db) as c:
        assert hash_tree(root, root, c).digest == outs[0]


def test_unusable_cache_database_still_hashes(tmp_path: Path) -> None:
    db = tmp_path / "hashes.db"
    db.write_bytes(b"this is not a sqlite database" * 100)
    p = tmp_path / "f"
    p.write_bytes(b"data")
    with HashCache(db) as c:
        assert not c.enabled
        assert hash_file_cached(p, c) == hash_bytes(b"data")
        assert hash_tree(p, tmp_path, c).files[0].hash == hash_bytes(b"data")


def test_hash_file_cached_without_cache(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    assert hash_file_cached(p, None) == hash_bytes(b"abc")


def test_small_files_move_to_the_pool_when_reads_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"f{i:04d}": os.urandom(i % 500) for i in range(1200)}
    root = make_tree(tmp_path / "d", files)
    monkeypatch.setattr(treehash, "_io_bound", lambda before, n: True)
    calls: list[tuple[int, int]] = []
    tree = hash_tree(root, root, on_progress=lambda d, t: calls.append((d, t)))
    assert {f.path: f.hash for f in tree.files} == {k: hash_bytes(v) for k, v in files.items()}
    assert calls[-1] == (tree.size, tree.size)


def test_a_file_that_grows_after_its_stat_is_read_to_the_end(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"12345")
    real_fstat = os.fstat
    calls: list[int] = []

    def stale_then_real(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        calls.append(fd)
        if len(calls) > 1:
            return st
        fields = list(st[:10])
        fields[6] = 2  # st_size as it was before the file grew
        return os.stat_result(fields)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "fstat", stale_then_real)
        digest, st = hashing._hash_open(str(p))
    assert digest == hash_bytes(b"12345")
    assert st.st_size == 5  # the size recorded is the size read


def test_a_file_changed_between_scan_and_read_is_recorded_as_read(tmp_path: Path, cache: HashCache) -> None:
    root = make_tree(tmp_path / "d", {"f": b"short"})
    hash_tree(root, root, cache)  # known to the cache: a re-check stats first, then reads
    (root / "f").write_bytes(b"other")
    real_scan = treehash._scan

    def scan_then_grow(*args):  # type: ignore[no-untyped-def]
        found = real_scan(*args)
        (root / "f").write_bytes(b"much longer now")
        return found

    with pytest.MonkeyPatch.context() as m:
        m.setattr(treehash, "_scan", scan_then_grow)
        tree = hash_tree(root, root, cache)
    assert [(f.path, f.size, f.hash) for f in tree.files] == [("f", 15, hash_bytes(b"much longer now"))]
    assert hash_tree(root, root, cache) == tree


# --------------------------------------------------------------------------- first hash: one walk


def test_first_hash_lists_files_in_path_order_as_a_recheck_does(
    tmp_path: Path, cache: HashCache, no_racy_window: None
) -> None:
    # "a.txt" sorts before "a/x" ('.' < '/'), "B" before "a": the walk must not emit directory order.
    files = {"a.txt": b"1", "a/x": b"2", "a-b": b"3", "b/c/d": b"4", "B": b"5", "a/y/z": b"6", "a0": b"7"}
    root = make_tree(tmp_path / "d", files)
    first = hash_tree(root, root, cache)
    assert [f.path for f in first.files] == sorted(files)
    assert {f.path: f.hash for f in first.files} == {k: hash_bytes(v) for k, v in files.items()}
    (root / "a0").write_bytes(b"changed")  # the re-check walks with stats and the cache
    again = hash_tree(root, root, cache)
    assert [f.path for f in again.files] == sorted(files)
    assert again.digest == hash_tree(root, root).digest != first.digest


def test_first_hash_writes_its_cache_rows_in_batches(
    tmp_path: Path,
    cache: HashCache,
    count_reads: list[str],
    no_racy_window: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(treehash, "_STORE_ROWS", 40)
    files = {f"d{i % 6}/f{i:03d}": os.urandom(i % 90) for i in range(300)}
    root = make_tree(tmp_path / "d", files)
    first = hash_tree(root, root, cache)
    assert len(count_reads) == 300
    with closing(sqlite3.connect(cache.db_path)) as db:
        assert db.execute("SELECT count(*) FROM stat_cache").fetchone()[0] == 300
    assert hash_tree(root, root, cache) == first
    assert len(count_reads) == 300  # the re-check read nothing


def test_first_hash_skips_fifos_without_opening_them(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "d", {"f": b"data", "sub/g": b"more"})
    os.mkfifo(root / "sub" / "pipe")  # opening it for reading would wait for a writer
    (root / "to_pipe").symlink_to(root / "sub" / "pipe")
    tree = hash_tree(root, root)
    assert [f.path for f in tree.files] == ["f", "sub/g"]


def test_first_hash_hands_the_rest_of_the_tree_to_the_pool_when_reads_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"d{i % 4}/e{i % 3}/f{i:04d}": os.urandom(i % 200) for i in range(1500)}
    root = make_tree(tmp_path / "d", files)
    monkeypatch.setattr(treehash, "_io_bound", lambda before, n: True)
    pooled: list[int] = []
    real_todo = treehash._hash_todo

    def spy_todo(todo, *args):  # type: ignore[no-untyped-def]
        pooled.append(len(todo))
        return real_todo(todo, *args)

    monkeypatch.setattr(treehash, "_hash_todo", spy_todo)
    calls: list[tuple[int, int]] = []
    tree = hash_tree(root, root, on_progress=lambda d, t: calls.append((d, t)))
    assert {f.path: f.hash for f in tree.files} == {k: hash_bytes(v) for k, v in files.items()}
    assert [f.path for f in tree.files] == sorted(files)
    assert pooled and 0 < pooled[0] < len(files)  # some hashed in the walk, the rest in the pool
    assert calls[-1] == (tree.size, tree.size)
    assert all(t in (0, tree.size) for _, t in calls)  # the total is unknown until the end
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_many_files_are_hashed_with_one_cache_query_and_only_changed_ones_read(
    tmp_path: Path, cache: HashCache, count_reads: list[str], no_racy_window: None
) -> None:
    root = make_tree(tmp_path / "d", {f"f{i}": f"v{i}".encode() for i in range(20)})
    files = [(os.path.abspath(root / f"f{i}"), os.stat(root / f"f{i}")) for i in range(20)]
    first = statcache.hash_files_cached(files, cache)
    assert first == [hash_bytes(f"v{i}".encode()) for i in range(20)] and len(count_reads) == 20
    (root / "f3").write_bytes(b"changed")
    files[3] = (files[3][0], os.stat(root / "f3"))
    again = statcache.hash_files_cached(files, cache)
    assert again == [*first[:3], hash_bytes(b"changed"), *first[4:]]
    assert count_reads[20:] == [files[3][0]]  # the one file whose stat changed
    assert statcache.hash_files_cached(files, None) == again  # no cache: every file read
