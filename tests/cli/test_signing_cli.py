"""Signed capsules: `repro keygen`, `export --sign`, `verify --key/--require-signed`, and replay
refusing a capsule whose signature fails before anything is extracted or run.

One real `repro run` of a tiny torch-free training script on the local backend (a subprocess),
exported signed and unsigned; tampering rewrites the tar with one byte of the record changed
and SHA256SUMS recomputed, so only the signature can catch it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from repro.errors import ExitCode
from repro.store.runs import Store

TRAIN = """\
import argparse
import random
import time
from pathlib import Path

parser = argparse.ArgumentParser(description="a tiny linear model, trained by hand")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--save", default="model.txt")
args = parser.parse_args()
random.seed(1337)
w, b = random.random(), 0.0
points = [(x / 10, 3 * x / 10 + 1 + random.gauss(0, 0.01)) for x in range(20)]
Path("checkpoints").mkdir(exist_ok=True)
for epoch in range(args.epochs):
    start = time.perf_counter()
    random.shuffle(points)
    loss = 0.0
    for x, y in points:
        err = w * x + b - y
        loss += err * err
        w, b = w - args.lr * err * x, b - args.lr * err
    ms = (time.perf_counter() - start) * 1000 / len(points)
    print(f"epoch {epoch} loss {loss / len(points):.6f} | {ms:.2f} ms/batch")
    Path(f"checkpoints/epoch{epoch}.txt").write_text(f"{w!r} {b!r}")
