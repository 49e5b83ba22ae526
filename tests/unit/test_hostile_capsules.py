"""Hostile capsules: consistent SHA256SUMS around records and blobs that try to escape or to cost.

Each capsule is built the way an attacker would: take a genuine export, change what the
record or a blob says, recompute every checksum. Verify, show and import must refuse with
exit 6 naming the field, never write outside their scratch directory, and stay cheap.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from repro.errors import CapsuleInvalid, ExitCode
from repro.facts.determinism import allowed_env, plan
from repro.store import limits as capsule_rules
from repro.store.capsule import RECORD_NAME, SUMS_NAME, blob_member
from repro.store.hashing import hash_bytes
from repro.store.record import CodeInfo, CommandInfo, DataInput, DvcSource, FileEntry, Record
from repro.store.runs import Store
from repro.store.tarwriter import pack
from repro.store.verify import verify_tar
from tests import forging

CODE = b"print('genuine training code')\n"
EVIL = b"import os; os.system('touch /tmp/pwned')\n"


def _genuine(tmp_path: Path) -> tuple[Path, Record]:
    blobs = tmp_path / "src-blobs"
    digest = hash_bytes(CODE)
    path = blobs / blob_member(digest)
    path.parent.mkdir(parents=True)
    path.write_bytes(CODE)
    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.command = CommandInfo(argv=["python", "train.py"], cwd=".")
    record.code = CodeInfo(kind="snapshot", files=[FileEntry("train.py", len(CODE), digest, True)])
    record.data.inputs = [DataInput("data", "d" * 32, 3, [FileEntry("data/a.csv", 3, "e" * 32)])]
    record.data.inputs[0].dvc = [DvcSource("data.dvc", "data", "md5", "a" * 32 + ".dir", "store", 3, 1)]
    record.results.output_roots = ["outputs"]
    record.results.outputs = [FileEntry("outputs/model.pt", 10, "f" * 32)]
    record.determinism = plan("strict", 1, "avx2")
    tar = pack(record, lambda d: blobs / blob_member(d), tmp_path / "genuine.tar")
    return tar, record


def _forge(tar: Path, dest: Path, change: Callable[[dict[str, bytes]], None]) -> Path:
    """Rewrite a capsule's members and recompute SHA256SUMS, as anyone can."""
    found = forging.members(tar)
    found.pop(SUMS_NAME)
    change(found)
    return forging.write(dest, found)


def _edit_record(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, bytes]], None]:
    def change(members: dict[str, bytes]) -> None:
        data = yaml.safe_load(members[RECORD_NAME])
        edit(data)
        members[RECORD_NAME] = yaml.safe_dump(data, sort_keys=False).encode()

    return change


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


HOSTILE_FIELDS = [
    ("id", "../../../../x"),
    ("id", "/tmp/abs-id"),
    ("parent", "../up"),
    ("resumed_from", "../../elsewhere/run.tar"),
    ("resumed_from", "/tmp/other-capsule.tar"),
    ("command.cwd", "../../../../x"),
    ("command.cwd", "/etc"),
    ("results.output_roots.0", "/some/host/dir"),
    ("results.output_roots.0", "outputs/../../escape"),
    ("data.inputs.0.path", "/etc/hostname"),
    ("data.inputs.0.files.0.path", "../etc/passwd"),
    ("code.files.0.path", "../../outside.py"),
    ("code.files.0.path", "a/./b.py"),
    ("results.outputs.0.path", "/root/.ssh/authorized_keys"),
    ("deps.lockfile", "/etc/shadow"),
    ("code.subdir", "../.."),
    ("command.nproc_per_node", 100000),
    ("data.inputs.0.dvc.0.out", "../../home"),
    ("data.inputs.0.dvc.0.file", "/etc/data.dvc"),
    ("data.inputs.0.dvc.0.hash_value", "../../../../etc/passwd"),
    ("data.inputs.0.dvc.0.hash_name", "sha1"),
    ("data.inputs.0.dvc.0.remote", "store; rm -rf /"),
    ("data.inputs.0.dvc.0.remote", "--config=/tmp/x"),
    ("data.inputs.0.dvc.0.nfiles", -1),
    ("data.inputs.0.dvc.0.size", 1 << 70),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE_FIELDS)
