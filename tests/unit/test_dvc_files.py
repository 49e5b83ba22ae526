"""Reading DVC's own files at capture (`repro.facts.dvc`): which output holds a declared input, its hash
and remote; and the files as a hostile or careless hand leaves them, which never break a capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.facts.data import capture_data
from repro.facts.dvc import MAX_FILE_BYTES, dvc_sources
from repro.store.record import DvcSource

DIR_MD5 = "849835d274483dc683eb416d6e4f887d.dir"
FILE_MD5 = "401b30e3b8b5d629635a5c613cdb7919"


def _write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _repo(
    root: Path, config: str = "[core]\n    remote = store\n['remote \"store\"']\n    url = /r\n"
) -> Path:
    _write(root, ".dvc/config", config)
    _write(root, "data/a.csv", "1,2,0\n")
    _write(root, "data/sub/b.csv", "3,4,1\n")
    return root


def _dot_dvc(md5: str = DIR_MD5, path: str = "data", extra: str = "") -> str:
    return f"outs:\n- md5: {md5}\n  size: 12\n  nfiles: 2\n  hash: md5\n  path: {path}\n{extra}"


def test_a_dvc_added_folder_and_everything_inside_it(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _write(root, "data.dvc", _dot_dvc())
    expected = DvcSource("data.dvc", "data", "md5", DIR_MD5, "store", 12, 2)
    for rel in ("data", "data/sub", "data/sub/b.csv"):
        assert dvc_sources(root, rel) == [expected]
    assert dvc_sources(root, "elsewhere") == []


def test_capture_records_the_sources_beside_the_manifest(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _write(root, "data.dvc", _dot_dvc())
    (item,) = capture_data(["data"], root)
    assert item.count == 2 and [s.hash_value for s in item.dvc] == [DIR_MD5]


def test_a_file_a_legacy_file_an_etag_and_an_outs_own_remote(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _write(root, "data/a.csv.dvc", f"outs:\n- md5: {FILE_MD5}\n  path: a.csv\n  remote: cold\n")
    _write(root, "data/sub/b.csv.dvc", f"outs:\n- md5: {FILE_MD5}\n  size: 6\n  path: b.csv\n")
    _write(root, "big.dvc", "outs:\n- etag: '0x8DA1-abc'\n  path: big\n")
    (a,) = dvc_sources(root, "data/a.csv")
    assert (a.file, a.out, a.hash_name, a.remote, a.size) == ("data/a.csv.dvc", "data/a.csv", "md5-dos2unix",
                                                              "cold", None)  # fmt: skip
    (b,) = dvc_sources(root, "data/sub/b.csv")
    assert b.remote == "store" and b.size == 6  # the default remote
    assert [s.out for s in dvc_sources(root, "data")] == ["data/a.csv", "data/sub/b.csv"]  # outputs inside
    (big,) = dvc_sources(root, "big")
    assert (big.hash_name, big.hash_value) == ("etag", "0x8DA1-abc")


def test_the_local_config_names_the_default_remote_over_the_shared_one(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _write(root, ".dvc/config.local", "[core]\nremote = mine\n")
    _write(root, "data.dvc", _dot_dvc())
    assert dvc_sources(root, "data")[0].remote == "mine"
    _write(root, ".dvc/config.local", "")
    _write(root, ".dvc/config", "")
    assert dvc_sources(root, "data")[0].remote is None  # whoever replays: their default remote


def test_a_project_below_the_dvc_repository_root(tmp_path: Path) -> None:
    _write(tmp_path, ".dvc/config", "[core]\nremote = top\n")
    project = tmp_path / "proj"
    _write(project, "data/a.csv", "1\n")
    _write(project, "data.dvc", _dot_dvc())
    assert dvc_sources(project, "data")[0].remote == "top"


def test_dvc_lock_outputs_cached_ones_only(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _write(root, "dvc.lock", f"""schema: '2.0'
stages:
  prep:
    cmd: python prep.py
    deps:
    - path: raw
      md5: {FILE_MD5}
    outs:
    - path: data
      hash: md5
      md5: {DIR_MD5}
      size: 12
      nfiles: 2
    - path: metrics.json
      md5: {FILE_MD5}
      cache: false
  broken: 7
