"""Source distributions on the Docker backend: never built on the host, built in a sandbox, installed.

A package index is served on 127.0.0.1 by ``http.server`` in a thread (PEP 503 layout) and
named to repro only through ``PIP_INDEX_URL``, as a user's pip configuration would. Its
hostile sdist has an in-tree build backend that writes a marker at a host path and reads a
host file: a capsule whose lock pins it (a genuine export, its lock blob swapped, SHA256SUMS
recomputed) is replayed, and the backend's code runs only inside the sandbox. A real
source-only package from the real index (antlr4-python3-runtime, needed by hydra-core) builds
into the image of a real Hydra training project, run twice.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import re
import tarfile
import threading
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from repro.backends.docker.engine import engine
from repro.store.capsule import blob_member
from repro.store.hashing import hash_bytes
from tests.conftest import Project
from tests.unit.test_hostile_capsules import _forge

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# An in-tree PEP 517 backend (no build requirements) that does what an attacker's setup.py would.
BACKEND = """\
import base64, hashlib, json, os, zipfile
WHEEL = "Wheel-Version: 1.0\\nGenerator: hostile\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
MARKER = {marker!r}
SECRET = {secret!r}
FAIL = {fail!r}


def _probe():
    seen = {{"uid": os.getuid(), "interfaces": sorted(os.listdir("/sys/class/net"))}}
    try:
        os.makedirs(os.path.dirname(MARKER), exist_ok=True)
        with open(MARKER, "w") as f:
            f.write("the build backend ran here")
        seen["marker_written"] = True
    except OSError as e:
        seen["marker_written"] = type(e).__name__
    try:
        with open(SECRET) as f:
            seen["secret"] = f.read()
    except OSError as e:
        seen["secret"] = type(e).__name__
    return seen


def get_requires_for_build_wheel(config_settings=None):
    _probe()
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    seen = _probe()
    if FAIL:
        raise SystemExit("hostile build: the host secret was not there to take")
    name = "{dist}-1.0-py3-none-any.whl"
    files = {{
        "hostile_seen.py": "SEEN = " + repr(json.dumps(seen)) + "\\n",
        "{dist}-1.0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: {project}\\nVersion: 1.0\\n",
        "{dist}-1.0.dist-info/WHEEL": WHEEL,
    }}
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{{path}},sha256={{digest}},{{len(data)}}")
        record.append("{dist}-1.0.dist-info/RECORD,,")
        z.writestr("{dist}-1.0.dist-info/RECORD", "\\n".join(record) + "\\n")
    return name