def test_a_path_field_outside_its_root_is_refused_naming_the_field(
    tmp_path: Path, field: str, value: str
) -> None:
    tar, _ = _genuine(tmp_path)
    bad = _forge(tar, tmp_path / "bad.tar", _edit_record(_set(field, value)))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(CapsuleInvalid) as caught:
        verify_tar(bad, extract_to=scratch)
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID
    named = re.sub(r"\.(\d+)", r"[\1]", field)  # results.output_roots.0 → results.output_roots[0]
    assert f"field {named} " in str(caught.value), str(caught.value)
    assert not (tmp_path / "x").exists() and not (scratch / RECORD_NAME).exists()


def test_malformed_types_that_pass_their_checksums_exit_6(tmp_path: Path) -> None:
    tar, _ = _genuine(tmp_path)
    for i, (field, value) in enumerate(
        [("command.argv", "rm -rf /"), ("results.outputs.0.size", "huge"), ("code", [1, 2]),
         ("command.cwd", 7), ("seeds.master", {"a": 1}), ("results.logs", {"stdout": "../../x"}),
         ("determinism.source_date_epoch", "0; rm -rf /"), ("data.inputs.0.dvc.0.hash_value", ["a" * 32]),
         ("data.inputs.0.dvc.0.size", True), ("data.inputs.0.dvc", {"out": "data"})]
    ):  # fmt: skip
        bad = _forge(tar, tmp_path / f"bad{i}.tar", _edit_record(_set(field, value)))
        with pytest.raises(CapsuleInvalid):
            verify_tar(bad)


def test_a_replaced_blob_under_its_kept_name_is_caught_by_verify_and_import(tmp_path: Path) -> None:
    tar, record = _genuine(tmp_path)
    member = blob_member(record.code.files[0].hash)

    def swap(members: dict[str, bytes]) -> None:
        members[member] = EVIL

    bad = _forge(tar, tmp_path / "swapped.tar", swap)
    with pytest.raises(CapsuleInvalid, match="content-address name"):
        verify_tar(bad)

    # A store already poisoned under that name: import re-hashes and puts the true bytes back.
    store = Store(tmp_path / "proj")
    store.ensure()
    poisoned = store.blob_path(record.code.files[0].hash)
    poisoned.parent.mkdir(parents=True, exist_ok=True)
    poisoned.write_bytes(EVIL)
    loaded = store.import_run(store.open_capsule(tar))
    assert poisoned.read_bytes() == CODE
    assert loaded.record.id == record.id


def test_a_forged_blob_name_outside_the_digest_form_is_refused(tmp_path: Path) -> None:
    tar, _ = _genuine(tmp_path)

    def rename(members: dict[str, bytes]) -> None:
        members["blobs/zz/zz-not-a-digest"] = EVIL
        data = yaml.safe_load(members[RECORD_NAME])
        data["code"]["files"][0]["hash"] = "zz-not-a-digest"
        members[RECORD_NAME] = yaml.safe_dump(data, sort_keys=False).encode()

    with pytest.raises(CapsuleInvalid, match="not a content digest"):
        verify_tar(_forge(tar, tmp_path / "renamed.tar", rename))


def test_a_billion_laughs_record_is_refused_at_once(tmp_path: Path) -> None:
    tar, _ = _genuine(tmp_path)
    lol = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev = chr(ord("a") + i - 1)
        lol.append(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{','.join(['*' + prev] * 9)}]")
    bomb = ("format: repro.capsule/v1\nid: x\ncreated: now\n" + "\n".join(lol) + "\n").encode()

    def plant(members: dict[str, bytes]) -> None:
        members[RECORD_NAME] = bomb

    start = time.monotonic()
    with pytest.raises(CapsuleInvalid, match="aliases"):
        verify_tar(_forge(tar, tmp_path / "bomb.tar", plant))
    assert time.monotonic() - start < 2