""")  # fmt: skip
    assert dvc_sources(root, "data") == [DvcSource("dvc.lock", "data", "md5", DIR_MD5, "store", 12, 2)]
    assert dvc_sources(root, "metrics.json") == []  # not cached: in no remote
    assert dvc_sources(root, "raw") == []  # a dependency, not an output


HOSTILE_DOT_DVC = [
    _dot_dvc(path="../../etc"),
    _dot_dvc(path="/etc"),
    _dot_dvc(path="data\\..\\x"),
    _dot_dvc(md5="../../../../etc/passwd"),
    _dot_dvc(md5="[1, 2]"),
    _dot_dvc(md5="ABCDEF"),
    _dot_dvc(extra="  remote: 'a b; rm -rf /'\n"),
    _dot_dvc(extra="  remote: --config=/x\n"),
    _dot_dvc(extra="  remote: [1]\n"),
    _dot_dvc().replace("size: 12", "size: -1"),
    _dot_dvc().replace("size: 12", "size: true"),
    _dot_dvc().replace("nfiles: 2", f"nfiles: {1 << 70}"),
    _dot_dvc().replace("hash: md5", "hash: md5\n  cache: no"),
    "outs: {path: data}\n",
    "outs:\n- 7\n- [data]\n- {path: 7, md5: x}\n",
    "just text\n",
    "- a\n- b\n",
    "outs: [\n",
    "a: &a [*a, *a]\n",
    "a: &a [1]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c]\n",
    "\0\xff not yaml",
    "[" * 5000 + "]" * 5000,
]


@pytest.mark.parametrize("text", HOSTILE_DOT_DVC)
def test_a_hostile_or_broken_dvc_file_is_left_out_never_raised(tmp_path: Path, text: str) -> None:
    root = _repo(tmp_path)
    _write(root, "data.dvc", text)
    _write(
        root,
        "dvc.lock",
        "stages:\n  s:\n    outs:\n" + "\n".join("    " + line for line in text.splitlines()),
    )
    assert dvc_sources(root, "data") == []
    (item,) = capture_data(["data"], root)
    assert item.dvc == [] and item.count == 2


def test_an_oversized_file_or_an_unreadable_config_is_not_read(tmp_path: Path) -> None:
    root = _repo(tmp_path, config="[core\nremote = = =\n\xff")
    _write(root, "data.dvc", _dot_dvc())
    assert dvc_sources(root, "data")[0].remote is None
    _write(root, "data.dvc", _dot_dvc() + "#" * MAX_FILE_BYTES)
    assert dvc_sources(root, "data") == []
    _write(root, "data.dvc", b"outs:\n- md5: \xff\xfe\n")
    assert dvc_sources(root, "data") == []


def test_what_repro_show_says_of_an_input_dvc_holds() -> None:
    from repro.rerun.inputs import DVC, InputSource

    named = InputSource("data", DVC, 3, 30, present=False, remote="store")
    assert named.describe() == "data (3 files): in the DVC remote `store`, fetched through DVC (absent here)"
    default = InputSource("data", DVC, 1, 30, present=True)
    said = "data (1 file): in the default DVC remote, fetched through DVC (the host's copy differs)"
    assert default.describe() == said


@pytest.mark.parametrize("host", ["as recorded", "changed, kept in the store"])
def test_a_replay_hashes_the_hosts_copy_of_a_dvc_input_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    """Whether DVC must fetch and where each input then comes from are judged on one hash of the
    host's copy: the data as recorded (no fetch, read here), or changed with every recorded file kept
    in the store (no fetch, placed from the store)."""
    from repro.config import Settings
    from repro.facts import data as facts_data
    from repro.rerun import inputs
    from repro.rerun.request import ReplayRequest
    from repro.store import datablobs
    from repro.store.record import Record
    from repro.store.runs import LoadedRun, Store
    from repro.store.treehash import hash_tree

    root = _repo(tmp_path / "proj")
    _write(root, "data.dvc", _dot_dvc())
    store = Store(root)
    store.ensure()
    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.data.inputs = capture_data(["data"], root, put_bytes=store.put_bytes)
    assert record.data.inputs[0].dvc  # DVC tracks it: a replay may fetch it
    if host != "as recorded":
        for entry in record.data.inputs[0].files:
            datablobs.put(root / entry.path, entry.hash, store.dir)
        _write(root, "data/a.csv", "9,9,9\n")
    calls: list[Path] = []

    def counted(path: Path, *args: object, **kwargs: object) -> object:
        calls.append(path)
        return hash_tree(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "hash_tree", counted)
    monkeypatch.setattr(facts_data, "hash_tree", counted)
    loaded = LoadedRun(record, store.dir, store.dir)
    notes: list[str] = []
    request = ReplayRequest(ref=record.id)
    data_root, choice = inputs.replay_data(request, loaded, Settings(), store, None, notes, lambda e: None)
    assert data_root == root.resolve() and calls == [data_root / "data"]
    kind = inputs.HERE if host == "as recorded" else inputs.STORE
    assert [s.kind for s in choice.sources] == [kind] and choice.drift is None
