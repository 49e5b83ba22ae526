"""`repro attest` and `verify-attestation`: the attestation of a real training run.

One real `repro run` of a torch training script (argparse, DataLoader workers, tqdm-style
progress, checkpoints/ and model.pt in the working directory) on the local backend, and one real
replay of it. The attestation is read field by field as in-toto Statement v1 + SLSA provenance
v1; its DSSE signature is checked with `cryptography` directly and with `openssl pkeyutl`, over
the PAE bytes built here; hostile attestations are forged as an attacker would.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from repro.errors import ExitCode
from tests.conftest import Cli, Project, git

TRAIN = '''\
"""Train a small classifier on data/points.csv; keeps checkpoints/epoch_N.pt and model.pt."""

import argparse
import os
import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser(description="toy classifier")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rows = [line.split(",") for line in Path("data/points.csv").read_text().split()]
    x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
    y = torch.tensor([int(c) for _, _, c in rows])
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    os.makedirs("checkpoints", exist_ok=True)
    for epoch in range(args.epochs):
        for i, (xb, yb) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sys.stderr.write(f"\\repoch {epoch}: {i + 1}/{len(loader)} [loss={loss.item():.4f}]")
        sys.stderr.write("\\n")
        torch.save(model.state_dict(), f"checkpoints/epoch_{epoch}.pt")
    torch.save(model.state_dict(), "model.pt")
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
'''


@dataclass
class Attested:
    root: Path
    run_id: str
    replay_id: str
    key: Path  # Ed25519 private key; key.pub beside it
    pub: Path
    file: Path  # model.intoto.jsonl, signed
    capsule: Path  # `repro export RUN`: its SHA256SUMS is what the attestation names


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Attested:
    p = Project.init(tmp_path_factory.mktemp("attest") / "proj")
    root = p.root
    p.write(".gitignore", "checkpoints/\nmodel.pt\n*.tar\n*.key\n*.pub\n*.jsonl\n")
    p.write("train.py", TRAIN)
    p.points()
    p.lock_torch()
    p.write("repro.yaml", "backend: local\nmode: strict\nseed: 7\ndata: [data]\n")
    p.commit("train")
    r = p.repro("run", "--json", "--", "python", "train.py", "--epochs", "2", "--lr", "0.1")
    assert r.code == 0, r.err
    run_id = json.loads(r.out)["id"]
    replay = p.repro("replay", run_id, "--json")
    assert replay.code == 0, replay.err
    replay_id = json.loads(replay.out)["replay_id"]
    key = root / "me.key"
    assert p.repro("keygen", "--type", "ed25519", str(key)).code == 0
    out = root / "model.intoto.jsonl"
    a = p.repro("attest", run_id, "-o", str(out), "--sign", str(key))
    assert a.code == 0, a.err
    capsule = root / "run.tar"
    assert p.repro("export", run_id, "-o", str(capsule)).code == 0
    return Attested(root, run_id, replay_id, key, root / "me.key.pub", out, capsule)


def _envelope(path: Path) -> dict[str, Any]:
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1
    envelope: dict[str, Any] = json.loads(lines[0])
    return envelope


def _statement(envelope: dict[str, Any]) -> dict[str, Any]:
    statement: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"], validate=True))
    return statement


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding, written from the spec, not imported."""
    kind = payload_type.encode()
    return (
        b"DSSEv1 "
        + str(len(kind)).encode()
        + b" "
        + kind
        + b" "
        + str(len(payload)).encode()
        + b" "
        + payload
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_statement_is_in_toto_v1_with_a_slsa_v1_predicate(made: Attested) -> None:
    envelope = _envelope(made.file)
    assert set(envelope) == {"payloadType", "payload", "signatures"}
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    s = _statement(envelope)
    assert set(s) == {"_type", "subject", "predicateType", "predicate"}
    assert s["_type"] == "https://in-toto.io/Statement/v1"
    assert s["predicateType"] == "https://slsa.dev/provenance/v1"
    # subjects: each output the run wrote, by name and the SHA-256 of the file in the project
    produced = ["checkpoints/epoch_0.pt", "checkpoints/epoch_1.pt", "model.pt"]
    assert s["subject"] == [{"name": n, "digest": {"sha256": _sha256(made.root / n)}} for n in produced]
    build, run = s["predicate"]["buildDefinition"], s["predicate"]["runDetails"]
    assert set(s["predicate"]) == {"buildDefinition", "runDetails"}
    assert build["buildType"] == "https://schemas.repro.invalid/repro.capsule/v1"
    assert build["externalParameters"] == {
        "command": ["python", "train.py", "--epochs", "2", "--lr", "0.1"],
        "params": {"epochs": 2, "lr": 0.1},
        "seed": 7,
        "mode": "strict",
    }
    deps = {d["name"]: d for d in build["resolvedDependencies"]}
    head = git(made.root, "rev-parse", "HEAD").strip()
    assert deps["code"]["digest"] == {"gitCommit": head}
    record = json.loads(Project(made.root).repro("show", made.run_id, "--json").out)
    assert deps["data:data"]["digest"] == {"xxh3-128": record["data"]["inputs"][0]["digest"]}
    lock = made.root / ".repro" / "locks" / "requirements-local.lock.txt"  # a local run's lock
    assert deps["lock:.repro/locks/requirements-local.lock.txt"]["digest"] == {"sha256": _sha256(lock)}
    for d in build["resolvedDependencies"]:  # a ResourceDescriptor: a name and a digest set of hex
        assert isinstance(d["name"], str) and d["digest"]
        assert all(isinstance(v, str) and int(v, 16) >= 0 for v in d["digest"].values())
    assert run["builder"]["id"].startswith("https://") and set(run["builder"]["version"]) == {"repro"}
    meta = run["metadata"]
    assert meta["invocationId"] == made.run_id
    assert (
        meta["startedOn"] == record["results"]["started"]
        and meta["finishedOn"] == record["results"]["finished"]
    )
    with tarfile.open(made.capsule) as t:
        sums = t.extractfile("SHA256SUMS").read()  # type: ignore[union-attr]
    byproducts = {b["name"]: b for b in run["byproducts"]}
    assert byproducts["SHA256SUMS"]["digest"] == {"sha256": hashlib.sha256(sums).hexdigest()}
    assert byproducts[f"replay:{made.replay_id}"]["annotations"] == {"verdict": "identical"}


def test_the_dsse_signature_checks_with_independent_implementations(made: Attested, tmp_path: Path) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    envelope = _envelope(made.file)
    payload = base64.b64decode(envelope["payload"])
    [signature] = envelope["signatures"]
    sig = base64.b64decode(signature["sig"])
    public = load_pem_public_key(made.pub.read_bytes())
    raw = public.public_bytes_raw()  # type: ignore[union-attr]
    assert signature["keyid"] == hashlib.sha256(raw).hexdigest()[:16]
    public.verify(sig, _pae(envelope["payloadType"], payload))  # type: ignore[union-attr,call-arg]
    with pytest.raises(InvalidSignature):  # the type is signed with the body
        public.verify(sig, _pae("application/json", payload))  # type: ignore[union-attr,call-arg]
    if shutil.which("openssl") is None:
        pytest.skip("no openssl here for the second independent check")
    (tmp_path / "pae").write_bytes(_pae(envelope["payloadType"], payload))
    (tmp_path / "sig").write_bytes(sig)
    verify = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(made.pub), "-rawin"]
    ok = subprocess.run(
        [*verify, "-in", str(tmp_path / "pae"), "-sigfile", str(tmp_path / "sig")], capture_output=True
    )
    assert ok.returncode == 0, ok.stderr
    (tmp_path / "pae").write_bytes(_pae(envelope["payloadType"], payload + b" "))
    bad = subprocess.run(
        [*verify, "-in", str(tmp_path / "pae"), "-sigfile", str(tmp_path / "sig")], capture_output=True
    )
    assert bad.returncode != 0