def test_a_deeply_nested_record_is_refused(tmp_path: Path) -> None:
    tar, _ = _genuine(tmp_path)
    deep = ("format: repro.capsule/v1\nid: x\ncreated: now\nwarnings: " + "[" * 5000 + "]" * 5000).encode()

    def plant(members: dict[str, bytes]) -> None:
        members[RECORD_NAME] = deep

    with pytest.raises(CapsuleInvalid, match="deeper|nests"):
        verify_tar(_forge(tar, tmp_path / "deep.tar", plant))


def test_member_count_and_expansion_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tar, _ = _genuine(tmp_path)
    monkeypatch.setattr(capsule_rules, "MAX_MEMBERS", 2)
    with pytest.raises(CapsuleInvalid, match="more than 2 members"):
        verify_tar(tar)
    monkeypatch.setattr(capsule_rules, "MAX_MEMBERS", 100)
    # A small gzip that expands far beyond its size: refused before it is all read.
    monkeypatch.setattr(capsule_rules, "MAX_UNPACKED_BYTES", 1 << 20)
    gz = tmp_path / "expands.tar.gz"
    with tarfile.open(gz, "w:gz") as out:
        info = tarfile.TarInfo("blobs/00/zeros")
        info.size = 16 << 20
        out.addfile(info, io.BytesIO(bytes(info.size)))
    assert gz.stat().st_size < 1 << 20
    with pytest.raises(CapsuleInvalid, match="expands to more than"):
        verify_tar(gz)


def test_the_environment_a_capsule_asks_for_is_filtered() -> None:
    mode = plan("strict", 1, "avx2").env
    kept, dropped = allowed_env(
        {**mode, "LD_PRELOAD": "/tmp/evil.so", "PYTHONSTARTUP": "/tmp/x.py", "OMP_NUM_THREADS": "1;rm"}
    )
    assert dropped == ["LD_PRELOAD", "OMP_NUM_THREADS", "PYTHONSTARTUP"]
    assert kept == {k: v for k, v in mode.items() if k != "OMP_NUM_THREADS"}


def test_a_clock_out_of_range_in_a_capsule_is_never_set(tmp_path: Path) -> None:
    from repro.facts.determinism import run_environment

    tar, _ = _genuine(tmp_path)
    bad = _forge(tar, tmp_path / "bad.tar", _edit_record(_set("determinism.source_date_epoch", 10**30)))
    record = verify_tar(bad).record
    assert record.determinism.source_date_epoch == 10**30
    assert "SOURCE_DATE_EPOCH" not in run_environment(record)  # a value tools that read it choke on


def test_show_and_verify_of_a_capsule_leave_no_temporary_copy(tmp_path: Path) -> None:
    tar, _ = _genuine(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp), "PATH": "/usr/bin:/bin"}
    for args in (["show", str(tar)], ["verify", str(tar)], ["show", str(tmp_path / "missing.tar")]):
        subprocess.run([sys.executable, "-m", "repro", *args], cwd=tmp_path, env=env, capture_output=True)
    assert list(temp.iterdir()) == []
    bad = _forge(tar, tmp_path / "bad.tar", _edit_record(_set("command.cwd", "../x")))
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "show", str(bad)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 6 and "command.cwd" in proc.stderr and "Traceback" not in proc.stderr
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\n", bytes(range(256)) * 8, b""])
def test_a_file_that_is_not_a_tar_is_named_as_such(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "capsule.tar"
    path.write_bytes(content)
    with pytest.raises(CapsuleInvalid, match=r"^capsule.tar is not a capsule: not a tar archive$") as caught:
        verify_tar(path)
    assert caught.value.hint and "repro export" in caught.value.hint


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        (json.dumps([["outputs/a", 576, "ab" * 16, True, None]] * 3000), False),  # a list blob's rows
        (json.dumps([["a", 1]] * 3000 + [[{"k": "[" * 70}]]), False),  # brackets in a string nest nothing
        (json.dumps([["a", 1]] * 3000 + [[[[1]]]]), False),
        (json.dumps([["a", 1]] * 3000 + ["x" if i else [] for i in range(2)]), False),
        (json.dumps([["a", 1]] * 3000 + [{"k": [[[]] * 2]}]), False),  # empty at the bound: nothing held
        (json.dumps([["a", 1]] * 3000 + [{"k": [[[0]]]}]), True),  # one row past the bound, at the end
    ],
)
def test_the_depth_bound_walks_wide_lists_to_the_last_row(text: str, deep: bool) -> None:
    from repro.runtime import contract

    assert contract._deeper_than(json.loads(text), 4) is deep


