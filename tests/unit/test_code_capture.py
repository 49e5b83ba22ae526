"""Code capture: snapshots outside git (.reproignore), git state, restore."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.config import Settings
from repro.errors import UsageError
from repro.facts import code as code_capture
from repro.facts.code import MaskedPut, capture_code, restore_code, store_patch, stored_digest
from repro.facts.secrets import Masker, credential_in_file
from repro.facts.secrets.verdicts import Verdicts
from repro.resume import check_code
from repro.store.record import Record
from repro.store.runs import Store
from tests.conftest import git


def _store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store-home")
    s.ensure()
    return s


def _committed_repo(tmp_path: Path) -> Path:
    """A git repository whose one commit holds train.py."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text("print(1)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


def test_snapshot_outside_git_honours_reproignore_and_leaves_secrets_out(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for rel, text in {
        "train.py": "print(1)\n",
        "lib/model.py": "X = 1\n",
        "scratch/big.log": "noise\n",
        "notes.tmp": "t\n",
        ".env": "KEY=1\n",
        "data/x.csv": "1\n",
        "outputs/model.pt": "w\n",
        ".venv/lib/site.py": "v\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".reproignore").write_text("# not code\nscratch/\n*.tmp\n")
    store = _store(tmp_path)
    cap = capture_code(root, store.put_file, exclude=["data", "outputs"])
    assert cap.info.kind == "snapshot" and cap.info.commit is None
    assert [f.path for f in cap.info.files] == [".reproignore", "lib/model.py", "train.py"]
    assert cap.info.excluded == [".env"] and any(".env" in w.message for w in cap.warnings)
    assert all(store.has_blob(f.hash) for f in cap.info.files)


def test_git_project_in_a_subdirectory_records_relative_paths_and_patch(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "proj").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "proj" / "train.py").write_text("print(1)\n")
    (repo / "other.py").write_text("elsewhere\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    (repo / "proj" / "train.py").write_text("print(2)\n")
    (repo / "proj" / "new.py").write_text("new\n")
    store = _store(tmp_path)
    cap = capture_code(repo / "proj", store.put_file, exclude=[])
    store_patch(cap, store.put_bytes)
    info = cap.info
    assert info.kind == "git" and info.subdir == "proj" and info.dirty
    assert [f.path for f in info.files] == ["new.py", "train.py"]
    assert [f.path for f in info.untracked] == ["new.py"]
    patch = store.blob_path(info.patch or "").read_text()
    assert "+print(2)" in patch and "other.py" not in patch and "a/train.py" in patch


def test_clean_tree_is_not_dirty_and_excluded_untracked_files_do_not_count(tmp_path: Path) -> None:
    repo = _committed_repo(tmp_path)
    (repo / "data").mkdir()
    (repo / "data" / "new.csv").write_text("1\n")  # declared data, untracked: not code
    cap = capture_code(repo, _store(tmp_path).put_file, exclude=["data"])
    assert cap.info.dirty is False and cap.info.patch is None


def test_restore_writes_exact_files_and_refuses_escapes(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(b"\x00binary\xff")
    store = _store(tmp_path)
    cap = capture_code(root, store.put_file, exclude=[])
    dest = tmp_path / "restored"
    assert restore_code(cap.info, store.blob_path, dest) == []
    assert (dest / "pkg" / "a.py").read_bytes() == b"\x00binary\xff"
    cap.info.files[0].path = "../escape.py"
    try:
        restore_code(cap.info, store.blob_path, dest)
    except Exception as e:  # noqa: BLE001
        assert "escapes" in str(e)
    else:
        raise AssertionError("an escaping path was restored")
    assert not (tmp_path / "escape.py").exists()


def test_logs_are_not_code_unless_reproignore_keeps_one(tmp_path: Path) -> None:
    repo = _committed_repo(tmp_path)
    for name in ("train.log", "nohup.out", "logs/rank0.log", "golden.log"):
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text("epoch 1 loss 0.5\n")  # `python train.py > train.log` as the run starts
    cap = capture_code(repo, _store(tmp_path).put_file, exclude=[])
    assert cap.info.dirty is False and [f.path for f in cap.info.files] == ["train.py"]
    (repo / ".reproignore").write_text("!golden.log\n")
    cap = capture_code(repo, _store(tmp_path).put_file, exclude=[])
    assert [f.path for f in cap.info.listed] == [".reproignore", "golden.log"]  # untracked, not source
    assert cap.info.untracked == [] and cap.info.dirty is False


def test_code_holding_secrets_is_stored_masked_and_key_files_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "p"
    token = "hf_" + "Qx7rT2mK9pL4vN8wZ3bC6dF1gH5jS0aE"
    body = "\n".join("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC" + str(i) * 13 for i in range(6))
    files = {
        "train.py": "import helpers\nprint(helpers.HUB is not None)\n",
        "helpers.py": f'HUB = "{token}"\n',
        "conf/db.yaml": "host: db\npassword: db-pass-1234\n",
        "notes/run.txt": "notes\n" * 3000
        + f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    store, masker = _store(tmp_path), Masker()
    put = MaskedPut(store, masker, root)
    cap = capture_code(root, put, exclude=[])
    entries = {f.path: f for f in cap.info.files}
    assert set(entries) == {"train.py", "helpers.py", "conf/db.yaml"} and cap.info.excluded == [
        "notes/run.txt"
    ]
    assert any("notes/run.txt (a private key)" in w.message for w in cap.warnings)
    assert store.read_blob(entries["helpers.py"].hash) == b'HUB = "***"\n'
    assert store.read_blob(entries["conf/db.yaml"].hash) == b"host: db\npassword: ***\n"
    assert store.read_blob(entries["train.py"].hash) == files["train.py"].encode()  # nothing to mask: as is
    assert put.found == {"db-pass-1234"}
    # what resume compares: a masked file is known by the digest of its masked bytes
    assert stored_digest(root / "helpers.py", masker, root) == entries["helpers.py"].hash

    record = Record(id="20240101-000000-0000", created="2024-01-01T00:00:00Z", code=cap.info)
    check_code(store, Settings(), record, root)  # unchanged code, some of it stored masked: no refusal
    (root / "helpers.py").write_text('HUB = "hf_' + "Zz" * 16 + '"\n')  # another token: the same code
    check_code(store, Settings(), record, root)
    (root / "helpers.py").write_text("HUB = None\n")
    with pytest.raises(UsageError, match="helpers.py"):
        check_code(store, Settings(), record, root)


def test_files_found_clean_are_not_scanned_again_but_still_searched_for_known_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "train.py").write_text("print('training')\n")
    (root / "db.py").write_text("URL = 'postgres://app:hunter-2-pass@db/x'\n")  # a shape: never clean
    (root / "notes.txt").write_text("the team's shared word is swordfish-1234\n")  # clean by the rules
    store = _store(tmp_path)
    db = store.cache_dir / "verdicts.sqlite"
    scanned: list[str] = []
    real = credential_in_file

    def counted(path: str | Path) -> str | None:
        scanned.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(code_capture, "credential_in_file", counted)

    def capture(masker: Masker) -> dict[str, bytes]:
        with Verdicts(db) as verdicts:
            put = MaskedPut(store, masker, root, verdicts)
            cap = capture_code(root, put, exclude=[], credential=put.credential)
        return {f.path: store.read_blob(f.hash) or b"" for f in cap.info.files}

    first = capture(Masker())
    assert sorted(scanned) == ["db.py", "notes.txt", "train.py"] and b"hunter-2-pass" not in first["db.py"]
    scanned.clear()
    second = capture(Masker())
    assert scanned == ["db.py"] and second == first  # the clean ones are known by their digest
    third = capture(Masker({"swordfish-1234"}))  # a value this run knows: searched for in clean files too
    assert third["notes.txt"] == b"the team's shared word is ***\n"
    assert b"swordfish" not in db.read_bytes() and b"hunter" not in db.read_bytes()