def test_verify_attestation_with_the_public_key_and_the_artifact(
    cli: Cli, made: Attested, tmp_path: Path
) -> None:
    alone = tmp_path / "publisher.pub"
    alone.write_bytes(made.pub.read_bytes())
    model = tmp_path / "downloaded-model.pt"  # attested by its bytes, wherever it lies
    model.write_bytes((made.root / "model.pt").read_bytes())
    r = cli("verify-attestation", str(made.file), "--key", str(alone), "--artifact", str(model), cwd=tmp_path)
    assert r.code == 0, r.err
    assert f"attestation of run {made.run_id}" in r.out and "3 files attested" in r.out
    assert f"{model}: attested, model.pt (sha256 {_sha256(model)[:16]}" in r.out


def test_a_changed_model_is_not_attested(cli: Cli, made: Attested, tmp_path: Path) -> None:
    changed = tmp_path / "model.pt"
    data = bytearray((made.root / "model.pt").read_bytes())
    data[-10] ^= 1  # one bit of one weight
    changed.write_bytes(bytes(data))
    r = cli(
        "verify-attestation", str(made.file), "--key", str(made.pub), "--artifact", str(changed), cwd=tmp_path
    )
    assert r.code == ExitCode.CAPSULE_INVALID
    assert f"{changed} is not attested" in r.err and "not that of the model.pt" in r.err
    assert "Traceback" not in r.err and "hint:" in r.err
    other = tmp_path / "notes.txt"
    other.write_text("not from the run")
    r = cli(
        "verify-attestation", str(made.file), "--key", str(made.pub), "--artifact", str(other), cwd=tmp_path
    )
    assert r.code == ExitCode.CAPSULE_INVALID and "none of the 3 files" in r.err
    missing = cli(
        "verify-attestation", str(made.file), "--key", str(made.pub), "--artifact", "nope.pt", cwd=tmp_path
    )
    assert missing.code == ExitCode.USAGE and "no artifact file" in missing.err


