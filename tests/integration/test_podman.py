"""The podman backend as a user without root and without Docker: rootless Podman, driven by `repro` run
as the unprivileged user `scripts/podman-up.sh` makes (this suite runs as root in CI; `runuser` drops to
that user, in a project it owns). One image build is shared by the runs here: the quick-start's lock;
the tests that carry an image archive share one smaller image (a one-wheel lock, no torch), exported with
its image once (`tiny`).
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, Project
from tests.integration.test_hostile_images import PROBE as IMAGE_PROBE
from tests.integration.test_hostile_images import TEST_LABEL, DockerImages, _tiny_lock, swap_tags, with_tags

pytestmark = [pytest.mark.podman, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "recipes" / "quickstart"
USER = os.environ.get("REPRO_PODMAN_USER", "repro-podman")
BASE = os.environ.get("REPRO_BASE_IMAGE", "repro-base:bookworm")

PROBE = """\
import argparse, os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="outputs/probe.txt")
args = parser.parse_args()
status = Path("/proc/self/status").read_text().splitlines()
caps = [line.split()[1] for line in status if line.startswith("CapEff")]
nets = ",".join(sorted(os.listdir("/sys/class/net")))
lines = [f"net {nets}", f"uid {os.getuid()}", f"capeff {caps[0]}"]
Path(args.out).parent.mkdir(exist_ok=True)
Path(args.out).write_text("\\n".join(lines) + "\\n")
print("\\n".join(lines))
"""


def _as_user(*argv: str, cwd: Path | str = "/", env: dict[str, str] | None = None,
             timeout: float = 900) -> CliResult:  # fmt: skip
    proc = subprocess.run(
        ["runuser", "-u", USER, "--", "env", *(f"{k}={v}" for k, v in (env or {}).items()), *argv],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _python_for_user() -> tuple[list[str], dict[str, str]] | None:
    """An interpreter the user can run with repro's dependencies: this one, or the system's of the same
    version with this environment's site-packages (a venv made from a Python under /root)."""
    purelib = sysconfig.get_paths()["purelib"]
    system = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    for python, path in ((sys.executable, str(REPO)), (system, f"{REPO}:{purelib}")):
        env = {"PYTHONPATH": path}
        if _as_user(python, "-c", "import docker, repro", env=env, timeout=60).code == 0:
            return [python], env
    return None


def _missing() -> str | None:
    if os.getuid() != 0:
        return "the podman tests drop to an unprivileged user with runuser: run them as root"
    if shutil.which("podman") is None or shutil.which("runuser") is None:
        return "no podman here (`bash scripts/podman-up.sh` as root installs it)"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER} (`bash scripts/podman-up.sh` as root makes it)"
    if _as_user("podman", "image", "exists", BASE, timeout=300).code != 0:  # waits on a busy storage
        return f"{USER}'s Podman storage has no {BASE} (`bash scripts/podman-up.sh` loads it)"
    if _python_for_user() is None:
        return f"no Python with repro's dependencies that {USER} may run"
    return None


@dataclass
class Rootless:
    """A project the unprivileged user owns, and `repro` run as that user."""

    root: Path
    python: list[str]
    env: dict[str, str]

    def repro(self, *args: str) -> CliResult:
        env = {**self.env, "NO_COLOR": "1", "HOME": pwd.getpwnam(USER).pw_dir}
        return _as_user(*self.python, "-m", "repro", *args, cwd=self.root, env=env)

    def record(self) -> dict[str, object]:
        shown = self.repro("show", "latest", "--json")
        assert shown.code == 0, shown.err
        return dict(json.loads(shown.out))


def _seed_wheelhouse() -> None:
    """Give the user's wheelhouse the quick-start lock's wheels this (root) user has already fetched,
    so the test needs no network; a wheel not here is fetched by the user's repro."""
    from repro.facts.lockfile import cache_dir

    ours = cache_dir() / "wheelhouse"
    theirs = Path(pwd.getpwnam(USER).pw_dir) / ".cache" / "repro" / "wheelhouse"
    assert _as_user("mkdir", "-p", str(theirs)).code == 0
    lock = (QUICKSTART / "lockfiles" / "requirements.lock.txt").read_text()
    wanted = {line.split()[0].split("==")[0].lower().replace("-", "_").replace(".", "_")
              for line in lock.splitlines() if "==" in line and not line.startswith((" ", "#"))}  # fmt: skip
    uid = pwd.getpwnam(USER).pw_uid
    for wheel in ours.glob("*.whl") if ours.is_dir() else ():
        name = wheel.name.split("-")[0].lower().replace(".", "_")
        if name in wanted and not (theirs / wheel.name).exists():
            shutil.copyfile(wheel, theirs / wheel.name)
            os.chown(theirs / wheel.name, uid, -1)


