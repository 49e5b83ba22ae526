"""The Docker backend against a real engine: images, sandbox, logs, failures, Ctrl-C, gc.

Tests marked ``docker`` skip with a reason when no engine answers or the base image is
missing (`make docker-up` makes both; CI runs it, so they run there). One torch image,
built from the repository's committed quick-start lock, is shared by every test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from repro.backends.base import BuiltImage, Event, RunSpec
from repro.backends.docker.backend import DockerBackend
from repro.backends.docker.container import FALLBACK_UID, INJECT, LIB, RUNTIME
from repro.backends.docker.engine import LABEL_RUN, engine, engine_available, find_image
from repro.backends.docker.gc import remove_images
from repro.backends.images import ImageInputs
from repro.config import DEFAULT_BASE_IMAGE
from repro.errors import BackendUnavailable, ExitCode
from tests.conftest import QUICKSTART_LOCK, REPO, Project, _docker_missing

# Two small pure-python locks cut from the committed torch lock: different lockfile
# bytes must give a new image, without installing torch twice.
TINY_LOCKS = {"a": ["typing-extensions"], "b": ["filelock", "typing-extensions"]}

PROBE = r"""
import json, os, sys
result = {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(), "python": sys.executable}
result["interfaces"] = sorted(os.listdir("/sys/class/net"))
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
result["no_new_privs"] = status["NoNewPrivs"].strip()
try:
    open("/work/probe-write.txt", "w").close()
    result["code_writable"] = True
except OSError:
    result["code_writable"] = False
with open("/work/outputs/probe.txt", "w") as f:
    f.write("written from the container\n")