Path(args.save).write_text(f"{w!r} {b!r}\\n")
"""


@dataclass
class Signed:
    root: Path
    run_id: str
    key: Path
    signed: Path
    unsigned: Path
    ed_key: Path  # Ed25519: the private key; its public key is ed_key.pub
    ed_signed: Path


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Signed:
    from tests.conftest import Project

    p = Project.init(tmp_path_factory.mktemp("signing") / "proj")
    root = p.root
    p.write(".gitignore", "outputs/\ncheckpoints/\nmodel.txt\n*.tar\n*.key\n")
    p.write("train.py", TRAIN)
    p.write("repro.yaml", "backend: local\nmode: strict\nseed: 3\n")
    p.commit("train")
    r = p.repro("run", "--json", "--", "python", "train.py", "--epochs", "3")
    assert r.code == 0, r.err
    run_id = json.loads(r.out)["id"]
    key = root / "team.key"
    assert p.repro("keygen", str(key)).code == 0
    signed, unsigned = root / "signed.tar", root / "unsigned.tar"
    assert p.repro("export", run_id, "--sign", str(key), "-o", str(signed)).code == 0
    assert p.repro("export", run_id, "-o", str(unsigned)).code == 0
    ed_key, ed_signed = root / "ed.key", root / "ed-signed.tar"
    assert p.repro("keygen", "--type", "ed25519", str(ed_key)).code == 0
    assert p.repro("export", run_id, "--sign", str(ed_key), "-o", str(ed_signed)).code == 0
    return Signed(root, run_id, key, signed, unsigned, ed_key, ed_signed)


def _members(tar: Path) -> dict[str, bytes]:
    with tarfile.open(tar) as t:
        return {m.name: t.extractfile(m).read() for m in t}  # type: ignore[union-attr]


def _tampered(src: Path, dest: Path) -> Path:
    """One byte of the record changed (`--epochs 3` → `4`), SHA256SUMS recomputed, SIGNATURE kept."""
    members = _members(src)
    record = members["capsule.yaml"]
    at = record.index(b"- '3'") if b"- '3'" in record else record.index(b"- 3\n")
    changed = bytearray(record)
    changed[at + record[at:].index(b"3")] = ord("4")
    members["capsule.yaml"] = bytes(changed)
    return _resealed(members, dest)


def _resealed(members: dict[str, bytes], dest: Path) -> Path:
    """A tar of ``members`` with SHA256SUMS recomputed as an attacker would; SIGNATURE left as it was."""
    sums = "".join(
        f"{hashlib.sha256(data).hexdigest()}  {name}\n"
        for name, data in members.items()
        if name not in ("SHA256SUMS", "SIGNATURE")
    )
    members = {**members, "SHA256SUMS": sums.encode()}
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return dest


def test_keygen_writes_a_private_key_and_never_overwrites(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert stat.S_IMODE(made.key.stat().st_mode) == 0o600 and made.key.stat().st_size == 32
    key_id = hashlib.sha256(made.key.read_bytes()).hexdigest()[:16]
    fresh = cli("keygen", str(tmp_path / "other.key"), cwd=tmp_path)
    assert fresh.code == 0 and fresh.out.startswith("key ") and key_id not in fresh.out
    before = made.key.read_bytes()
    again = cli("keygen", str(made.key), cwd=tmp_path)
    assert again.code == ExitCode.USAGE and "never overwritten" in again.err
    assert made.key.read_bytes() == before and "Traceback" not in again.err


def test_signing_adds_one_member_and_changes_no_other(made: Signed) -> None:
    signed, unsigned = _members(made.signed), _members(made.unsigned)
    assert set(signed) - set(unsigned) == {"SIGNATURE"}
    assert all(signed[name] == data for name, data in unsigned.items())
    body = json.loads(signed["SIGNATURE"])
    assert body["algorithm"] == "hmac-sha256"
    assert body["key_id"] == hashlib.sha256(made.key.read_bytes()).hexdigest()[:16]
    assert b"SIGNATURE" not in signed["SHA256SUMS"]


def test_verify_shows_and_checks_the_signature(cli, made: Signed) -> None:  # type: ignore[no-untyped-def]
    key_id = json.loads(_members(made.signed)["SIGNATURE"])["key_id"]
    shown = cli("verify", str(made.signed), cwd=made.root)
    assert shown.code == 0 and f"signed with key {key_id} (not checked" in shown.out
    assert cli("verify", str(made.unsigned), cwd=made.root).out.splitlines()[-1] == "not signed"
    checked = cli(
        "verify", str(made.signed), "--key", str(made.key), "--require-signed", "--json", cwd=made.root
    )
    assert checked.code == 0, checked.err
    result = json.loads(checked.out)
    assert (result["signed"], result["key_id"], result["signature_checked"]) == (True, key_id, True)


def test_a_member_changed_after_signing_fails_only_on_the_signature(  # type: ignore[no-untyped-def]
    cli, made: Signed, tmp_path: Path
) -> None:
    bad = _tampered(made.signed, tmp_path / "bad.tar")
    assert cli("verify", str(bad), cwd=made.root).code == 0  # consistent: the sums were recomputed
    r = cli("verify", str(bad), "--key", str(made.key), cwd=made.root)
    key_id = json.loads(_members(made.signed)["SIGNATURE"])["key_id"]
    assert r.code == ExitCode.CAPSULE_INVALID and f"bad signature for key {key_id}" in r.err
    assert len(r.err.strip().splitlines()) <= 2 and "Traceback" not in r.err


def test_a_wrong_key_and_an_unsigned_capsule_fail(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other.key"
    assert cli("keygen", str(other), cwd=tmp_path).code == 0
    wrong = cli("verify", str(made.signed), "--key", str(other), cwd=made.root)
    assert wrong.code == ExitCode.CAPSULE_INVALID and "not with the key given" in wrong.err
    unsigned = cli("verify", str(made.unsigned), "--key", str(made.key), "--require-signed", cwd=made.root)
    assert unsigned.code == ExitCode.CAPSULE_INVALID and "not signed" in unsigned.err
    no_key = cli("verify", str(made.unsigned), "--require-signed", cwd=made.root)
    assert no_key.code == ExitCode.USAGE and "--key" in no_key.err


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no key file"), (b"short", "5 bytes, a key is 32"), (b"x" * 33, "more than 32 bytes")],
)
def test_a_bad_key_file_is_a_usage_error(cli, made: Signed, tmp_path: Path, content, expected) -> None:  # type: ignore[no-untyped-def]
    key = tmp_path / "k"
    if content is not None:
        key.write_bytes(content)
    out = str(tmp_path / "x.tar")
    for args in (
        ("verify", str(made.signed), "--key", str(key)),
        ("export", made.run_id, "--sign", str(key), "-o", out),
    ):
        r = cli(*args, cwd=made.root)
        assert r.code == ExitCode.USAGE and expected in r.err, (args, r.err)
        assert "repro keygen" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "x.tar").exists()


def test_replay_refuses_a_tampered_capsule_before_extracting_and_runs_a_good_one(  # type: ignore[no-untyped-def]
    cli, made: Signed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    runs = set(Store(made.root).run_ids())
    bad = _tampered(made.signed, tmp_path / "bad.tar")
    r = cli("replay", str(bad), "--require-signed", "--key", str(made.key), cwd=made.root)
    assert r.code == ExitCode.CAPSULE_INVALID and "bad signature" in r.err
    assert list(scratch.iterdir()) == [] and set(Store(made.root).run_ids()) == runs
    unsigned = cli("replay", str(made.unsigned), "--require-signed", "--key", str(made.key), cwd=made.root)
    assert unsigned.code == ExitCode.CAPSULE_INVALID and "not signed" in unsigned.err
    assert set(Store(made.root).run_ids()) == runs
    good = cli(
        "replay", str(made.signed), "--require-signed", "--key", str(made.key), "--json", cwd=made.root
    )
    assert good.code == 0, good.err
    assert json.loads(good.out)["status"] == "identical" and "signature checked" in good.err


def test_the_signature_covers_a_carried_image(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`--with-image`: SHA256SUMS names the image member, so the signature seals it too."""
    import functools

    from repro.store import signing
    from repro.store.capsule import IMAGE_MEMBER
    from repro.store.record import ImageInfo, Record
    from repro.store.tarwriter import pack

    store = Store(tmp_path)
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    record.deps.image = ImageInfo(id="sha256:" + "a" * 64, tag="repro-env:" + "b" * 24)
    store.seal(record, store.begin_run(record.id, record.command.argv))
    archive = tmp_path / "image.tar"
    archive.write_bytes(b"layers" * 1000)
    key = signing.new_key(tmp_path / "k.key")
    tar = pack(record, store.blob_path, tmp_path / "run.tar", archive, functools.partial(signing.sign, key))
    assert cli("verify", str(tar), "--key", str(key.path), "--require-signed", cwd=tmp_path).code == 0
    members = _members(tar)
    assert IMAGE_MEMBER in members["SHA256SUMS"].decode()
    members[IMAGE_MEMBER] = b"LAYERS" + members[IMAGE_MEMBER][6:]
    bad = _resealed(members, tmp_path / "bad.tar")
    assert cli("verify", str(bad), cwd=tmp_path).code == 0  # consistent: only the signature can tell
    r = cli("verify", str(bad), "--key", str(key.path), cwd=tmp_path)
    assert r.code == ExitCode.CAPSULE_INVALID and "bad signature" in r.err


