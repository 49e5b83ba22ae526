"""Hostile capsules replayed as the person receiving them would: the replaying side decides the
backend, the Slurm allocation, the trackers contacted and the environment.

Each capsule is a genuine export of a local run, forged as an attacker does (record edited, code
swapped, SHA256SUMS recomputed; tests/forging.py). Replays happen in another directory, whose store
has never seen the run. A dead DOCKER_HOST stands for a machine without a Docker engine; the docker
sandbox itself is exercised in tests/integration/test_sandbox_docker.py.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repro.errors import ExitCode
from repro.store.runs import Store
from tests.builders import hand_trained
from tests.conftest import Cli, Project
from tests.forging import forge

TRAIN = hand_trained()

EVIL = """\
import json
import os
from pathlib import Path

Path(os.environ["MARKER"] if "MARKER" in os.environ else {marker!r}).write_text("the capsule's code ran here")
runtime = os.environ.get("REPRO_RUNTIME_DIR")
if runtime:  # report a tracker the host should contact afterwards
    with open(Path(runtime) / "links.jsonl", "a") as f:
        f.write(json.dumps({{"kind": "mlflow", "tracking_uri": {uri!r}}}) + "\\n")
seen = {{k: os.environ.get(k) for k in ("LD_PRELOAD", "PYTHONPATH", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")}}
Path("outputs").mkdir(exist_ok=True)
Path("outputs/seen.json").write_text(json.dumps(seen))
print("epoch 0 loss 0.25")
"""


@pytest.fixture
def genuine(project: Project, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("REPRO_BACKEND", "REPRO_MODE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    project.write("train.py", TRAIN)
    project.commit("train")
    r = cli(
        "run",
        "--backend",
        "local",
        "--seed",
        "3",
        "--",
        "python",
        "train.py",
        "--epochs",
        "3",
        cwd=project.root,
    )
    assert r.code == 0, r.err
    tar = tmp_path / "genuine.tar"
    assert cli("export", "latest", "-o", str(tar), cwd=project.root).code == 0
    return tar


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    where = tmp_path / "elsewhere"
    where.mkdir()
    return where


class Listener:
    """An HTTP server on 127.0.0.1 that answers every request with ``{}`` and counts them."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        seen = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                seen.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = _answer

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def _evil(
    genuine: Path, tmp_path: Path, marker: Path, uri: str = "http://127.0.0.1:9", **changes: Any
) -> Path:
    def edit(record: dict[str, Any]) -> None:
        record["backend"]["name"] = "local"
        for path, value in changes.items():
            node = record
            *parents, last = path.split("__")
            for part in parents:
                node = node[part]
            node[last] = value

    code = {"train.py": EVIL.format(marker=str(marker), uri=uri).encode()}
    return forge(genuine, tmp_path / "evil.tar", edit, code)


def test_a_capsule_saying_local_does_not_run_on_this_machine_without_docker_and_without_a_host_backend(
    genuine: Path, elsewhere: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "host-marker"
    evil = _evil(genuine, tmp_path, marker)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens: no engine on this machine
    (elsewhere / "repro.yaml").write_text("backend: local\n")  # a project file does not count either
    r = cli("replay", str(evil), cwd=elsewhere)
    assert r.code == ExitCode.BACKEND_UNAVAILABLE, r.out + r.err
    assert "replays only in the container sandbox" in r.err and "--backend local" in r.err
    assert "Traceback" not in r.err and not marker.exists()
    rows = json.loads(cli("ls", "--json", cwd=elsewhere).out)["runs"]
    assert [row["kind"] for row in rows] == ["run"]  # imported only

    monkeypatch.setenv("REPRO_BACKEND", "local")  # the replaying side names the host: it runs, and is told
    r = cli("replay", str(evil), cwd=elsewhere)
    assert marker.read_text() == "the capsule's code ran here"
    assert (
        "REPRO_BACKEND local: the code of this run from elsewhere runs unsandboxed on this machine" in r.err
    )


def test_a_run_imported_earlier_stays_from_elsewhere_when_replayed_by_its_id(
    genuine: Path, elsewhere: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "host-marker"
    evil = _evil(genuine, tmp_path, marker)
    assert cli("verify", str(evil), cwd=elsewhere).code == 0
    store = Store(elsewhere)
    run_id = store.import_run(store.open_capsule(evil)).record.id
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    r = cli("replay", run_id, cwd=elsewhere)
    assert r.code == ExitCode.BACKEND_UNAVAILABLE and not marker.exists(), r.err

    r = cli("replay", run_id, "--backend", "local", "--json", cwd=elsewhere)
    assert (
        marker.exists() and "--backend local: the code of this run from elsewhere runs unsandboxed" in r.err
    )
    replay_id = json.loads(r.out)["replay_id"]
    assert store.is_foreign(replay_id)  # what was made from it is from elsewhere too
    r = cli("replay", replay_id, cwd=elsewhere)
    assert r.code == ExitCode.BACKEND_UNAVAILABLE, r.err


def test_check_against_a_golden_capsule_follows_the_same_rule(
    genuine: Path, project: Project, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "host-marker"
    evil = _evil(genuine, tmp_path, marker, command__argv=["python", "-c", f"open({str(marker)!r}, 'w')"])
    clone = tmp_path / "ci-checkout"  # CI: a fresh checkout whose store has never seen the golden run
    clone.mkdir()
    (clone / "train.py").write_text(TRAIN)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    r = cli("check", "--against", str(evil), cwd=clone)
    assert r.code == ExitCode.BACKEND_UNAVAILABLE and "--backend local" in r.err, r.err
    assert not marker.exists()
    r = cli("check", "--against", str(evil), "--backend", "local", cwd=clone)
    assert marker.exists() and "runs unsandboxed on this machine" in r.err


def test_a_newline_in_a_recorded_partition_is_exit_6_and_nothing_is_submitted(
    genuine: Path, elsewhere: Path, cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "injected"
    options: dict[str, Any] = {"partition": f"debug\ntouch {marker}", "sbatch_args": []}
    evil = _evil(genuine, tmp_path, tmp_path / "host-marker", backend__name="slurm",
                 backend__details={"slurm": {"options": options}})  # fmt: skip
    r = cli("replay", str(evil), "--backend", "slurm", cwd=elsewhere)
    assert r.code == ExitCode.CAPSULE_INVALID, r.out + r.err
    assert "the recorded Slurm options: partition" in r.err and "control character" in r.err
    error = [line for line in r.err.splitlines() if line.startswith("repro: error:")]
    assert len(error) == 1 and "'debug\\ntouch " in error[0] and "Traceback" not in r.err
    assert not marker.exists() and not list(elsewhere.rglob("job.sbatch"))

    wrap = {"slurm": {"options": {"sbatch_args": ["--wrap=touch /tmp/x"]}}}
    evil = _evil(genuine, tmp_path, tmp_path / "host-marker", backend__name="slurm", backend__details=wrap)
    other = tmp_path / "another"  # a store that has not imported the first forgery under that id
    other.mkdir()
    r = cli("replay", str(evil), "--backend", "slurm", cwd=other)
    assert r.code == ExitCode.CAPSULE_INVALID and "--wrap is not one repro passes" in r.err, r.err


def test_a_newline_in_a_partition_flag_is_a_usage_error(project: Project, cli: Cli) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    r = cli("run", "--backend", "slurm", "--partition", "debug\nid", "train.py", cwd=project.root)
    assert r.code == ExitCode.USAGE, r.err
    assert "partition 'debug\\nid' has a newline or another control character (from --partition)" in r.err
    r = cli("run", "--backend", "slurm", "--sbatch-arg=--export=ALL", "train.py", cwd=project.root)
    assert r.code == ExitCode.USAGE and "--export is not one repro passes" in r.err, r.err


def test_a_tracking_uri_in_a_capsule_is_shown_never_contacted(
    genuine: Path, elsewhere: Path, project: Project, tmp_path: Path, listener: Listener
) -> None:
    """In a repro process of its own, as a user runs it (MLflow is imported for real)."""
    trackers = [{"tool": "mlflow", "tracking_uri": listener.uri, "runs": ["0123456789abcdef"]}]
    evil = _evil(genuine, tmp_path, tmp_path / "host-marker", uri=listener.uri, results__trackers=trackers)
    host = {"MLFLOW_TRACKING_TOKEN": "host-secret"}  # what a contacted URI would receive
    r = project.repro("replay", str(evil), "--backend", "local", cwd=elsewhere, env=host)
    assert r.code in (0, ExitCode.NOT_REPRODUCED), r.err
    assert listener.requests == []
    said = f"the record names tracking URI {listener.uri}; not contacted"
    assert r.err.count(said) == 2  # the one the replayed code reported, and the capsule's

    # The control: the same capsule, where this machine itself configured that URI, is tagged there.
    r = project.repro("replay", str(evil), "--backend", "local", cwd=elsewhere,
                      env={**host, "MLFLOW_TRACKING_URI": listener.uri})  # fmt: skip
    assert any("set-tag" in request for request in listener.requests), (listener.requests, r.err)


def test_dangerous_variables_in_a_capsule_are_dropped_and_named(
    genuine: Path, elsewhere: Path, cli: Cli, tmp_path: Path
) -> None:
    variables = {
        "LD_PRELOAD": "/tmp/evil.so",
        "PYTHONPATH": "/tmp/evil",
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    }
    evil = _evil(genuine, tmp_path, tmp_path / "host-marker", env__variables=variables,
                 determinism__env={"REPRO_MODE": "strict", "LD_PRELOAD": "/tmp/evil.so"})  # fmt: skip
    r = cli("replay", str(evil), "--backend", "local", "--json", cwd=elsewhere)
    assert r.code in (0, ExitCode.NOT_REPRODUCED), r.err
    assert "never sets from a record were dropped: LD_PRELOAD, PYTHONPATH" in r.err
    assert "set again: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" in r.err
    assert "environment variables in the capsule that repro does not set were dropped: LD_PRELOAD" in r.err
    store = Store(elsewhere)
    replay = store.load_run(json.loads(r.out)["replay_id"]).record
    seen = next(o for o in replay.results.outputs if o.path == "outputs/seen.json")
    view = json.loads(store.read_blob(seen.hash) or b"{}")
    assert view["LD_PRELOAD"] is None and view["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"
    assert "/tmp/evil" not in (view["PYTHONPATH"] or "")

    r = cli("replay", str(evil), "--backend", "local", "--env", "LD_PRELOAD", cwd=elsewhere)
    assert r.code == ExitCode.USAGE and "never sets this variable" in r.err