result["shm_bytes"] = os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize
result["runtime_dir"] = os.environ.get("REPRO_RUNTIME_DIR")
result["pythonpath"] = os.environ.get("PYTHONPATH")
result["seed"] = os.environ.get("REPRO_SEED")
print(json.dumps(result))
print("to stderr", file=sys.stderr)
"""


@pytest.fixture(scope="session")
def engine_ready() -> None:
    reason = _docker_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def torch_image(engine_ready: None, tmp_path_factory: pytest.TempPathFactory) -> BuiltImage:
    """The torch environment image of the committed quick-start lock, built once per session."""
    spec = _spec(tmp_path_factory.mktemp("torch-image"), ["python", "-c", "pass"])
    return DockerBackend(ImageInputs(lockfile=QUICKSTART_LOCK)).prepare(spec, lambda e: None)


def _spec(root: Path, argv: list[str], **kw: object) -> RunSpec:
    (root / "outputs").mkdir(parents=True, exist_ok=True)
    defaults: dict[str, Any] = dict(
        argv=argv,
        project_root=root,
        workdir=".",
        env={"REPRO_SEED": "7", "PYTHONHASHSEED": "7", "REPRO_RUN_ID": f"t{time.time_ns()}"},
        runtime_dir=root.parent / f"{root.name}-runtime",
        stdout_path=root.parent / f"{root.name}-logs" / "stdout.log",
        stderr_path=root.parent / f"{root.name}-logs" / "stderr.log",
        outputs=["outputs"],
    )
    defaults.update(kw)
    return RunSpec(**defaults)


def _tiny_lock(path: Path, which: str, nonce: str = "") -> Path:
    entries = {}
    for block in QUICKSTART_LOCK.read_text().split("\n"):
        if block and not block[0].isspace() and "==" in block:
            current = block.split("==")[0]
            entries[current] = [block]
        elif block.strip().startswith("--hash") and entries:
            entries[current].append(block)
    text = "".join("\n".join(entries[name]) + "\n" for name in TINY_LOCKS[which])
    path.write_text(text + (f"# {nonce}\n" if nonce else ""))
    return path


def _repro_image_ids() -> set[str]:
    with engine() as client:
        return {str(i["Id"]) for i in client.api.images(all=True)}


def _containers_of(run_id: str) -> list[dict[str, Any]]:
    with engine() as client:
        found: list[dict[str, Any]] = client.api.containers(
            all=True, filters={"label": f"{LABEL_RUN}={run_id}"}
        )
        return found


# --------------------------------------------------------------------------- no engine needed


def test_engine_down_is_backend_unavailable_with_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert engine_available() is False
    spec = _spec(tmp_path / "p", ["python", "-c", "pass"])
    with pytest.raises(BackendUnavailable) as caught:
        DockerBackend().prepare(spec, lambda e: None)
    assert caught.value.exit_code == ExitCode.BACKEND_UNAVAILABLE
    hint = caught.value.hint or ""
    assert "DOCKER_HOST" in hint and "--backend local" in hint and "make " not in hint


def test_cli_engine_down_exits_3_without_traceback(project: Project, tmp_path: Path) -> None:
    project.write("train.py", "print('never runs')\n")
    project.commit("train")
    r = project.repro("run", "--backend", "docker", "--", "python", "train.py",
                      env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})  # fmt: skip
    assert r.code == 3, r.err
    assert "DOCKER_HOST" in r.err and "make docker-up" not in r.err
    assert "Traceback" not in r.err


# --------------------------------------------------------------------------- images


@pytest.mark.docker
def test_code_change_reuses_image_lockfile_change_builds_new(engine_ready: None, tmp_path: Path) -> None:
    root = tmp_path / "p"
    lock = _tiny_lock(tmp_path / "a.lock", "a")
    spec = _spec(root, ["python", "-c", "import typing_extensions"])
    (root / "train.py").write_text("print(1)\n")
    first = DockerBackend(ImageInputs(lockfile=lock)).prepare(spec, lambda e: None)
    (root / "train.py").write_text("print(2)\n")
    again = DockerBackend(ImageInputs(lockfile=lock)).prepare(spec, lambda e: None)
    assert again.reused is True and again.id == first.id and again.tag == first.tag
    before = _repro_image_ids()
    nonce = f"test {time.time_ns()}"  # new lockfile bytes: never built before
    changed = _spec(root, spec.argv)
    other = ImageInputs(lockfile=_tiny_lock(tmp_path / "b.lock", "b", nonce))
    events: list[Event] = []
    built = DockerBackend(other).prepare(changed, events.append)
    assert built.reused is False and built.tag != first.tag
    assert built.id not in before
    assert any(e.kind == "build" for e in events)
    assert built.base_id.startswith("sha256:") and built.base == DEFAULT_BASE_IMAGE
    assert f"FROM {built.base_id}" in built.dockerfile_text
    result = DockerBackend(other).execute(changed, lambda e: None)
    assert result.exit_code == 0, changed.stderr_path.read_text()
    assert [img.id for img in remove_images([built.id], DEFAULT_BASE_IMAGE).removed] == [built.id]


@pytest.mark.docker
def test_recorded_base_id_is_used_as_is(engine_ready: None, tmp_path: Path) -> None:
    spec = _spec(tmp_path / "p", ["python", "-c", "pass"])
    by_tag = DockerBackend().prepare(spec, lambda e: None)
    by_id = DockerBackend(ImageInputs(base_image=by_tag.base_id)).prepare(spec, lambda e: None)
    assert by_id.tag == by_tag.tag and by_id.reused is True
    with pytest.raises(BackendUnavailable, match="no base image"):
        DockerBackend(ImageInputs(base_image="sha256:" + "0" * 64)).prepare(spec, lambda e: None)


# --------------------------------------------------------------------------- execution


@pytest.mark.docker
def test_sandbox_not_root_no_network_writes_into_a_copy_of_the_project(
    engine_ready: None, tmp_path: Path
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "probe.py").write_text(PROBE)
    spec = _spec(root, ["python", "probe.py"])
    events: list[Event] = []
    result = DockerBackend().execute(spec, events.append)
    assert result.exit_code == 0, spec.stderr_path.read_text()
    probe = json.loads(spec.stdout_path.read_text())
    assert probe["uid"] != 0 and probe["gid"] != 0
    assert probe["uid"] == (os.getuid() if os.getuid() != 0 else FALLBACK_UID)
    assert probe["interfaces"] == ["lo"], probe  # no network interface but loopback
    assert probe["no_new_privs"] == "1"
    # The command wrote into its copy of the project; the file came back when it ended.
    assert probe["code_writable"] is True
    assert (root / "probe-write.txt").is_file() and "probe-write.txt" in result.written
    assert (root / "probe.py").read_text() == PROBE and "probe.py" not in result.written
    assert not (spec.runtime_dir.parent / "tree").exists()
    assert (root / "outputs" / "probe.txt").read_text() == "written from the container\n"
    assert (root / "outputs" / "probe.txt").stat().st_uid == os.getuid()  # handed back to the host user
    assert probe["python"] == "/opt/venv/bin/python" and probe["cwd"] == "/work"
    assert probe["shm_bytes"] >= 1 << 30
    assert probe["seed"] == "7" and probe["runtime_dir"] == RUNTIME
    assert probe["pythonpath"] == f"{INJECT}:{LIB}"
    # stdout and stderr are kept apart, in the files and in the events
    assert spec.stderr_path.read_text().splitlines()[-1] == "to stderr"
    assert "to stderr" not in spec.stdout_path.read_text()
    streamed = {name: b"".join(e.data for e in events if e.kind == "output" and e.stream == name)
                for name in ("stdout", "stderr")}  # fmt: skip
    assert streamed["stderr"].decode().splitlines()[-1] == "to stderr"
    assert streamed["stdout"].startswith(b"{") and b"to stderr" not in streamed["stdout"]
    assert result.details["network"] == "none"
    assert _containers_of(spec.env["REPRO_RUN_ID"]) == []


@pytest.mark.docker
def test_data_from_another_root_is_mounted_read_only(engine_ready: None, tmp_path: Path) -> None:
    data_root = tmp_path / "elsewhere"
    (data_root / "data").mkdir(parents=True)
    (data_root / "data" / "x.txt").write_text("from the data root\n")
    code = (
        "import pathlib\n"
        "print(pathlib.Path('data/x.txt').read_text(), end='')\n"
        "try:\n    open('data/y.txt', 'w')\nexcept OSError:\n    print('read-only')\n"
    )
    spec = _spec(tmp_path / "p", ["python", "-c", code], data=["data"], data_root=data_root)
    result = DockerBackend().execute(spec, lambda e: None)
    assert result.exit_code == 0, spec.stderr_path.read_text()
    assert spec.stdout_path.read_text() == "from the data root\nread-only\n"


@pytest.mark.docker
def test_network_opt_in_is_recorded(engine_ready: None, tmp_path: Path) -> None:
    code = "import os; print(' '.join(sorted(os.listdir('/sys/class/net'))))"
    spec = _spec(tmp_path / "p", ["python", "-c", code], network=True)
    result = DockerBackend().execute(spec, lambda e: None)
    assert result.exit_code == 0 and result.details["network"] == "bridge"
    assert spec.stdout_path.read_text().split() != ["lo"]  # an interface besides loopback


@pytest.mark.docker
def test_failing_command_exit_status_and_stderr(engine_ready: None, tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    shutil.copyfile(REPO / "tests" / "integration" / "scripts" / "crash.py", root / "crash.py")
    spec = _spec(root, ["python", "crash.py"])
    result = DockerBackend().execute(spec, lambda e: None)
    assert result.exit_code == 1 and not result.interrupted
    assert spec.stderr_path.read_text().splitlines()[-2:] == ["about to fail", "boom: the loss went to NaN"]
    assert _containers_of(spec.env["REPRO_RUN_ID"]) == []


@pytest.mark.docker
def test_ctrl_c_stops_and_removes_the_container(engine_ready: None, tmp_path: Path) -> None:
    code = (
        # "ready" is printed inside the try: a Ctrl-C that lands just after it is still caught
        "import time\ntry:\n    print('ready', flush=True)\n    time.sleep(120)\n"
        "except KeyboardInterrupt:\n    open('outputs/saved.txt', 'w').write('saved on Ctrl-C')\n    raise\n"
    )
    spec = _spec(tmp_path / "p", ["python", "-c", code])

    def on_event(event: Event) -> None:
        if event.kind == "output" and event.data == b"ready\n":
            raise KeyboardInterrupt  # what Ctrl-C raises in the main thread while logs stream

    start = time.monotonic()
    result = DockerBackend().execute(spec, on_event)
    assert result.interrupted is True and result.exit_code == 130
    assert time.monotonic() - start < 60
    assert _containers_of(spec.env["REPRO_RUN_ID"]) == []
    # Ctrl-C reaches the command as SIGINT first, so it can save what it has
    assert (tmp_path / "p" / "outputs" / "saved.txt").read_text() == "saved on Ctrl-C"


@pytest.mark.docker
def test_gpus_asked_for_and_absent_is_backend_unavailable(engine_ready: None, tmp_path: Path) -> None:
    with engine() as client:
        if "nvidia" in (client.info().get("Runtimes") or {}):
            pytest.skip("this engine has an NVIDIA runtime")
    spec = _spec(tmp_path / "p", ["python", "-c", "pass"], gpus="all")
    with pytest.raises(BackendUnavailable) as caught:
        DockerBackend().prepare(spec, lambda e: None)
    assert caught.value.exit_code == ExitCode.BACKEND_UNAVAILABLE


# --------------------------------------------------------------------------- real training, end to end


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.serial  # "the engine built nothing" is read engine-wide: not while other tests build
def test_real_training_twice_identical_bytes_no_rebuild(torch_image: BuiltImage, project: Project) -> None:
    project.script("train_unseeded.py", "train.py")
    project.points()
    project.lock_torch()
    project.commit("train")
    images_before = _repro_image_ids()
    models = []
    records = []
    for _ in range(2):
        r = project.repro("run", "--backend", "docker", "--seed", "7", "--data", "data",
                          "--", "python", "train.py", "--epochs", "1")  # fmt: skip
        assert r.code == 0, r.err
        models.append((project.root / "outputs" / "model.pt").read_bytes())
        records.append(json.loads(project.repro("show", "latest", "--json").out))
    assert models[0] == models[1]
    assert _repro_image_ids() == images_before  # the engine built nothing: the image is reused
    for record in records:
        assert record["backend"]["name"] == "docker"
        assert record["deps"]["image"]["tag"] == torch_image.tag
        assert record["deps"]["image"]["reused"] is True
        assert record["results"]["status"] == "succeeded"
    assert (project.root / "outputs" / "model.pt").stat().st_uid == os.getuid()


@pytest.mark.docker
def test_cli_crash_in_container_exits_4_with_stderr_tail(engine_ready: None, project: Project) -> None:
    project.script("crash.py")
    project.commit("crash")
    r = project.repro("run", "--backend", "docker", "--", "python", "crash.py")
    assert r.code == 4, r.err
    assert r.out == "starting\n"  # the command's stdout is repro's stdout
    assert r.err.count("boom: the loss went to NaN") == 1  # shown as it came, not again with the error
    assert r.err.index("about to fail") < r.err.index("boom") < r.err.index("repro: error:")


@pytest.mark.docker
def test_cli_ctrl_c_records_interrupted(engine_ready: None, project: Project) -> None:
    project.write("sleep.py", "import time\nprint('ready', flush=True)\ntime.sleep(120)\n")
    project.commit("sleep")
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", "run", "--backend", "docker", "--", "python", "sleep.py"],
        cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:  # the command's stdout is repro's stdout
        if "ready" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["results"]["status"] == "interrupted"
    assert _containers_of(record["id"]) == []


@pytest.mark.docker
def test_cli_build_reuses_and_gc_spares_kept_images(torch_image: BuiltImage, project: Project) -> None:
    project.lock_torch()
    r = project.repro("build")
    assert r.code == 0, r.err
    assert r.out.startswith(torch_image.tag) and "reused" in r.out
    r = project.repro("gc", "--images", "--dry-run")  # this store found the image, it did not make it
    assert r.code == 0, r.err
    assert torch_image.tag not in r.out and "no unused images of this store" in r.err
    assert torch_image.id in _repro_image_ids()


@pytest.mark.docker
def test_gc_removes_unreferenced_images_only(engine_ready: None, tmp_path: Path) -> None:
    lock = _tiny_lock(tmp_path / "gc.lock", "a", nonce=f"gc test {time.time_ns()}")
    spec = _spec(tmp_path / "p", ["python", "-c", "pass"])
    doomed = DockerBackend(ImageInputs(lockfile=lock)).prepare(spec, lambda e: None)
    with engine() as client:
        base_id = find_image(client, DEFAULT_BASE_IMAGE)
    assert base_id is not None
    spared = remove_images([base_id], DEFAULT_BASE_IMAGE, dry_run=True)
    assert spared.removed == [] and "base image" in spared.kept[0][1]
    sweep = remove_images([doomed.id, "sha256:" + "0" * 64], DEFAULT_BASE_IMAGE)
    assert [img.id for img in sweep.removed] == [doomed.id] and sweep.gone == ["sha256:" + "0" * 64]
    assert sweep.freed is not None and doomed.id not in _repro_image_ids()
    assert base_id in _repro_image_ids()


@pytest.mark.docker
def test_docker_up_is_fast_when_everything_is_up(engine_ready: None) -> None:
    start = time.monotonic()
    proc = subprocess.run(["bash", str(REPO / "scripts" / "docker-up.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ready" in proc.stderr
    assert time.monotonic() - start < 30