def test_attesting_is_deterministic_and_needs_an_ed25519_private_key(
    cli: Cli, made: Attested, tmp_path: Path
) -> None:
    again = tmp_path / "again.jsonl"
    r = cli("attest", made.run_id, "-o", str(again), "--sign", str(made.key), cwd=made.root)
    assert r.code == 0, r.err
    assert again.read_bytes() == made.file.read_bytes()
    hmac_key = tmp_path / "team.key"
    assert cli("keygen", str(hmac_key), cwd=tmp_path).code == 0
    for key, expected in [(hmac_key, "is an HMAC key"), (made.pub, "can never make one")]:
        refused = cli(
            "attest", made.run_id, "-o", str(tmp_path / "x.jsonl"), "--sign", str(key), cwd=made.root
        )
        assert refused.code == ExitCode.USAGE and expected in refused.err, refused.err
        assert not (tmp_path / "x.jsonl").exists()
    checked_with_hmac = cli("verify-attestation", str(made.file), "--key", str(hmac_key), cwd=tmp_path)
    assert checked_with_hmac.code == ExitCode.USAGE and "is an HMAC key" in checked_with_hmac.err
    unsigned = tmp_path / "unsigned.jsonl"
    r = cli("attest", made.run_id, "-o", str(unsigned), cwd=made.root)
    assert r.code == 0 and "not signed" in r.out
    assert _statement(_envelope(unsigned)) == _statement(_envelope(made.file))
    refused = cli("verify-attestation", str(unsigned), "--key", str(made.pub), cwd=tmp_path)
    assert refused.code == ExitCode.CAPSULE_INVALID and "is not signed" in refused.err


def _line(envelope: dict[str, Any]) -> bytes:
    return json.dumps(envelope).encode() + b"\n"


