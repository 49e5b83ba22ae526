"""A capsule that says `backend: local` replays in the docker sandbox: its code never touches the host.

The capsule is a genuine export of a local run, forged as an attacker does (the script swapped for
one that writes into a host path and reads a host file, the record asking for LD_PRELOAD and
PYTHONPATH, SHA256SUMS recomputed), and replayed in another directory as its receiver would.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repro.store.runs import Store
from tests.builders import hand_trained
from tests.conftest import Project
from tests.forging import forge
from tests.integration.test_podman import box as box  # noqa: F401 - the fixture: docker, rootless podman

pytestmark = pytest.mark.docker

TRAIN = hand_trained(epochs=3, width=8)

EVIL = """\
import json
import os
import socket
from pathlib import Path

found = {{"hostname": socket.gethostname(),
          "container": Path("/.dockerenv").exists() or Path("/run/.containerenv").exists(),
          "ld_preload": os.environ.get("LD_PRELOAD"), "pythonpath": os.environ.get("PYTHONPATH"),
          "interfaces": sorted(os.listdir("/sys/class/net"))}}
try:
    Path({marker!r}).write_text("the capsule's code ran on the host")
    found["wrote"] = True
except OSError as e:
    found["wrote"] = str(e)
try:
    found["read"] = Path({secret!r}).read_text()
except OSError as e:
    found["read"] = type(e).__name__
try:
    found["root"] = sorted(os.listdir("/root"))
except OSError as e:
    found["root"] = type(e).__name__
Path("outputs").mkdir(exist_ok=True)
Path("outputs/found.json").write_text(json.dumps(found))
print(json.dumps(found))
"""


def test_a_capsule_saying_local_replays_in_the_container_and_leaves_the_host_alone(
    box: tuple[Project, str],
) -> None:
    project, backend = box  # root with Docker, or a user with rootless Podman and no Docker
    tmp_path = project.root.parent
    project.write("train.py", TRAIN)
    project.commit("train")
    assert project.repro("run", "--backend", "local", "--", "python", "train.py", "--epochs", "2").code == 0
    genuine = tmp_path / "genuine.tar"
    assert project.repro("export", "latest", "-o", str(genuine)).code == 0

    marker, secret = tmp_path / "host-marker", tmp_path / "host-secret.txt"
    secret.write_text("only on the host\n")

    def edit(record: dict[str, Any]) -> None:
        assert record["backend"]["name"] == "local"
        record["env"]["variables"].update({"LD_PRELOAD": "/tmp/evil.so", "PYTHONPATH": "/tmp/evil"})

    code = {"train.py": EVIL.format(marker=str(marker), secret=str(secret)).encode()}
    evil = forge(genuine, tmp_path / "evil.tar", edit, code)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = project.repro("replay", str(evil), "--json", cwd=elsewhere)
    assert r.code == 5, r.out + r.err  # it ran (other code: diverged), and only in the container
    assert "replays in the container sandbox (its record names backend local" in r.err
    assert "never sets from a record were dropped: LD_PRELOAD, PYTHONPATH" in r.err

    assert not marker.exists()
    store = Store(elsewhere)
    replay = store.load_run(json.loads(r.out)["replay_id"]).record
    assert replay.backend.name == backend and replay.backend.network is False
    entry = next(o for o in replay.results.outputs if o.path == "outputs/found.json")
    found = json.loads(store.read_blob(entry.hash) or b"{}")
    assert found["container"] is True and found["hostname"] == "repro" and found["interfaces"] == ["lo"]
    assert found["wrote"] is not True and found["read"] in ("FileNotFoundError", "PermissionError")
    assert found["ld_preload"] is None and "/tmp/evil" not in (found["pythonpath"] or "")
    assert store.is_foreign(replay.id)

    # The control: the person replaying names the host, and the same code reaches it (and is told so).
    r = project.repro("replay", str(evil), "--backend", "local", cwd=elsewhere)
    assert "runs unsandboxed on this machine" in r.err and marker.exists()


PEEK = """\
import json
from pathlib import Path

seen = {}
for name in (".git", ".repro", "secret.env", "data"):
    path = Path(name)
    if path.is_dir():
        seen[name] = sorted(p.name for p in path.iterdir())
    elif path.is_file():
        seen[name] = path.read_text()
Path("outputs").mkdir(exist_ok=True)
Path("outputs/seen.json").write_text(json.dumps(seen))
print(json.dumps(seen))
"""


def test_a_record_cannot_choose_the_host_paths_a_drifted_replay_sees(
    project: Project, tmp_path: Path
) -> None:
    project.write("train.py", TRAIN)
    project.write("data/points.csv", "0.1,0.2,1\n0.3,0.4,0\n")
    project.write("repro.yaml", "data: [data]\n")
    project.write(".gitignore", (project.root / ".gitignore").read_text() + "data/\n")
    project.commit("train")
    assert project.repro("run", "--backend", "local", "--", "python", "train.py", "--epochs", "1").code == 0
    genuine = tmp_path / "genuine.tar"
    assert project.repro("export", "latest", "-o", str(genuine)).code == 0

    def claim(record: dict[str, Any]) -> None:
        (data,) = record["data"]["inputs"]
        for path in (".git", ".repro", "secret.env"):
            forged = {**copy.deepcopy(data), "path": path, "files": [], "count": 0, "digest": "0" * 32}
            record["data"]["inputs"].append(forged)

    evil = forge(genuine, tmp_path / "evil.tar", claim, {"train.py": PEEK.encode()})
    # The receiver: a git checkout whose remote URL holds a token, a secret.env, other data.
    elsewhere = Project.init(tmp_path / "elsewhere")
    elsewhere.write("secret.env", "HF_TOKEN=hf_receiverssecret\n")
    elsewhere.write("data/points.csv", "9,9,9\n")
    subprocess.run(["git", "-C", str(elsewhere.root), "remote", "add", "origin",
                    "https://user:ghp_tokentokentoken@example.invalid/x.git"], check=True)  # fmt: skip

    def seen(r: Any) -> dict[str, Any]:
        store = Store(elsewhere.root)
        replay = store.load_run(json.loads(r.out)["replay_id"]).record
        entry = next(o for o in replay.results.outputs if o.path == "outputs/seen.json")
        return dict(json.loads(store.read_blob(entry.hash) or b"{}"))

    r = project.repro("replay", str(evil), "--allow-data-drift", "--json", cwd=elsewhere.root)
    assert r.code == 5, r.out + r.err
    assert seen(r) == {}, seen(r)  # nothing that differs from the record, and no .git, .repro, secret.env
    assert "ghp_tokentoken" not in r.out + r.err and "hf_receivers" not in r.out + r.err

    # The receiver names a data root: the data there is theirs to show, .git and secrets never.
    r = project.repro("replay", str(evil), "--allow-data-drift", "--data-root", str(elsewhere.root), "--json",
                      cwd=elsewhere.root)  # fmt: skip
    assert r.code == 5, r.out + r.err
    assert seen(r) == {"data": ["points.csv"]}, seen(r)
    assert "not shown to the replay" in r.out + r.err and "it is under .git" in r.out + r.err
