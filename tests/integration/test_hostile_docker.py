"""Containment with the Docker backend: forged capsules, the network, host ownership, orphans.

Every container these tests create themselves carries a unique test label and is removed by
that label; the engine and its images are shared, so nothing else is touched. Network checks
look at the interfaces inside the container (/sys/class/net), never at outside addresses.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repro.backends.docker.engine import LABEL_HOST, LABEL_PID, LABEL_STORE, engine
from repro.config import DEFAULT_BASE_IMAGE
from tests.conftest import Project
from tests.forging import forge
from tests.integration.test_podman import box as box  # noqa: F401 - the fixture: docker, rootless podman

pytestmark = pytest.mark.docker  # skipped, with the reason, where no engine with the base image answers

PROBE = """\
import argparse, json, os
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--out", default="outputs")
args = p.parse_args()
Path(args.out).mkdir(exist_ok=True)
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
probe = {"interfaces": sorted(os.listdir("/sys/class/net")), "no_new_privs": status["NoNewPrivs"].strip(),
         "ld_preload": os.environ.get("LD_PRELOAD")}
Path(args.out, "probe.json").write_text(json.dumps(probe))
print(json.dumps(probe))
"""


def _containers(label: str) -> list[dict[str, Any]]:
    with engine() as client:
        return list(client.api.containers(all=True, filters={"label": label}))


@pytest.fixture
def test_label() -> Iterator[str]:
    """A label for the containers one test creates; whatever carries it is removed afterwards."""
    label = f"org.repro.test={uuid.uuid4().hex}"
    yield label
    with engine() as client:
        for item in client.api.containers(all=True, filters={"label": label}):
            client.api.remove_container(item["Id"], force=True)


def _probe_project(project: Project) -> None:
    project.write("probe.py", PROBE)
    project.commit("probe")


def test_a_container_replay_stays_off_the_network_and_away_from_host_paths(box: tuple[Project, str]) -> None:
    project, backend = box
    tmp_path = project.root.parent  # the user's own directory (rootless: the test's tmp_path is root's)
    _probe_project(project)
    r = project.repro("run", "--backend", backend, "probe.py")
    assert r.code == 0, r.err
    run = json.loads((project.root / "outputs" / "probe.json").read_text())
    assert run["interfaces"] == ["lo"] and run["no_new_privs"] == "1"
    tar = tmp_path / "export" / "probe.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0

    host = tmp_path / "host-output-dir"
    bad = forge(tar, tmp_path / "roots.tar", lambda rec: rec["results"].update(output_roots=[str(host)]))
    r = project.repro("replay", str(bad))
    assert r.code == 6 and "output_roots" in r.err, r.err
    assert not host.exists()

    def asks(record: dict[str, Any]) -> None:
        record["backend"]["network"] = True
        record["determinism"]["env"]["LD_PRELOAD"] = "/tmp/evil.so"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bad = forge(tar, tmp_path / "asks.tar", asks)
    r = project.repro("replay", str(bad), "--backend", backend, "--json", cwd=elsewhere)
    assert r.code == 0, r.out + r.err  # no network and no LD_PRELOAD: the probe saw what the run saw
    assert json.loads(r.out)["status"] == "identical"
    assert "asked for a network" in r.err and "LD_PRELOAD" in r.err

    r = project.repro("replay", str(bad), "--backend", backend, "--network", "--json", cwd=elsewhere)
    assert r.code == 5, r.out + r.err  # with --network the container has an interface besides lo
    assert "outputs/probe.json" in r.out
    replay = json.loads(project.repro("show", "latest", "--json", cwd=elsewhere).out)
    assert replay["backend"]["network"] is True and "LD_PRELOAD" not in replay["determinism"]["env"]


@pytest.mark.skipif(os.getuid() != 0, reason="host ownership is only changed when repro runs as root")
def test_host_owners_and_modes_are_left_as_they_were(project: Project) -> None:
    _probe_project(project)
    outputs = project.root / "outputs"
    outputs.mkdir()
    theirs = outputs / "someone-elses.txt"
    theirs.write_text("not the run's\n")
    os.chown(theirs, 4242, 4243)
    os.chown(outputs, 4242, 4243)
    project.root.chmod(0o750)
    r = project.repro("run", "--backend", "docker", "probe.py")
    assert r.code == 0, r.err
    assert (theirs.stat().st_uid, theirs.stat().st_gid) == (4242, 4243)
    assert (outputs.stat().st_uid, outputs.stat().st_gid) == (4242, 4243)
    assert project.root.stat().st_mode & 0o777 == 0o750
    written = outputs / "probe.json"
    assert (written.stat().st_uid, written.stat().st_gid) == (0, 0)  # the run's own file: the host user's


def test_sigkill_of_repro_removes_its_container(project: Project) -> None:
    project.write("slow.py", (Path(__file__).parent / "scripts" / "slow_train.py").read_text())
    project.commit("slow")
    store = (project.root / ".repro").resolve()
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", "run", "--backend", "docker", "--", "python", "slow.py"],
        cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    label = f"{LABEL_STORE}={store}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not [c for c in _containers(label) if c["State"] == "running"]:
        time.sleep(0.2)
    running = _containers(label)
    assert running and running[0]["Labels"][LABEL_PID] == str(proc.pid), proc.stdout
    time.sleep(1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _containers(label):
        time.sleep(0.3)
    assert _containers(label) == [], "the container outlived repro"


def test_gc_removes_only_this_stores_containers_whose_repro_is_gone(
    project: Project, test_label: str
) -> None:
    store = (project.root / ".repro").resolve()
    store.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    key, _, value = test_label.partition("=")

    def create(pid: int, store_path: str) -> str:
        labels = {key: value, LABEL_STORE: store_path, LABEL_PID: str(pid),
                  LABEL_HOST: socket.gethostname()}  # fmt: skip
        with engine() as client:
            return str(client.api.create_container(DEFAULT_BASE_IMAGE, ["true"], labels=labels)["Id"])

    stale = create(dead.pid, str(store))
    live = create(os.getpid(), str(store))
    other_store = create(dead.pid, str(store) + "-another")
    r = project.repro("gc")
    assert r.code == 0, r.err
    left = {c["Id"] for c in _containers(test_label)}
    assert stale not in left and {live, other_store} <= left
    assert "its repro process is gone" in r.out