"""

PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'

PROBE = """\
import argparse, json, os
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--out", default="outputs")
args = p.parse_args()
Path(args.out).mkdir(exist_ok=True)
probe = {"interfaces": sorted(os.listdir("/sys/class/net"))}
Path(args.out, "probe.json").write_text(json.dumps(probe))
print(json.dumps(probe))
"""


def _sdist(dest: Path, project: str, backend_py: str) -> Path:
    dist = project.replace("-", "_")
    path = dest / f"{dist}-1.0.tar.gz"
    members = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n",
        "pyproject.toml": PYPROJECT,
        "backend.py": backend_py,
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            info = tarfile.TarInfo(f"{dist}-1.0/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def _wheel(dest: Path, project: str) -> Path:
    """A plain, harmless wheel: what the genuine capsule locked."""
    dist = project.replace("-", "_")
    path = dest / f"{dist}-1.0-py3-none-any.whl"
    files = {
        f"{dist}.py": "VALUE = 1\n",
        f"{dist}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n",
        f"{dist}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(text)}")
        z.writestr(
            f"{dist}-1.0.dist-info/RECORD", "\n".join([*record, f"{dist}-1.0.dist-info/RECORD,,"]) + "\n"
        )
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def loopback_index(tmp_path: Path) -> Iterator[Path]:
    """A PEP 503 index served on 127.0.0.1: put files with ``_publish``; its URL is in ``.url``."""
    root = tmp_path / "index"
    (root / "files").mkdir(parents=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: _Quiet(*a, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    (root / "url").write_text(f"http://127.0.0.1:{server.server_address[1]}/simple/")
    try:
        yield root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _publish(index: Path, project: str, file: Path) -> None:
    target = index / "files" / file.name
    target.write_bytes(file.read_bytes())
    page = index / "simple" / project
    page.mkdir(parents=True, exist_ok=True)
    (page / "index.html").write_text(
        f'<html><body><a href="../../files/{file.name}#sha256={_sha(target)}">{file.name}</a></body></html>'
    )


def _pip_env(index: Path, cache: Path) -> dict[str, str]:
    """The replaying host's pip configuration: only the loopback index (no config files)."""
    return {"PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": (index / "url").read_text(),
            "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "REPRO_CACHE_DIR": str(cache)}  # fmt: skip


def _swap_lock(lock_text: str) -> Any:
    """An attacker's edit: the lock blob replaced, the record pointed at it, the record's own
    list of requirements left saying what the genuine run had."""

    def change(members: dict[str, bytes]) -> None:
        body = lock_text.encode()
        digest = hash_bytes(body)
        members[blob_member(digest)] = body
        record = yaml.safe_load(members["capsule.yaml"])
        record["deps"]["lock_blob"] = digest
        members["capsule.yaml"] = yaml.safe_dump(record, sort_keys=False).encode()

    return change


def _remove_image(image_id: str | None) -> None:
    if not image_id:
        return
    with engine() as client:
        try:
            client.api.remove_image(image_id, force=True)
        except Exception:  # noqa: BLE001 (best effort: the image may be in use by a parallel run)
            pass


def test_a_hostile_sdist_in_a_capsules_lock_runs_only_in_the_sandbox(
    project: Project, loopback_index: Path, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    marker = tmp_path / "host" / f"marker-{tag}"
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("host-secret-do-not-take\n")
    cache = tmp_path / "cache"
    env = _pip_env(loopback_index, cache)

    # The attacker's genuine run and export: a harmless wheel from the index, locked by hash.
    harmless = _wheel(tmp_path, "harmless")
    _publish(loopback_index, "harmless", harmless)
    project.write("probe.py", PROBE)
    project.write("requirements.txt", f"harmless==1.0 --hash=sha256:{_sha(harmless)}\n")
    project.commit("probe")
    r = project.repro("run", "--backend", "docker", "--", "python", "probe.py", env=env)
    assert r.code == 0, r.err
    genuine = tmp_path / "genuine.tar"
    assert project.repro("export", "latest", "-o", str(genuine)).code == 0

    # The hostile sdist on the index, and the capsule's lock swapped for a pin of it.
    built = _sdist(tmp_path, "hostile-pkg",
                   BACKEND.format(marker=str(marker), secret=str(secret), fail=False, dist="hostile_pkg",
                                  project="hostile-pkg"))  # fmt: skip
    _publish(loopback_index, "hostile-pkg", built)
    bad = _forge(genuine, tmp_path / "bad.tar", _swap_lock(f"hostile-pkg==1.0 --hash=sha256:{_sha(built)}\n"))

    shown = project.repro("show", str(bad))
    assert shown.code == 0 and "hostile-pkg==1.0" in shown.out, shown.out  # the lock, not the record's claim
    assert not marker.exists()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    image_id = None
    try:
        r = project.repro("replay", str(bad), "--backend", "docker", "--json", cwd=elsewhere, env=env)
        assert r.code == 0, r.out + r.err
        assert json.loads(r.out)["status"] == "identical"  # the probe saw what the genuine run saw
        assert "source builds: 1 wheel built in the sandbox" in r.err  # the stage line; its lines are logged
        assert not marker.exists(), "the build backend ran on the host"
        replay = json.loads(project.repro("show", "latest", "--json", cwd=elsewhere).out)
        image_id = replay["deps"]["image"]["id"]
        assert replay["deps"]["image"]["installed_from"] == {"hostile-pkg": "source"}
        text = project.repro("show", "latest", cwd=elsewhere).out
        assert re.search(r"source builds +hostile-pkg==1\.0", text), text

        # What the backend saw, as it wrote it into the wheel it built: it ran, in the sandbox.
        with engine() as client:
            out = client.containers.run(
                image_id, ["python", "-c", "import hostile_seen; print(hostile_seen.SEEN)"],
                network_mode="none", remove=True,
            )  # fmt: skip
        seen = json.loads(out.decode())
        assert seen["marker_written"] is True  # it wrote its marker, inside the sandbox
        assert seen["secret"] == "FileNotFoundError" and seen["interfaces"] == ["lo"]
        assert seen["uid"] == 65534
    finally:
        _remove_image(image_id)

    # A build that fails: one line naming the package, exit 1, nothing on the host.
    failing = _sdist(tmp_path, "hostile-fail",
                     BACKEND.format(marker=str(marker), secret=str(secret), fail=True, dist="hostile_fail",
                                    project="hostile-fail"))  # fmt: skip
    _publish(loopback_index, "hostile-fail", failing)
    bad = _forge(
        genuine, tmp_path / "fail.tar", _swap_lock(f"hostile-fail==1.0 --hash=sha256:{_sha(failing)}\n")
    )
    other = tmp_path / "other"
    other.mkdir()
    r = project.repro("replay", str(bad), "--backend", "docker", cwd=other, env=env)
    assert r.code == 1, r.out + r.err
    errors = [line for line in r.err.splitlines() if line.startswith("repro: error:")]
    assert len(errors) == 1, r.err
    assert "hostile-fail==1.0 did not build from source in the sandbox" in errors[0], r.err
    assert "Traceback" not in r.err and not marker.exists()
    assert "host-secret-do-not-take" not in r.out + r.err


def test_an_index_that_cannot_be_read_is_one_line(project: Project, tmp_path: Path) -> None:
    project.write("probe.py", PROBE)
    project.write("requirements.txt", f"six==1.0 --hash=sha256:{'0' * 64}\n")
    project.commit("probe")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/simple/"
    env = {"PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": url, "PIP_FIND_LINKS": "",
           "REPRO_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    r = project.repro("run", "--backend", "docker", "--", "python", "probe.py", env=env)
    assert r.code == 1, r.err
    errors = [line for line in r.err.splitlines() if line.startswith("repro: error:")]
    assert errors == [f"repro: error: the package index {url} cannot be read: connection failed"], r.err


HYDRA_CONFIG = """\
defaults:
  - _self_
lr: 0.05
epochs: 3
batch_size: 16
data: data/points.csv
save: model.pt
model:
  hidden: 16
optim:
  lr: ${lr}
  momentum: 0.9
"""


def test_a_hydra_project_builds_its_source_only_dependency_into_the_image(
    project: Project, tmp_path: Path
) -> None:
    """hydra-core needs antlr4-python3-runtime 4.9.x, which the index has only as an sdist; Hydra's
    override parser imports it, so the run's ``epochs=2`` goes through the built wheel."""
    project.script("hydra_train.py", "train.py")
    project.write("conf/config.yaml", HYDRA_CONFIG)
    project.write(".gitignore", "outputs/\nmultirun/\n")
    project.points()
    project.write("requirements.in", "torch==2.13.0\nnumpy\nhydra-core==1.3.2\n")
    (project.root / "lockfiles").mkdir()
    project.commit("hydra app")
    r = project.repro("lock")
    assert r.code == 0, r.err
    lock = project.root / "lockfiles" / "requirements.lock.txt"
    text = lock.read_text()
    assert "antlr4-python3-runtime==4.9.3" in text and "torch==2.13.0" in text
    # A comment makes this lock, and so its image, this test's own: the image is built, not reused;
    # a wheelhouse of its own makes the sdist build for real, in the sandbox.
    lock.write_text(text + f"# test {uuid.uuid4().hex}\n")
    project.commit("lock")
    env = {"REPRO_CACHE_DIR": str(tmp_path / "cache")}
    image_ids: list[str] = []
    try:
        for i in range(2):
            r = project.repro("run", "--backend", "docker", "--data", "data", "--", "python", "train.py",
                              "epochs=2", timeout=1200, env=env)  # fmt: skip
            assert r.code == 0, r.err
            sandboxed = "source builds: 1 wheel built in the sandbox" in r.err
            assert sandboxed == (i == 0), r.err  # built the first time, the image reused the second
            record = json.loads(project.repro("show", "latest", "--json").out)
            image_ids.append(record["deps"]["image"]["id"])
            assert record["deps"]["image"]["installed_from"]["antlr4-python3-runtime"] == "source"
            assert record["deps"]["image"]["installed_from"]["torch"] == "wheel"
        built = list(
            (tmp_path / "cache" / "wheelhouse" / "built").glob("*/*/antlr4_python3_runtime-4.9.3-*.whl")
        )
        assert len(built) == 1
        assert image_ids[0] == image_ids[1]  # built once, reused the second time
        shown = project.repro("show", "latest").out
        assert re.search(r"source builds +antlr4-python3-runtime==4\.9\.3", shown), shown
        assert "hydra-core==1.3.2" in shown and "torch==2.13.0+cpu" in shown
        r = project.repro("replay", "latest", "--json")
        assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    finally:
        _remove_image(image_ids[0] if image_ids else None)