def _forged(made: Attested) -> dict[str, bytes]:
    """Hostile attestations, each made from the genuine one as an attacker would."""
    genuine = made.file.read_bytes()
    envelope = _envelope(made.file)
    statement = _statement(envelope)
    statement["subject"][-1]["digest"]["sha256"] = "0" * 64  # claim another model.pt, keep the signature
    swapped = {**envelope, "payload": base64.b64encode(json.dumps(statement).encode()).decode()}
    return {
        "payload swapped": _line(swapped),
        "bad base64": _line({**envelope, "payload": "%%%not base64%%%"}),
        "wrong payloadType": _line({**envelope, "payloadType": "application/json"}),
        "truncated": genuine[: len(genuine) // 2],
        "empty": b"",
        "not an object": b"[1, 2, 3]\n",
        "signatures not a list": _line({**envelope, "signatures": "abc"}),
        "signature not base64": _line(
            {**envelope, "signatures": [{"keyid": envelope["signatures"][0]["keyid"], "sig": "!!"}]}
        ),
        "another key id": _line({**envelope, "signatures": [{"keyid": "0123456789abcdef", "sig": "AA=="}]}),
        "not utf-8": b"\xff\xfe\x00garbage\n",
    }


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("payload swapped", "bad signature for ed25519 key"),
        ("bad base64", "payload is not valid base64"),
        ("wrong payloadType", "payloadType is 'application/json'"),
        ("truncated", "not valid JSON"),
        ("empty", "is empty"),
        ("not an object", "not a JSON object"),
        ("signatures not a list", "signatures is not a list"),
        ("signature not base64", "not 64 bytes of base64"),
        ("another key id", "is signed by key 0123456789abcdef, not by the key given"),
        ("not utf-8", "not valid JSON"),
    ],
)
def test_a_hostile_attestation_is_one_line_and_exit_6(
    cli: Cli, made: Attested, tmp_path: Path, case: str, expected: str
) -> None:
    path = tmp_path / "forged.intoto.jsonl"
    path.write_bytes(_forged(made)[case])
    r = cli(
        "verify-attestation",
        str(path),
        "--key",
        str(made.pub),
        "--artifact",
        str(made.root / "model.pt"),
        cwd=tmp_path,
    )
    assert r.code == ExitCode.CAPSULE_INVALID, (case, r.err)
    assert expected in r.err, (case, r.err)
    assert r.out == "" and "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 2 and lines[1].lstrip().startswith("hint:")