def test_signing_flags_apply_to_capsule_files_only(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    replay = cli("replay", made.run_id, "--key", str(made.key), cwd=made.root)
    assert replay.code == ExitCode.USAGE and "is a run in the store" in replay.err
    verify = cli("verify", made.run_id, "--key", str(made.key), cwd=made.root)
    assert verify.code == ExitCode.USAGE and "not a run in the store" in verify.err
    slurm = cli(
        "export",
        made.run_id,
        "--as",
        "slurm",
        "--sign",
        str(made.key),
        "-o",
        str(tmp_path / "j"),
        cwd=made.root,
    )
    assert slurm.code == ExitCode.USAGE and "--sign applies to capsules" in slurm.err


def test_repro_signing_key_signs_exports(  # type: ignore[no-untyped-def]
    cli, made: Signed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_SIGNING_KEY", str(made.key))
    r = cli("export", made.run_id, "-o", str(tmp_path / "env.tar"), cwd=made.root)
    assert r.code == 0 and "signed with key" in r.out
    assert (tmp_path / "env.tar").read_bytes() == made.signed.read_bytes()  # same key, same bytes


def test_check_against_a_golden_capsule_checks_its_signature(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = set(Store(made.root).run_ids())
    bad = _tampered(made.signed, tmp_path / "bad.tar")
    key = ("--key", str(made.key), "--require-signed")
    r = cli("check", "--against", str(bad), *key, cwd=made.root)
    assert r.code == ExitCode.CAPSULE_INVALID and "bad signature" in r.err
    assert set(Store(made.root).run_ids()) == runs
    good = cli("check", "--against", str(made.signed), *key, "--json", cwd=made.root)
    assert good.code == 0, good.err
    no_capsule = cli("check", *key, "--", "python", "train.py", cwd=made.root)
    assert no_capsule.code == ExitCode.USAGE and "--against" in no_capsule.err


def _pub(made: Signed) -> str:
    return str(made.ed_key) + ".pub"


def test_keygen_ed25519_writes_a_private_key_and_its_public_half(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    assert stat.S_IMODE(made.ed_key.stat().st_mode) == 0o600
    private = serialization.load_pem_private_key(made.ed_key.read_bytes(), None)
    public = serialization.load_pem_public_key(Path(_pub(made)).read_bytes())
    assert isinstance(private, ed25519.Ed25519PrivateKey) and isinstance(public, ed25519.Ed25519PublicKey)
    assert private.public_key().public_bytes_raw() == public.public_bytes_raw()
    key_id = hashlib.sha256(public.public_bytes_raw()).hexdigest()[:16]
    body = json.loads(_members(made.ed_signed)["SIGNATURE"])
    assert (body["algorithm"], body["key_id"], body["signs"]) == ("ed25519", key_id, "SHA256SUMS")
    # an independent check of the member: the public key over the exact SHA256SUMS bytes
    public.verify(base64.b64decode(body["signature"]), _members(made.ed_signed)["SHA256SUMS"])
    fresh = cli("keygen", "--type", "ed25519", str(tmp_path / "k"), cwd=tmp_path)
    assert fresh.code == 0 and str(tmp_path / "k.pub") in fresh.out and key_id not in fresh.out
    (tmp_path / "taken.pub").write_text("mine")
    again = cli("keygen", "--type", "ed25519", str(tmp_path / "taken"), cwd=tmp_path)
    assert again.code == ExitCode.USAGE and "never overwritten" in again.err
    assert not (tmp_path / "taken").exists() and (tmp_path / "taken.pub").read_text() == "mine"


def test_an_ed25519_capsule_verifies_with_the_public_key_alone(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    alone = tmp_path / "only" / "team.pub"  # the public key, away from its private half
    alone.parent.mkdir()
    alone.write_bytes(Path(_pub(made)).read_bytes())
    r = cli("verify", str(made.ed_signed), "--key", str(alone), "--require-signed", "--json", cwd=made.root)
    assert r.code == 0, r.err
    result = json.loads(r.out)
    assert (result["signed"], result["signature_algorithm"], result["signature_checked"]) == (
        True,
        "ed25519",
        True,
    )
    text = cli("verify", str(made.ed_signed), "--key", str(alone), cwd=made.root)
    assert "signed with ed25519 key" in text.out and "checked with its public key" in text.out
    unchecked = cli("verify", str(made.ed_signed), cwd=made.root)
    assert unchecked.code == 0 and "(not checked: pass --key PUBFILE)" in unchecked.out


def test_an_ed25519_capsule_fails_after_any_byte_changes(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    members = _members(made.ed_signed)
    bad = _tampered(made.ed_signed, tmp_path / "bad.tar")
    r = cli("verify", str(bad), "--key", _pub(made), cwd=made.root)
    assert r.code == ExitCode.CAPSULE_INVALID and "bad signature for ed25519 key" in r.err
    assert len(r.err.strip().splitlines()) <= 2 and "Traceback" not in r.err
    for name in ("SHA256SUMS", "SIGNATURE"):  # a flipped byte in the sums or the signature itself
        data = bytearray(members[name])
        at = len(data) // 2 if name == "SHA256SUMS" else data.index(b'"signature": "') + 20
        data[at] = ord("A") if data[at] != ord("A") else ord("B")
        path = tmp_path / f"flip-{name}.tar"
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
            for member, content in {**members, name: bytes(data)}.items():
                info = tarfile.TarInfo(member)
                info.size = len(content)
                t.addfile(info, io.BytesIO(content))
        flipped = cli("verify", str(path), "--key", _pub(made), cwd=made.root)
        assert flipped.code == ExitCode.CAPSULE_INVALID and "Traceback" not in flipped.err, (
            name,
            flipped.err,
        )


def test_a_public_key_never_signs_and_kinds_do_not_mix(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.tar"
    r = cli("export", made.run_id, "--sign", _pub(made), "-o", str(out), cwd=made.root)
    assert r.code == ExitCode.USAGE and "can never make one" in r.err and "without .pub" in r.err
    assert not out.exists()
    hmac_on_ed = cli("verify", str(made.ed_signed), "--key", str(made.key), cwd=made.root)
    assert hmac_on_ed.code == ExitCode.CAPSULE_INVALID and "not with the key given" in hmac_on_ed.err
    ed_on_hmac = cli("verify", str(made.signed), "--key", _pub(made), "--require-signed", cwd=made.root)
    assert ed_on_hmac.code == ExitCode.CAPSULE_INVALID and "not with the key given" in ed_on_hmac.err
    with_private = cli("verify", str(made.ed_signed), "--key", str(made.ed_key), cwd=made.root)
    assert with_private.code == 0 and "signature checked" in with_private.out


def test_replay_and_check_take_the_public_key(cli, made: Signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = set(Store(made.root).run_ids())
    bad = _tampered(made.ed_signed, tmp_path / "bad.tar")
    key = ("--key", _pub(made), "--require-signed")
    r = cli("replay", str(bad), *key, cwd=made.root)
    assert r.code == ExitCode.CAPSULE_INVALID and "bad signature" in r.err
    c = cli("check", "--against", str(bad), *key, cwd=made.root)
    assert c.code == ExitCode.CAPSULE_INVALID and "bad signature" in c.err
    assert set(Store(made.root).run_ids()) == runs
    good = cli("replay", str(made.ed_signed), *key, "--json", cwd=made.root)
    assert good.code == 0, good.err
    assert json.loads(good.out)["status"] == "identical" and "signature checked" in good.err