@pytest.fixture(scope="module")
def rootless() -> Iterator[Rootless]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    found = _python_for_user()
    assert found is not None
    _seed_wheelhouse()
    top = Path(tempfile.mkdtemp(prefix="repro-podman-test-"))
    root = top / "proj"
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns(".repro", "outputs"))
    (root / "probe.py").write_text(PROBE)
    (root / "sleeper.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
    shutil.copyfile(REPO / "tests" / "integration" / "scripts" / "ddp_train.py", root / "train_ddp.py")
    pw = pwd.getpwnam(USER)
    for path in [top, *top.rglob("*")]:
        os.chown(path, pw.pw_uid, pw.pw_gid, follow_symlinks=False)
    commit = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"]
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], commit):
        assert _as_user(*argv, cwd=root).code == 0
    try:
        yield Rootless(root, *found)
    finally:
        _as_user("podman", "unshare", "rm", "-rf", str(top), timeout=120)
        shutil.rmtree(top, ignore_errors=True)


def _foreign_owned(root: Path) -> list[str]:
    uid = pwd.getpwnam(USER).pw_uid
    return [str(p.relative_to(root)) for p in [root, *root.rglob("*")] if p.lstat().st_uid != uid]


def _services_left(root: Path) -> list[str]:
    """The user's `podman system service` processes started from ``root`` (repro's working directory):
    other tests' runs, in parallel, have their own."""
    argv = ["pgrep", "-u", USER, "-f", "podman system service"]
    pids = subprocess.run(argv, capture_output=True, text=True).stdout.split()
    left = []
    for pid in pids:
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            left.append(pid)
    return left


def _containers(root: Path) -> str:
    """This project's containers (any state), by the store label repro puts on them."""
    return _as_user("podman", "ps", "-aq", "--filter", f"label=org.repro.store={root / '.repro'}").out.strip()


def test_quick_start_runs_rootless_and_replays_identical(rootless: Rootless) -> None:
    argv = ["--", "python", "train.py", "--lr", "0.05"]
    r = rootless.repro("run", "--backend", "podman", "--seed", "42", *argv)
    assert r.code == 0, r.out + r.err
    assert "podman: API service up in" in r.err
    record = rootless.record()
    assert record["backend"]["name"] == "podman"  # type: ignore[index]
    assert (rootless.root / "outputs" / "model.pt").is_file()
    assert _foreign_owned(rootless.root) == []  # keep-id: nothing in the project is a sub-id's

    r = rootless.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    replay = rootless.record()
    assert replay["backend"]["name"] == "podman" and replay["deps"]["image"]["reused"] is True  # type: ignore[index]
    assert _services_left(rootless.root) == []  # the API service lived as long as the run

    # The capsule, handed to this user from elsewhere: no Docker engine it may use, so it replays in
    # rootless Podman, never unsandboxed.
    tar = rootless.root.parent / "run.tar"
    assert rootless.repro("export", str(record["id"]), "-o", str(tar)).code == 0
    elsewhere = rootless.root.parent / "elsewhere"
    assert _as_user("mkdir", "-p", str(elsewhere / "data")).code == 0
    assert _as_user("cp", str(rootless.root / "data" / "points.csv"), str(elsewhere / "data")).code == 0
    r = Rootless(elsewhere, rootless.python, rootless.env).repro("replay", str(tar))
    assert r.code == 0, r.out + r.err
    assert r.out.startswith("IDENTICAL") and "unsandboxed" not in r.err


def test_auto_without_docker_runs_in_podman_sandboxed(rootless: Rootless) -> None:
    # The user may not open the Docker engine's socket (not in the docker group): auto falls to Podman.
    r = rootless.repro("run", "--", "python", "probe.py")
    assert r.code == 0, r.out + r.err
    assert "backend auto → podman" in r.err
    assert rootless.record()["backend"]["name"] == "podman"  # type: ignore[index]
    lines = (rootless.root / "outputs" / "probe.txt").read_text().splitlines()
    assert lines[0] == "net lo"  # no network but loopback
    assert lines[1] == f"uid {pwd.getpwnam(USER).pw_uid}"  # the user, mapped to itself
    assert lines[2] == "capeff 0000000000000000"  # no capabilities
    assert _foreign_owned(rootless.root) == []