def test_signed_by_another_ed25519_key_is_refused(cli: Cli, made: Attested, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    assert cli("keygen", "--type", "ed25519", str(other), cwd=tmp_path).code == 0
    r = cli("verify-attestation", str(made.file), "--key", str(other) + ".pub", cwd=tmp_path)
    assert r.code == ExitCode.CAPSULE_INVALID and "not by the key given" in r.err
    missing = cli("verify-attestation", str(tmp_path / "none.jsonl"), "--key", str(made.pub), cwd=tmp_path)
    assert missing.code == ExitCode.USAGE and "no attestation file" in missing.err
    directory = cli("verify-attestation", str(tmp_path), "--key", str(made.pub), cwd=tmp_path)
    assert directory.code == ExitCode.USAGE and "it is a directory" in directory.err


def _members(tar: Path) -> dict[str, bytes]:
    with tarfile.open(tar) as t:
        return {m.name: t.extractfile(m).read() for m in t}  # type: ignore[union-attr]


def _tar(members: dict[str, bytes], dest: Path) -> Path:
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return dest


def test_an_exported_capsule_carries_its_attestation(cli: Cli, made: Attested, tmp_path: Path) -> None:
    tar = tmp_path / "attested.tar"
    r = cli("export", made.run_id, "-o", str(tar), "--sign", str(made.key), "--attest", cwd=made.root)
    assert r.code == 0, r.err
    assert "signed with ed25519 key" in r.out and "with its attestation" in r.out
    members = _members(tar)
    plain = _members(made.capsule)
    assert set(members) - set(plain) == {"SIGNATURE", "ATTESTATION.intoto.jsonl"}
    assert all(members[name] == data for name, data in plain.items())  # no other member changes
    carried = json.loads(members["ATTESTATION.intoto.jsonl"])
    statement = _statement(carried)
    byproducts = {b["name"]: b for b in statement["predicate"]["runDetails"]["byproducts"]}
    assert byproducts["SHA256SUMS"]["digest"]["sha256"] == hashlib.sha256(members["SHA256SUMS"]).hexdigest()
    assert carried["signatures"] == _envelope(made.file)["signatures"]  # the same statement, signed alike
    shown = cli("show", str(tar), cwd=made.root)
    assert shown.code == 0
    line = next(x for x in shown.out.splitlines() if x.startswith("attestation"))
    assert (
        "ATTESTATION.intoto.jsonl" in line and "3 files" in line and carried["signatures"][0]["keyid"] in line
    )
    plain_lines = cli("show", str(made.capsule), cwd=made.root).out.splitlines()
    assert not any(x.startswith("attestation") for x in plain_lines)
    ok = cli(
        "verify-attestation",
        str(tar),
        "--key",
        str(made.pub),
        "--artifact",
        str(made.root / "model.pt"),
        cwd=made.root,
    )
    assert ok.code == 0, ok.err
    assert "model.pt: attested" in ok.out
    assert cli("verify", str(tar), "--key", str(made.pub), "--require-signed", cwd=made.root).code == 0


def test_a_carried_attestation_must_name_its_own_capsule(cli: Cli, made: Attested, tmp_path: Path) -> None:
    tar = tmp_path / "attested.tar"
    assert (
        cli("export", made.run_id, "-o", str(tar), "--sign", str(made.key), "--attest", cwd=made.root).code
        == 0
    )
    moved_from = _members(tar)["ATTESTATION.intoto.jsonl"]
    replay_capsule = tmp_path / "replay.tar"
    assert cli("export", made.replay_id, "-o", str(replay_capsule), cwd=made.root).code == 0
    other = _tar({**_members(replay_capsule), "ATTESTATION.intoto.jsonl": moved_from}, tmp_path / "moved.tar")
    assert cli("verify", str(other), cwd=made.root).code == 0  # the sums do not list it
    r = cli("verify-attestation", str(other), "--key", str(made.pub), cwd=made.root)
    assert r.code == ExitCode.CAPSULE_INVALID and "names another capsule" in r.err
    garbage = _tar(
        {**_members(tar), "ATTESTATION.intoto.jsonl": b"\x1b[2J{not json"}, tmp_path / "garbage.tar"
    )
    shown = cli("show", str(garbage), cwd=made.root)
    assert shown.code == 0 and "unreadable" in shown.out and "\x1b[2J" not in shown.out
    bad = cli("verify-attestation", str(garbage), "--key", str(made.pub), cwd=made.root)
    assert bad.code == ExitCode.CAPSULE_INVALID and "not valid JSON" in bad.err
    none = cli("verify-attestation", str(made.capsule), "--key", str(made.pub), cwd=made.root)
    assert none.code == ExitCode.CAPSULE_INVALID and "carries no attestation" in none.err
    huge = _tar({**_members(tar), "ATTESTATION.intoto.jsonl": b" " * (5 << 20)}, tmp_path / "huge.tar")
    big = cli("verify", str(huge), cwd=made.root)
    assert big.code == ExitCode.CAPSULE_INVALID and "larger than 4 MiB" in big.err


def test_attest_flag_needs_a_capsule_and_an_ed25519_key(cli: Cli, made: Attested, tmp_path: Path) -> None:
    hmac_key = tmp_path / "team.key"
    assert cli("keygen", str(hmac_key), cwd=tmp_path).code == 0
    out = tmp_path / "x.tar"
    r = cli("export", made.run_id, "-o", str(out), "--sign", str(hmac_key), "--attest", cwd=made.root)
    assert r.code == ExitCode.USAGE and "is an HMAC key" in r.err and not out.exists()
    slurm = cli("export", made.run_id, "--as", "slurm", "--attest", "-o", str(tmp_path / "j"), cwd=made.root)
    assert slurm.code == ExitCode.USAGE and "--attest applies to capsules" in slurm.err


def _other_run_line(made: Attested, tmp_path: Path) -> tuple[bytes, Path]:
    """A line genuinely signed by the publisher's key, of another run: its own model and its own
    capsule (SHA256SUMS); and that other model."""
    from repro.store import attestation, dsse, signing

    other_model = tmp_path / "other-model.pt"
    other_model.write_bytes(b"the weights of another run")
    statement = _statement(_envelope(made.file))
    statement["subject"] = [{"name": "model.pt", "digest": {"sha256": _sha256(other_model)}}]
    for item in statement["predicate"]["runDetails"]["byproducts"]:
        if item["name"] == "SHA256SUMS":
            item["digest"]["sha256"] = hashlib.sha256(b"another capsule's sums").hexdigest()
    statement["predicate"]["runDetails"]["metadata"]["invocationId"] = "20260101-000000-othr"
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    key = signing.load_signing_key(made.key)
    return _line(dsse.seal(attestation.PAYLOAD_TYPE, payload, key)), other_model


def test_a_spliced_line_of_another_run_attests_nothing(cli: Cli, made: Attested, tmp_path: Path) -> None:
    spliced, other_model = _other_run_line(made, tmp_path)
    alone = tmp_path / "spliced.intoto.jsonl"
    alone.write_bytes(made.file.read_bytes() + spliced)
    tar = tmp_path / "attested.tar"
    assert (
        cli("export", made.run_id, "-o", str(tar), "--sign", str(made.key), "--attest", cwd=made.root).code
        == 0
    )
    members = _members(tar)
    inside = _tar({**members, "ATTESTATION.intoto.jsonl": members["ATTESTATION.intoto.jsonl"] + spliced},
                  tmp_path / "spliced.tar")  # fmt: skip
    for target in (alone, inside):
        r = cli("verify-attestation", str(target), "--key", str(made.pub), "--artifact", str(other_model),
                cwd=tmp_path)  # fmt: skip
        assert r.code == ExitCode.CAPSULE_INVALID, (target, r.out, r.err)
        assert "one statement" in r.err and "2 lines" in r.err and r.out == "", r.err
        assert len(r.err.strip().splitlines()) == 2 and "Traceback" not in r.err
    # The other run's line alone, in this capsule: it names another capsule.
    moved = _tar({**members, "ATTESTATION.intoto.jsonl": spliced}, tmp_path / "moved.tar")
    r = cli(
        "verify-attestation", str(moved), "--key", str(made.pub), "--artifact", str(other_model), cwd=tmp_path
    )
    assert r.code == ExitCode.CAPSULE_INVALID and "names another capsule" in r.err and r.out == ""


def test_a_wrong_artifact_prints_no_ok_and_a_private_key_is_refused(
    cli: Cli, made: Attested, tmp_path: Path
) -> None:
    wrong = tmp_path / "model.pt"
    wrong.write_bytes(b"not the model")
    model = str(made.root / "model.pt")
    r = cli("verify-attestation", str(made.file), "--key", str(made.pub), "--artifact", model,
            "--artifact", str(wrong), cwd=tmp_path)  # fmt: skip
    assert r.code == ExitCode.CAPSULE_INVALID and "ok:" not in r.out and "attested," not in r.out, r.out
    private = cli("verify-attestation", str(made.file), "--key", str(made.key), cwd=tmp_path)
    assert private.code == ExitCode.USAGE and "private" in private.err and private.out == ""
    lines = private.err.strip().splitlines()
    assert len(lines) == 2 and ".pub" in lines[1], private.err


def _model_signing() -> str:
    """The reference OpenSSF Model Signing verifier, installed beside this Python (a dev dependency)."""
    tool = Path(sys.executable).parent / "model_signing"
    found = str(tool) if tool.is_file() else shutil.which("model_signing")
    assert found, "model-signing is a dev dependency: install the dev lock"
    return found


def _reference_verify(signature: Path, public: Path, model: Path) -> subprocess.CompletedProcess[str]:
    cmd = [_model_signing(), "verify", "key", "--signature", str(signature), "--public_key", str(public)]
    return subprocess.run([*cmd, str(model)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def oms_signed(made: Attested) -> tuple[Path, Path, Path]:
    """An ECDSA P-256 key, `repro attest --format oms` with it, and the model files by `repro get`."""
    key = made.root / "ec.key"
    p = Project(made.root)
    made_key = p.repro("keygen", "--type", "ecdsa-p256", str(key))
    assert made_key.code == 0 and "ecdsa-p256 key" in made_key.out, made_key.err
    signature = made.root / "model.sig"
    r = p.repro("attest", made.run_id, "--format", "oms", "--sign", str(key), "-o", str(signature))
    assert r.code == 0, r.err
    assert "OpenSSF Model Signing v1" in r.out and "3 files" in r.out
    model = made.root / "model-files"
    assert p.repro("get", made.run_id, "-o", str(model)).code == 0
    return key, signature, model


def test_the_reference_tool_accepts_the_oms_signature_until_one_byte_changes(
    made: Attested, oms_signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    key, signature, model = oms_signed
    pub = Path(f"{key}.pub")
    ok = _reference_verify(signature, pub, model)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Verification succeeded" in ok.stdout + ok.stderr
    changed = tmp_path / "changed"
    shutil.copytree(model, changed)
    data = bytearray((changed / "model.pt").read_bytes())
    data[len(data) // 2] ^= 0x01
    (changed / "model.pt").write_bytes(bytes(data))
    bad = _reference_verify(signature, pub, changed)
    assert bad.returncode != 0 and "Verification succeeded" not in bad.stdout + bad.stderr
    other = tmp_path / "other.key"  # another P-256 key: the reference tool refuses it too
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(other)],
                   check=True, capture_output=True)  # fmt: skip
    other_pub = subprocess.run(
        ["openssl", "ec", "-in", str(other), "-pubout"], check=True, capture_output=True
    )
    (tmp_path / "other.pub").write_bytes(other_pub.stdout)
    assert _reference_verify(signature, tmp_path / "other.pub", model).returncode != 0


def test_the_oms_statement_lists_every_model_file(
    made: Attested, oms_signed: tuple[Path, Path, Path]
) -> None:
    _, signature, model = oms_signed
    bundle = json.loads(signature.read_bytes())
    assert bundle["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    envelope = bundle["dsseEnvelope"]
    statement = _statement(envelope)
    assert statement["predicateType"] == "https://model_signing/signature/v1.0"
    names = ["checkpoints/epoch_0.pt", "checkpoints/epoch_1.pt", "model.pt"]
    resources = statement["predicate"]["resources"]
    assert resources == [{"name": n, "algorithm": "sha256", "digest": _sha256(model / n)} for n in names]
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in resources)).hexdigest()
    assert statement["subject"] == [{"name": made.run_id, "digest": {"sha256": root}}]


def test_repro_checks_oms_signatures_too(
    cli: Cli, made: Attested, oms_signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    key, signature, model = oms_signed
    pub = f"{key}.pub"
    ok = cli("verify-attestation", str(signature), "--key", pub, "--artifact", str(model / "model.pt"))
    assert ok.code == 0, ok.err
    assert "OpenSSF model signature" in ok.out and "model.pt: attested" in ok.out
    changed = tmp_path / "model.pt"
    changed.write_bytes(b"\x00" + (model / "model.pt").read_bytes()[1:])
    bad = cli("verify-attestation", str(signature), "--key", pub, "--artifact", str(changed))
    assert bad.code == ExitCode.CAPSULE_INVALID and "not attested" in bad.err
    tampered = tmp_path / "tampered.sig"
    body = json.loads(signature.read_bytes())
    statement = _statement(body["dsseEnvelope"])
    statement["predicate"]["resources"][0]["digest"] = "0" * 64
    body["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    tampered.write_text(json.dumps(body))
    refused = cli("verify-attestation", str(tampered), "--key", pub)
    assert refused.code == ExitCode.CAPSULE_INVALID and "bad signature" in refused.err
    ed = cli("verify-attestation", str(signature), "--key", str(made.pub))
    assert ed.code != 0 and "ECDSA P-256" in ed.err
    unsigned = cli("attest", made.run_id, "--format", "oms", "-o", str(tmp_path / "x.sig"), cwd=made.root)
    assert unsigned.code == ExitCode.USAGE and "--sign" in unsigned.err
    ed_sign = cli(
        "attest",
        made.run_id,
        "--format",
        "oms",
        "--sign",
        str(made.key),
        "-o",
        str(tmp_path / "y"),
        cwd=made.root,
    )
    assert ed_sign.code == ExitCode.USAGE and "ecdsa-p256" in ed_sign.err


def test_an_exported_capsule_carries_its_oms_signature(
    cli: Cli, made: Attested, oms_signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    key, signature, model = oms_signed
    tar = tmp_path / "oms.tar"
    r = cli(
        "export",
        made.run_id,
        "-o",
        str(tar),
        "--sign",
        str(key),
        "--attest",
        "--format",
        "oms",
        cwd=made.root,
    )
    assert r.code == 0, r.err
    assert "with its OpenSSF model signature" in r.out and "with its attestation" not in r.out
    members = _members(tar)
    assert set(members) - set(_members(made.capsule)) == {"SIGNATURE", "MODEL_SIGNATURE.sig"}
    (tmp_path / "carried.sig").write_bytes(members["MODEL_SIGNATURE.sig"])
    assert _reference_verify(tmp_path / "carried.sig", Path(f"{key}.pub"), model).returncode == 0
    ok = cli("verify-attestation", str(tar), "--key", f"{key}.pub", "--artifact", str(model / "model.pt"))
    assert ok.code == 0 and "OpenSSF model signature" in ok.out, ok.err
    assert cli("verify", str(tar), "--key", f"{key}.pub", "--require-signed").code == 0
    shown = cli("show", str(tar))
    files = len(
        _statement(json.loads(members["MODEL_SIGNATURE.sig"])["dsseEnvelope"])["predicate"]["resources"]
    )
    assert shown.code == 0 and f"MODEL_SIGNATURE.sig: OpenSSF model signature v1, {files} file" in shown.out
    assert "not checked" in shown.out
    no_attest = cli("export", made.run_id, "-o", str(tmp_path / "n.tar"), "--format", "oms", cwd=made.root)
    assert no_attest.code == ExitCode.USAGE and "--attest" in no_attest.err
    for hostile in (
        b"not json",
        b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}',
        b"{" * 5000,
    ):
        forged = _tar({**members, "MODEL_SIGNATURE.sig": hostile}, tmp_path / "forged.tar")
        r = cli("verify-attestation", str(forged), "--key", f"{key}.pub")
        assert r.code == ExitCode.CAPSULE_INVALID and "Traceback" not in r.err, r.err
        assert len(r.err.strip().splitlines()) <= 2  # one line and its hint
        shown = cli("show", str(forged))  # read, not checked: said to be unreadable, never a traceback
        assert shown.code == 0 and "MODEL_SIGNATURE.sig: " in shown.out and "Traceback" not in shown.err
