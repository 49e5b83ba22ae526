"""Source builds without an engine: build requirements read as data, the sandbox's output taken with care.

The engine side (a real container) is covered by tests/integration/test_source_builds_docker.py;
here a fake sandbox implements the same contract (input tar in, /build/out as a tar out).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from repro.backends import sourcebuild
from repro.errors import BuildError, ExitCode
from repro.facts.lockfile import Pinned
from repro.fetch.pinned import Fetched


def _sdist(dest: Path, filename: str, files: dict[str, str]) -> Path:
    path = dest / filename
    top = filename.removesuffix(".tar.gz").removesuffix(".zip")
    if filename.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as z:
            for name, text in files.items():
                z.writestr(f"{top}/{name}", text)
        return path
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def test_build_requirements_are_read_from_pyproject_as_data(tmp_path: Path) -> None:
    legacy = _sdist(
        tmp_path, "antlr4-python3-runtime-4.9.3.tar.gz", {"setup.py": "raise SystemExit('never run')"}
    )
    assert sourcebuild.build_requires(legacy) == ["setuptools>=40.8.0", "wheel"]
    text = '[build-system]\nrequires = ["hatchling>=1.20"]\nbuild-backend = "hatchling.build"\n'
    hatch = _sdist(tmp_path, "x-1.0.tar.gz", {"pyproject.toml": text})
    assert sourcebuild.build_requires(hatch) == ["hatchling>=1.20"]
    setuptools = _sdist(
        tmp_path, "zope.interface-6.0.zip",
        {"pyproject.toml": '[build-system]\nrequires = ["setuptools>=61", "cffi; python_version < \'3\'"]\n'
                           'build-backend = "setuptools.build_meta"\n'},
    )  # fmt: skip
    assert sourcebuild.build_requires(setuptools, "3.11") == [
        "setuptools>=61",
        "wheel",
    ]  # marker false: dropped
    no_system = _sdist(tmp_path, "y-1.0.tar.gz", {"pyproject.toml": "[tool.black]\nline-length = 100\n"})
    assert sourcebuild.build_requires(no_system) == ["setuptools>=40.8.0", "wheel"]
    nested = _sdist(tmp_path, "z-1.0.tar.gz", {"sub/pyproject.toml": '[build-system]\nrequires = ["evil"]\n'})
    assert sourcebuild.build_requires(nested) == ["setuptools>=40.8.0", "wheel"]  # only the top level counts


@pytest.mark.parametrize(
    ("pyproject", "says"),
    [
        ('[build-system]\nrequires = ["evil @ https://attacker.example/evil.whl"]\n', "names a URL"),
        ("[build-system]\nrequires = 'setuptools'\n", "not a list of strings"),
        ('[build-system]\nrequires = ["not a requirement!!"]\n', "malformed build requirement"),
        ("[build-system\n", "not valid TOML"),
        ("[build-system]\nrequires = [" + ", ".join(f'"p{i}"' for i in range(40)) + "]\n", "at most 32"),
    ],
)
def test_build_requirements_that_are_not_plain_index_wheels_are_refused(
    tmp_path: Path, pyproject: str, says: str
) -> None:
    sdist = _sdist(tmp_path, "bad-1.0.tar.gz", {"pyproject.toml": pyproject})
    with pytest.raises(BuildError, match=says) as caught:
        sourcebuild.build_requires(sdist)
    assert "bad-1.0.tar.gz" in caught.value.message and "\n" not in caught.value.message
    broken = tmp_path / "broken-1.0.tar.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(BuildError, match="not a readable source distribution"):
        sourcebuild.build_requires(broken)


# --------------------------------------------------------------------------- the sandbox's output


WHEEL = "hostile_pkg-1.0-py3-none-any.whl"


def _out_tar(dest: Path, members: list[tarfile.TarInfo], bodies: dict[str, bytes]) -> None:
    with tarfile.open(dest, "w") as tar:
        for info in members:
            body = bodies.get(info.name)
            if body is not None:
                info.size = len(body)
            tar.addfile(info, io.BytesIO(body) if body is not None else None)


def _member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


class FakeSandbox:
    """Implements ``SandboxRun``: records what it was given, leaves the given members in /build/out."""

    def __init__(self, members: list[tarfile.TarInfo], bodies: dict[str, bytes], lines: list[str]) -> None:
        self.members, self.bodies, self.lines = members, bodies, lines
        self.inputs: list[list[str]] = []

    def __call__(self, inbox: Path, outbox: Path, timeout: int, on_line: sourcebuild.OnLine) -> int:
        assert timeout == sourcebuild.TIMEOUT_S
        with tarfile.open(inbox) as tar:
            self.inputs.append(tar.getnames())
            script = tar.extractfile("build/build.sh")
            assert script is not None and b"--no-index" in script.read()
            assert tar.getmember("build/out").mode == 0o777  # writable by the sandbox's user
        for line in self.lines:
            on_line(line)
        _out_tar(outbox, self.members, self.bodies)
        return 0


def _pinned_sdist(tmp_path: Path) -> tuple[Pinned, Fetched]:
    text = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    sdist = _sdist(tmp_path, "hostile_pkg-1.0.tar.gz", {"pyproject.toml": text})
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    return Pinned("hostile-pkg", "1.0", [digest], f"hostile-pkg==1.0 --hash=sha256:{digest}"), Fetched(
        "hostile-pkg", sdist, digest, "sdist"
    )


def test_only_the_pinned_projects_wheel_leaves_the_sandbox_and_is_cached(tmp_path: Path) -> None:
    req, sdist = _pinned_sdist(tmp_path)
    members = [
        _member("out/"),
        _member(f"out/{WHEEL}"),
        _member("out/torch-9.9-py3-none-any.whl"),  # another project's wheel: not taken for this pin
        _member("out/hostile_pkg-1.0-py3-none-any.whl.link", tarfile.SYMTYPE, "/etc/shadow"),
        _member("out/../../escape-1.0-py3-none-any.whl"),
        _member("out/sub/hostile_pkg-1.0-py3-none-any.whl"),
    ]
    bodies = {m.name: b"x" for m in members if m.isreg() and m.name.endswith(".whl")}
    bodies[f"out/{WHEEL}"] = b"the built wheel"
    sandbox = FakeSandbox(members, bodies, ["repro-sandbox: building hostile_pkg-1.0.tar.gz"])
    cache = tmp_path / "cache"
    lines: list[str] = []
    built = sourcebuild.build([(req, sdist)], "sha256:" + "ab" * 32, None, sandbox, lines.append, cache)
    got = built["hostile-pkg"]
    assert got.wheel.name == WHEEL and got.wheel.read_bytes() == b"the built wheel"
    assert (
        got.sha256 == hashlib.sha256(b"the built wheel").hexdigest() and got.sdist == "hostile_pkg-1.0.tar.gz"
    )
    assert got.wheel.parent == cache / sdist.sha256 / ("ab" * 12)
    assert sorted(p.name for p in got.wheel.parent.iterdir()) == ["build.log", WHEEL]
    assert not (tmp_path / "escape-1.0-py3-none-any.whl").exists()
    assert sandbox.inputs == [
        [
            "build",
            "build/build.sh",
            "build/sdists",
            "build/sdists/hostile_pkg-1.0.tar.gz",
            "build/wheels",
            "build/out",
        ]
    ]  # fmt: skip  (no build requirements: no pip)
    again = sourcebuild.build([(req, sdist)], "sha256:" + "ab" * 32, None, sandbox, lines.append, cache)
    assert again == built and len(sandbox.inputs) == 1  # from the cache, no second sandbox
    other_base = sourcebuild.build([(req, sdist)], "sha256:" + "cd" * 32, None, sandbox, lines.append, cache)
    assert other_base["hostile-pkg"].wheel != got.wheel and len(sandbox.inputs) == 2


def test_a_build_that_leaves_no_wheel_is_one_line_naming_the_package(tmp_path: Path) -> None:
    req, sdist = _pinned_sdist(tmp_path)
    output = [
        "repro-sandbox: building hostile_pkg-1.0.tar.gz",
        "  SystemExit: hostile build: the host secret was not there to take \x1b[31m",
        "  error: subprocess-exited-with-error",
        "ERROR: Failed to build one or more wheels",
        "repro-sandbox: hostile_pkg-1.0.tar.gz did not build",
    ]
    sandbox = FakeSandbox([_member("out/")], {}, output)
    with pytest.raises(sourcebuild.SourceBuildFailed) as caught:
        sourcebuild.build(
            [(req, sdist)], "sha256:" + "ab" * 32, None, sandbox, lambda line: None, tmp_path / "c"
        )
    message = caught.value.message
    assert message.startswith("hostile-pkg==1.0 did not build from source in the sandbox")
    assert (
        "the host secret was not there to take" in message and "\x1b" not in message and "\n" not in message
    )
    assert caught.value.exit_code == ExitCode.UNEXPECTED
    log = caught.value.log
    assert log is not None and str(log) in (caught.value.hint or "") and "did not build" in log.read_text()
