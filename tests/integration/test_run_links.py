"""Links a run makes are recorded as links and never followed: real runs on the local and docker
backends, and a capsule forged as an attacker would (a genuine export whose training script was
swapped for a hostile one, SHA256SUMS recomputed), replayed in the container.

The hostile script (scripts/linked_train.py --plant) links to a 0600 file the test made outside the
project, to /etc/shadow and to a directory; replaces repro's own report files with links; and
reports writes with `../` paths. Its content must reach no blob, no `repro show` and no export.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.builders import training_project
from tests.conftest import SCRIPTS, Project
from tests.forging import forge
from tests.integration.test_podman import box as box  # noqa: F401 - the fixture: docker, rootless podman
from tests.integration.test_podman import give

MARK = "SECRET-4b1d-do-not-store"
# One JSON line: whichever reader followed a link to it (raw bytes, JSON, JSON lines) would carry the mark.
SECRET = (
    json.dumps({"e": "error", "where": MARK, "error": MARK, "name": MARK, "value": 1, "kind": MARK}) + "\n"
)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "host-keys" / "id_rsa"
    path.parent.mkdir()
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


def _blobs_hold(store: Path, needle: bytes) -> list[str]:
    return [str(p) for p in (store / "blobs").rglob("*") if p.is_file() and needle in p.read_bytes()]


def _shadow() -> bytes | None:
    try:
        raw = Path("/etc/shadow").read_bytes()
    except OSError:
        return None
    return raw if len(raw) > 16 else None


def _assert_nothing_leaked(project: Project, store: Path, secret: Path, tmp_path: Path, cwd: Path) -> None:
    assert _blobs_hold(store, MARK.encode()) == []
    shadow = _shadow()
    if shadow is not None:
        assert _blobs_hold(store, shadow) == []
    for args in (("show", "latest"), ("show", "latest", "--json"), ("ls",)):
        r = project.repro(*args, cwd=cwd)
        assert r.code == 0, r.err
        assert MARK not in r.out + r.err
    export = tmp_path / "exported" / f"{cwd.name}.tar"
    r = project.repro("export", "latest", "-o", str(export), cwd=cwd)
    assert r.code == 0, r.err
    assert MARK.encode() not in export.read_bytes()
    assert secret.read_text() == SECRET  # nothing was written through a link either


def _outputs(project: Project, cwd: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The latest run's outputs by path, and its whole record (as `repro show --json` prints it)."""
    record: dict[str, Any] = json.loads(project.repro("show", "latest", "--json", cwd=cwd).out)
    return {o["path"]: o for o in record["results"]["outputs"]}, record


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_hostile_runs_links_are_recorded_as_links_and_never_read(
    project: Project, secret: Path, tmp_path: Path, backend: str
) -> None:
    training_project(project, "linked_train.py")
    rel = os.path.relpath(secret, project.root)
    r = project.repro("run", "--backend", backend, "--data", "data", "train.py", "--epochs", "2",
                      "--plant", str(secret), "--plant-rel", rel)  # fmt: skip
    assert r.code == 0, r.err  # a dangling link left behind does not fail the run
    assert MARK not in r.out + r.err and "Traceback" not in r.err
    outputs, record = _outputs(project, project.root)
    assert outputs["outputs/leak"]["link"] == str(secret) and outputs["outputs/leak"]["size"] == 0
    assert outputs["outputs/keys"]["link"] == str(secret.parent)
    assert outputs["model.pt"]["link"] == "/etc/shadow"
    assert outputs["dangling.pt"]["link"] == "/nonexistent/dangling"
    assert outputs["checkpoints/last.json"]["link"] == "ckpt_1.json"  # a training script's own link
    assert outputs["model.json"]["stored"] and "link" not in outputs["model.json"]
    assert not any(p.startswith(("outputs/keys/", "../")) for p in outputs)
    assert rel in record["results"]["outputs_outside_root"]
    planted = next(w["message"] for w in record["warnings"] if w["code"] == "runtime_links")
    assert "boot-error.1.txt ->" in planted and "(+7 more)" in planted  # 10 links, 3 named
    assert record["results"]["metrics"] is None and record["results"]["params"] == {}
    _assert_nothing_leaked(project, project.root / ".repro", secret, tmp_path, project.root)


@pytest.mark.docker
def test_a_forged_capsules_links_stay_links_when_replayed_in_the_container(
    box: tuple[Project, str], secret: Path
) -> None:
    project, backend = box  # root with Docker, or a user with rootless Podman and no Docker
    tmp_path = project.root.parent
    if backend == "podman":  # the user's own key, outside the project: a link followed would read it
        secret = tmp_path / "host-keys" / "id_rsa"
        secret.parent.mkdir()
        secret.write_text(SECRET)
        secret.chmod(0o600)
        give(secret.parent)
    training_project(project, "linked_train.py")
    r = project.repro("run", "--backend", backend, "--data", "data", "train.py", "--epochs", "2")
    assert r.code == 0, r.err
    genuine = tmp_path / "genuine.tar"
    assert project.repro("export", "latest", "-o", str(genuine)).code == 0

    colleague, elsewhere = tmp_path / "colleague", tmp_path / "reviewer"
    colleague.mkdir()
    elsewhere.mkdir()
    data = ("--data-root", str(project.root))
    r = project.repro("replay", str(genuine), "--backend", backend, *data, "--json", cwd=colleague)
    assert r.code == 0, r.out + r.err  # checkpoints/last.json -> ckpt_1.json compared by its target
    assert json.loads(r.out)["status"] == "identical"

    # The attacker's edit: the same script, planting by default, paths guessed for this host.
    rel = os.path.relpath(secret, elsewhere / ".repro" / "cache")  # any depth: `..` leaves the project
    script = (SCRIPTS / "linked_train.py").read_text()
    hostile = script.replace('"--plant", default=None', f'"--plant", default={str(secret)!r}').replace(
        '"--plant-rel", default=None', f'"--plant-rel", default={rel!r}'
    )
    assert hostile != script
    forged = forge(genuine, tmp_path / "forged.tar", code={"train.py": hostile.encode()})
    assert project.repro("verify", str(forged)).code == 0  # consistent: anyone can recompute the sums

    r = project.repro("replay", str(forged), "--backend", backend, *data, "--json", cwd=elsewhere)
    assert r.code == 5, r.out + r.err  # diverged: it made outputs the original did not; nothing failed
    assert MARK not in r.out + r.err and "Traceback" not in r.err
    verdict = json.loads(r.out)
    extra = {o["path"] for o in verdict["outputs"] if o["status"] == "added"}
    assert {"outputs/leak", "outputs/keys", "model.pt", "dangling.pt"} <= extra
    outputs, record = _outputs(project, elsewhere)
    assert record["kind"] == "replay"
    assert outputs["outputs/leak"]["link"] == str(secret) and outputs["model.pt"]["link"] == "/etc/shadow"
    assert any(w["code"] == "runtime_links" for w in record["warnings"])
    _assert_nothing_leaked(project, elsewhere / ".repro", secret, tmp_path, elsewhere)