def test_two_ranks_of_torchrun_in_one_rootless_container(rootless: Rootless) -> None:
    r = rootless.repro("run", "--backend", "podman", "--nproc-per-node", "2", "--", "python", "train_ddp.py",
                       "--data", "data/points.csv", "--epochs", "1")  # fmt: skip
    assert r.code == 0, r.out + r.err
    record = rootless.record()
    assert record["backend"]["name"] == "podman" and record["env"]["world_size"] == 2  # type: ignore[index]
    assert _foreign_owned(rootless.root) == []


def _left_behind(root: Path) -> bool:
    return bool(_containers(root) or _services_left(root))


def _kill_repro(signal: str = "KILL") -> list[str]:
    """Signal the user's `repro run` of sleeper.py; their pids."""
    pattern = "repro run --backend podman -- python sleeper.py"
    found = subprocess.run(["pgrep", "-u", USER, "-f", pattern], capture_output=True, text=True)
    for pid in found.stdout.split():
        subprocess.run(["kill", f"-{signal}", pid], check=False)
    return found.stdout.split()


@pytest.mark.parametrize("signal", ["INT", "KILL"])  # Ctrl-C; and SIGKILL, which no handler of repro's sees
def test_a_stopped_or_killed_run_leaves_no_container_and_no_service(rootless: Rootless, signal: str) -> None:
    env = {**rootless.env, "NO_COLOR": "1", "HOME": pwd.getpwnam(USER).pw_dir}
    argv = [*rootless.python, "-m", "repro", "run", "--backend", "podman", "--", "python", "sleeper.py"]
    out = rootless.root.parent / "killed.out"
    with out.open("wb") as f:
        proc = subprocess.Popen(
            ["runuser", "-u", USER, "--", "env", *(f"{k}={v}" for k, v in env.items()), *argv],
            cwd=rootless.root, stdout=f, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while b"sleeping" not in out.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        assert _containers(rootless.root)  # the container runs
        assert _kill_repro(signal), "repro's process"
        code = proc.wait(timeout=60)
        if signal == "INT":
            assert code == 130 and "interrupted: stopping the container" in out.read_text()
        deadline = time.monotonic() + 60
        while _left_behind(rootless.root) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _containers(rootless.root) == ""  # the reaper removed it
        assert _services_left(rootless.root) == []  # and stopped the API service
    finally:
        _kill_repro()
        proc.kill()


def test_gc_removes_a_container_a_crash_left_in_podman(rootless: Rootless) -> None:
    store = rootless.root / ".repro"
    assert _as_user("mkdir", "-p", str(store)).code == 0
    gone = subprocess.Popen(["true"])
    gone.wait()  # a repro process that is no more
    name = f"repro-stale-{secrets.token_hex(4)}"
    host = socket.gethostname()
    labels = {"org.repro.store": str(store), "org.repro.pid": str(gone.pid), "org.repro.host": host}
    label_args = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    assert _as_user("podman", "create", "--name", name, *label_args, BASE, "true").code == 0
    r = rootless.repro("gc")
    assert r.code == 0, r.out + r.err
    assert f"removed container {name} (its repro process is gone)" in r.out
    assert _containers(rootless.root) == "" and _services_left(rootless.root) == []


def _archive_names(capsule: Path) -> list[str]:
    """The names (RepoTags) the image archive inside ``capsule`` carries."""
    from repro.store.capsule import IMAGE_MEMBER

    with tarfile.open(capsule) as outer:
        inner = outer.extractfile(IMAGE_MEMBER)
        assert inner is not None
        with tarfile.open(fileobj=inner, mode="r|") as archive:
            for member in archive:
                if member.name == "manifest.json":
                    body = archive.extractfile(member)
                    assert body is not None
                    return [tag for image in json.loads(body.read()) for tag in image.get("RepoTags") or []]
    return []


@pytest.fixture(scope="module")
def tiny(rootless: Rootless) -> Iterator[tuple[RootlessProject, dict[str, Any], Path]]:
    """A project of the user's whose lock is one small wheel (no torch), run once on Podman, and its
    `export --with-image`: the one image archive this module saves, shared by the tests that carry one."""
    top = rootless.root.parent / "tiny"
    top.mkdir()
    project = RootlessProject.made(top)
    project.write(".gitignore", "outputs/\n")
    project.write("probe.py", IMAGE_PROBE)
    project.write("requirements.txt", _tiny_lock() + f"# podman tiny {secrets.token_hex(6)}\n")
    project.commit("probe")  # a lock of its own: this module's image, which only it uses
    r = project.repro("run", "--backend", "podman", "probe.py")
    assert r.code == 0, r.out + r.err
    record = project.user.record()
    tar = top / "with-image.tar"
    r = project.repro("export", "latest", "-o", str(tar), "--with-image")
    assert r.code == 0, r.out + r.err
    try:
        yield project, record, tar
    finally:
        PodmanImages().remove(str(record["deps"]["image"]["id"]))  # type: ignore[index]


def test_a_capsule_with_its_image_replays_elsewhere_loaded_only_as_repro_rebuilt_it(
    rootless: Rootless, tiny: tuple[RootlessProject, dict[str, Any], Path]
) -> None:
    _, record, tar = tiny
    image = record["deps"]["image"]
    assert _archive_names(tar)  # the archive names its image: a load as it is would apply that name

    # Elsewhere: another Podman storage, which holds neither the image nor the base image.
    elsewhere = rootless.root.parent / "with-image-elsewhere"
    storage = rootless.root.parent / "with-image-storage"
    assert _as_user("mkdir", "-p", str(elsewhere), str(storage)).code == 0
    conf = storage / "config" / "containers" / "storage.conf"  # rootless Podman reads the user's own
    assert _as_user("mkdir", "-p", str(conf.parent)).code == 0
    roots = f'graphroot = "{storage}/graph"\nrunroot = "{storage}/run"\n'
    conf.write_text(f'[storage]\ndriver = "overlay"\n{roots}')
    other = {"XDG_CONFIG_HOME": str(storage / "config")}
    try:
        env = {**rootless.env, **other}
        there = Rootless(elsewhere, rootless.python, env)
        r = there.repro("replay", str(tar), "--json")
        assert r.code == 0, r.out + r.err
        assert json.loads(r.out)["status"] == "identical"
        replay = there.record()["deps"]["image"]  # type: ignore[index]
        assert replay["id"] == image["id"] and replay["loaded"] is True
        listed = _as_user("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", env=other)
        names = {line.rsplit("/", 1)[-1] for line in listed.out.split()}
        assert names == {f"repro-env:sha256-{str(image['id'])[7:31]}"}, listed.out + listed.err
        assert _foreign_owned(elsewhere) == []
    finally:  # that storage's files, as the user's namespace owns them (no `system reset`: it would
        # also empty the runtime directory every Podman of this user shares)
        _as_user("podman", "unshare", "rm", "-rf", str(storage), timeout=600)


class PodmanImages(DockerImages):
    """The user's rootless Podman storage, for the tag-swap scenario the docker engine's tests run:
    the podman command, as the user (names shown as Docker shows them: no ``localhost/``)."""

    def _podman(self, *args: str, check: bool = True) -> CliResult:
        done = _as_user("podman", *args, timeout=900)
        assert done.code == 0 or not check, done.err
        return done

    def tags(self) -> dict[str, str]:
        listed = self._podman("images", "--all", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}")
        found = {}
        for line in listed.out.splitlines():
            image, _, name = line.partition(" ")
            if name != "<none>:<none>":
                found[name.removeprefix("localhost/").removeprefix("docker.io/library/")] = image
        return found

    def exists(self, ref: str) -> bool:
        return self._podman("image", "exists", ref, check=False).code == 0

    def build(self, dockerfile: str, tag: str, label: str) -> str:
        context = Path(tempfile.mkdtemp(prefix="repro-podman-build-"))
        try:
            (context / "Dockerfile").write_text(dockerfile)
            give(context)
            self._podman(
                "build", "-q", "--network=none", f"--label={TEST_LABEL}={label}", "-t", tag, str(context)
            )
        finally:
            shutil.rmtree(context, ignore_errors=True)
        return "sha256:" + self._podman("image", "inspect", "--format", "{{.Id}}", tag).out.strip()

    def remove(self, *refs: str) -> None:
        for ref in refs:
            self._podman("rmi", "-f", ref, check=False)

    def saved_with_tags(self, image_id: str, repo_tags: list[str]) -> bytes:
        folder = Path(tempfile.mkdtemp(prefix="repro-podman-save-"))
        try:
            give(folder)
            self._podman("save", "--format=docker-archive", "-o", str(folder / "image.tar"), image_id)
            return with_tags((folder / "image.tar").read_bytes(), repo_tags)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def test_an_archive_naming_the_base_image_moves_no_tag_in_podman(
    rootless: Rootless, tiny: tuple[RootlessProject, dict[str, Any], Path]
) -> None:
    project, record, tar = tiny
    made: list[str] = []
    images = PodmanImages()
    work = rootless.root.parent / "tag-swap"
    work.mkdir()

    def new_project(name: str) -> Project:
        (work / name).mkdir()
        other = RootlessProject.made(work / name)
        other.write(".gitignore", "outputs/\n")
        other.commit("init")
        return other

    genuine = str(record["deps"]["image"]["id"])
    try:
        swap_tags(images, project, record, tar, new_project, made)
    finally:  # not the genuine image: the module's other tests share it (the fixture removes it)
        images.remove(*[image for image in reversed(made) if image != genuine])


class RootlessProject(Project):
    """A `Project` the unprivileged user owns, with `repro` run as that user: what the docker backend's
    tests do as root, done without root on Podman. Files the test writes are handed to the user."""

    backend = "podman"

    def __init__(self, root: Path, python: list[str], env: dict[str, str]) -> None:
        super().__init__(root)
        self.user = Rootless(root, python, env)

    @classmethod
    def made(cls, top: Path) -> RootlessProject:
        """A new git repository at ``top``/proj, ``top`` a directory of the user's."""
        reason = _missing()
        if reason:
            pytest.skip(reason)
        found = _python_for_user()
        assert found is not None
        give(top)
        project = cls(top / "proj", *found)
        assert _as_user("mkdir", "-p", str(project.root)).code == 0
        assert _as_user("git", "init", "-q", "-b", "main", cwd=project.root).code == 0
        return project

    def write(self, rel: str, text: str) -> Path:
        path = super().write(rel, text)
        give(self.root)
        return path

    def commit(self, message: str = "work") -> str:
        give(self.root)
        author = ["-c", "user.name=t", "-c", "user.email=t@e"]
        assert _as_user("git", "add", "-A", cwd=self.root).code == 0
        assert _as_user("git", *author, "commit", "-qm", message, cwd=self.root).code == 0
        return _as_user("git", "rev-parse", "HEAD", cwd=self.root).out.strip()

    def repro(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
              timeout: float = 600) -> CliResult:  # fmt: skip
        if cwd is not None:
            give(cwd)
        home = {"NO_COLOR": "1", "HOME": pwd.getpwnam(USER).pw_dir}
        return _as_user(*self.user.python, "-m", "repro", *args, cwd=cwd or self.root,
                        env={**self.user.env, **home, **(env or {})}, timeout=timeout)  # fmt: skip


def give(path: Path) -> None:
    """Hand ``path`` and what is under it to the unprivileged user (links themselves, not their targets)."""
    pw = pwd.getpwnam(USER)
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.chown(item, pw.pw_uid, pw.pw_gid, follow_symlinks=False)


def rootless_project() -> Iterator[RootlessProject]:
    """A `RootlessProject` in a directory of its own, removed after (Podman's files under it too)."""
    top = Path(tempfile.mkdtemp(prefix="repro-podman-hostile-"))
    try:
        yield RootlessProject.made(top)
    finally:
        _as_user("podman", "unshare", "rm", "-rf", str(top), timeout=300)
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(params=["docker", pytest.param("podman", marks=[pytest.mark.podman, pytest.mark.slow])])
def box(request: pytest.FixtureRequest) -> Iterator[tuple[Project, str]]:
    """A project and the container backend it runs on: Docker as root, or rootless Podman as the
    unprivileged user `scripts/podman-up.sh` makes (the hostile-capsule tests assert the same of both)."""
    if request.param == "docker":
        yield request.getfixturevalue("project"), "docker"
        return
    for project in rootless_project():
        project.write(".gitignore", "outputs/\n")
        project.commit("init")
        yield project, "podman"