_DEEP = "[" * 100_000 + "]" * 100_000  # a C parser's recursion, not just a walk's
_NESTED = "[" * 200 + "]" * 200  # parses, and nests past any bound a reader should walk


@pytest.mark.parametrize("deep", [_DEEP, _NESTED])
def test_a_deeply_nested_row_is_malformed_never_a_recursion_error(deep: str) -> None:
    from repro.collect import harvest
    from repro.compare import dataorder, ops, trace
    from repro.runtime import contract
    from repro.store import dsse
    from repro.store.recordio import decode_entries

    rows = {
        ops.parse: '{"step": 0, "deep": %s}\n',
        trace.parse: '{"params": {"w": %s}}\n',
        dataorder.parse: '{"loader": 0, "batch": %s}\n',
        contract.metric_rows: '{"name": "loss", "value": %s}\n',
    }
    for parse, row in rows.items():
        assert parse(row % deep) == [], parse
    assert harvest.file_rows(deep, ".json") == []
    with pytest.raises(ValueError, match="deeper than"):
        contract.parse_json(deep)
    with pytest.raises(CapsuleInvalid, match="malformed"):
        decode_entries(deep.encode(), "code.files")
    with pytest.raises(CapsuleInvalid, match="not valid JSON"):
        dsse.json_object(('{"a": ' + deep + "}").encode(), "ATTESTATION.intoto.jsonl")
    assert contract.parse_json("[" * 60 + "]" * 60) is not None  # shallow enough: read


def test_a_compressed_capsule_is_bounded_by_its_expansion(tmp_path: Path) -> None:
    """A .tar.gz of a few hundred KB whose stdout blob expands to 64 MiB is refused, quickly."""
    tar, record = _genuine(tmp_path)
    log = b"epoch 1 loss 0.5\n" * ((64 << 20) // 17)
    digest = hash_bytes(log)
    members = forging.members(tar)
    members[blob_member(digest)] = log
    raw = yaml.safe_load(members[RECORD_NAME])
    raw["results"]["logs"] = {"stdout": digest}
    members[RECORD_NAME] = yaml.safe_dump(raw, sort_keys=False).encode()
    members.pop(SUMS_NAME)
    plain = forging.write(tmp_path / "big.tar", members)
    gz = tmp_path / "big.tar.gz"
    with gz.open("wb") as out:
        subprocess.run(["gzip", "-9", "-c", str(plain)], stdout=out, check=True)
    assert gz.stat().st_size < 1 << 20
    with pytest.raises(CapsuleInvalid, match="expands to more than") as caught:
        verify_tar(gz)
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID
    verify_tar(plain)  # the same bytes uncompressed: as large as they say, read in full


def test_a_log_is_compared_up_to_a_named_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repro.rerun.sides import of_run

    store = Store(tmp_path)
    record = Record(id="20260101-000000-cccc", created="2026-01-01T00:00:00+00:00")
    record.results.logs = {"stdout": store.put_bytes(b"epoch 0 loss 0.5\n" * 10_000)}
    store.seal(record, store.begin_run(record.id, record.command.argv))
    monkeypatch.setattr(capsule_rules, "MAX_COMPARED_LOG_BYTES", 1000)
    read = of_run(store.load_run(record.id))
    assert read.stdout == "epoch 0 loss 0.5\n" * (1000 // 17)  # the whole lines within the limit
    assert read.cut == ["stdout was cut at 0.000953674 MiB: nothing past it was read or compared"]


def test_a_resumed_run_s_chain_is_read_from_the_store_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``resumed_from`` names a run of the store: a capsule file of that name beside the replay is
    never opened (the host opens no path a record names)."""
    from repro.rerun.sides import resumed_note
    from repro.resume import chain

    store = Store(tmp_path / "proj")
    store.ensure()
    tar, _ = _genuine(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.tar").write_bytes(tar.read_bytes())  # a plain name that is also a file here
    record = Record(id="20260101-000000-dddd", created="2026-01-01T00:00:00+00:00", resumed_from="run.tar")

    def never(*args: object) -> None:
        raise AssertionError("a capsule file was opened")

    monkeypatch.setattr(Store, "open_capsule", never)
    assert "run.tar → 20260101-000000-dddd" in resumed_note(store, record)
    assert chain(store, record) == [record]


def test_a_path_longer_than_a_file_system_takes_is_refused(tmp_path: Path) -> None:
    """A name of 4 MiB (or one part over 255 bytes) could never be restored: refused, shown short."""
    assert capsule_rules.is_safe_relpath("a" * 255 + "/" + "b" * 255)
    assert not capsule_rules.is_safe_relpath("a" * 256)
    assert not capsule_rules.is_safe_relpath("/".join(["a" * 200] * 30))
    tar, _ = _genuine(tmp_path)

    def long_path(data: dict[str, Any]) -> None:
        data["code"]["files"][0]["path"] = "A" * (4 << 20)

    forged = _forge(tar, tmp_path / "long.tar", _edit_record(long_path))
    with pytest.raises(CapsuleInvalid, match=r"code\.files\[0\]\.path") as caught:
        verify_tar(forged)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("command.launch[0]", lambda d: d["command"].update(launch=["python\0", "train.py"])),
        ("command.argv[1]", lambda d: d["command"].update(argv=["python", "train.py\0--x"])),
        ("env.variables.LANG", lambda d: d.setdefault("env", {}).update(variables={"LANG": "C\0"})),
    ],
)
def test_a_nul_in_a_command_or_environment_is_refused(
    tmp_path: Path, where: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    """No process takes a NUL in its arguments or environment: refused up front (it crashed a replay
    with `embedded null byte`)."""
    tar, _ = _genuine(tmp_path)
    forged = _forge(tar, tmp_path / "nul.tar", _edit_record(edit))
    with pytest.raises(CapsuleInvalid, match=re.escape(f"capsule field {where} holds a NUL")) as caught:
        verify_tar(forged)
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID


def test_a_record_naming_more_output_directories_than_a_process_can_take_is_refused(tmp_path: Path) -> None:
    """200,000 copies of one output directory reach the process in one environment variable, which no
    kernel takes (`Argument list too long` failed a replay): refused up front."""
    tar, _ = _genuine(tmp_path)

    def many(data: dict[str, Any]) -> None:
        data["results"]["output_roots"] = ["outputs"] * 200_000

    forged = _forge(tar, tmp_path / "roots.tar", _edit_record(many))
    with pytest.raises(
        CapsuleInvalid, match=r"results\.output_roots names 200000 output directories"
    ) as caught:
        verify_tar(forged)
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID


@pytest.mark.parametrize(
    ("section", "field"), [("code", "kind"), ("", "kind"), ("deps", "variant"), ("results", "status")]
)
def test_a_closed_set_field_reads_any_string_and_refuses_other_values(section: str, field: str) -> None:
    """The record's closed sets (Literal types: its kind, code.kind, deps.variant, results.status, a
    series' source): a value outside the set reads as it did when they were plain strings (shown as
    written, a newer repro's value), one that is no string is malformed."""
    data = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00").to_dict()
    (data[section] if section else data)[field] = "future_value"
    data["results"]["series"] = [{"name": "loss", "source": "a future source"}]
    record = Record.from_dict(data)
    shown = record.to_dict()
    assert (shown[section] if section else shown)[field] == "future_value"
    assert shown["results"]["series"][0]["source"] == "a future source"
    (data[section] if section else data)[field] = {"nested": "mapping"}
    with pytest.raises(CapsuleInvalid, match="malformed: expected str, got dict"):
        Record.from_dict(data)
