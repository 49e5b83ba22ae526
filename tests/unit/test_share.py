"""Registry references, the host's logins and the manifests `repro pull` accepts: no network."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid, UsageError
from repro.share import artifact, auth, reference


@pytest.mark.parametrize(
    ("raw", "registry", "repository", "tag", "digest"),
    [
        ("oci://ghcr.io/team/runs:baseline", "ghcr.io", "team/runs", "baseline", None),
        ("localhost:5000/runs", "localhost:5000", "runs", None, None),
        ("127.0.0.1:41234/a/b/c:v1.2", "127.0.0.1:41234", "a/b/c", "v1.2", None),
        (f"reg.example/runs@sha256:{'a' * 64}", "reg.example", "runs", None, f"sha256:{'a' * 64}"),
    ],
)
def test_references_parse(
    raw: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = reference.parse(raw)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)


@pytest.mark.parametrize(
    "raw",
    ["runs:v1", "oci://team/runs:v1", "ghcr.io/Team/runs:v1", "ghcr.io/runs@sha256:abc", "ghcr.io/r:bad tag"],
)
def test_a_reference_without_a_registry_or_malformed_is_a_usage_error(raw: str) -> None:
    with pytest.raises(UsageError):
        reference.parse(raw)


@pytest.mark.parametrize(
    ("raw", "loopback"),
    [("localhost:5000/r", True), ("127.0.0.1:5000/r", True), ("127.8.0.1/r", True), ("[::1]:5000/r", True),
     ("ghcr.io/r", False), ("10.0.0.1:5000/r", False), ("localhost.evil.example/r", False)],
)  # fmt: skip
def test_only_this_machine_is_loopback(raw: str, loopback: bool) -> None:
    assert reference.parse(raw).loopback is loopback


def test_a_reference_names_its_tag_and_digest() -> None:
    ref = reference.parse("ghcr.io/team/runs:v1").with_digest(f"sha256:{'b' * 64}")
    assert str(ref) == f"ghcr.io/team/runs:v1@sha256:{'b' * 64}"
    assert ref.reference == f"sha256:{'b' * 64}"  # the API is asked by digest once known
    assert str(reference.parse("ghcr.io/team/runs")) == "ghcr.io/team/runs:latest"


def _auth_file(path: Path, entries: dict[str, object]) -> Path:
    path.write_text(json.dumps(entries))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "DOCKER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_the_registry_auth_file_wins_over_dockers(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".docker").mkdir()
    _auth_file(home / ".docker" / "config.json", {"auths": {"reg.example": {"auth": _b64("docker:one")}}})
    assert auth.find_login("reg.example") == auth.Login(
        "docker", "one", str(home / ".docker" / "config.json")
    )
    podman = _auth_file(
        home / "auth.json", {"auths": {"reg.example": {"auth": _b64("podman:two:with:colons")}}}
    )
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(podman))
    assert auth.find_login("reg.example") == auth.Login("podman", "two:with:colons", str(podman))
    assert auth.find_login("other.example") is None


def test_a_url_key_and_an_unreadable_file_are_handled_as_docker_does(home: Path) -> None:
    (home / ".config" / "containers").mkdir(parents=True)
    (home / ".config" / "containers" / "auth.json").write_text("{not json")
    (home / ".docker").mkdir()
    _auth_file(home / ".docker" / "config.json", {"auths": {"https://reg.example": {"auth": _b64("u:p")}}})
    found = auth.find_login("reg.example")
    assert found is not None and (found.username, found.secret) == ("u", "p")


def test_a_credential_helper_is_asked_with_the_registry_on_stdin(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = home / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-fake"
    helper.write_text(
        "#!/bin/sh\nread host\n"
        'if [ "$host" = reg.example ]; then echo \'{"Username":"ci","Secret":"s3"}\'; else exit 1; fi\n'
    )
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (home / ".docker").mkdir()
    _auth_file(home / ".docker" / "config.json", {"credsStore": "fake"})
    assert auth.find_login("reg.example") == auth.Login("ci", "s3", "docker-credential-fake")
    assert auth.find_login("other.example") is None  # the helper has none: no login, no error


def _manifest(members: list[tuple[str, bytes]], **extra: object) -> bytes:
    entries = [(name, "sha256:" + hashlib.sha256(data).hexdigest(), len(data)) for name, data in members]
    doc = json.loads(artifact.manifest("run-1", entries))
    doc.update(extra)
    return json.dumps(doc).encode()


REF = reference.parse("reg.example/runs:v1")


def test_a_manifest_of_a_run_gives_its_members_in_order() -> None:
    body = _manifest([("capsule.yaml", b"record"), ("blobs/ab/abcd", b"x")])
    assert [t for t, _, _ in artifact._titled_layers(body, REF)] == ["capsule.yaml", "blobs/ab/abcd"]
    assert json.loads(body)["artifactType"] == artifact.ARTIFACT_TYPE


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "is not JSON"),
        (_manifest([("capsule.yaml", b"r")], artifactType="application/vnd.cncf.helm.config.v1+json"),
         "is not a repro run"),
        (_manifest([]), "lists no layers"),
        (_manifest([("capsule.yaml", b"r"), ("capsule.yaml", b"s")]), "names a member twice"),
        (_manifest([("capsule.yaml", b"r")], layers=[{"digest": "sha256:" + "a" * 64, "size": 1}]),
         "without a title"),
        (_manifest([("capsule.yaml", b"r")],
                   layers=[{"digest": "md5:abc", "size": 1, "annotations": {artifact.TITLE: "x"}}]),
         "not a sha256 digest"),
    ],
)  # fmt: skip
def test_a_manifest_that_is_not_a_runs_is_refused(body: bytes, says: str) -> None:
    with pytest.raises(CapsuleInvalid, match=says):
        artifact._titled_layers(body, REF)


@pytest.mark.parametrize(
    "named", ["evil.example:5000/x@sha256:" + "c" * 64, "docker.io/library/python:3.11", "sha256:abc", 7]
)
def test_an_image_is_named_only_by_digest_never_by_a_registry(named: object) -> None:
    body = json.dumps({"annotations": {artifact.IMAGE_DIGEST: named}}).encode()
    with pytest.raises(CapsuleInvalid, match="not a sha256 digest"):
        artifact._image_digest(body)
    assert artifact._image_digest(json.dumps({"annotations": {}}).encode()) is None


def test_a_referrer_names_its_subject_and_carries_the_statement() -> None:
    from repro.share import referrers

    subject = "sha256:" + "d" * 64
    doc = json.loads(referrers.referrer_manifest(subject, 1234, referrers.ATTESTATION_TYPE, b"{}\n"))
    assert doc["subject"] == {"mediaType": referrers.MANIFEST_TYPE, "digest": subject, "size": 1234}
    assert doc["artifactType"] == doc["layers"][0]["mediaType"] == referrers.ATTESTATION_TYPE
    assert doc["layers"][0]["digest"] == "sha256:" + hashlib.sha256(b"{}\n").hexdigest()


class _Served:
    """A registry that serves one image manifest and records which blobs were asked for."""

    def __init__(self, manifest: object) -> None:
        self.manifest = json.dumps(manifest).encode()
        self.ref = reference.parse("reg.example/runs@sha256:" + "e" * 64)
        self.asked: list[str] = []

    def get_manifest(self) -> bytes:
        return self.manifest

    def get_blob(self, digest: str, size: int, dest: Path) -> None:
        self.asked.append(digest)


IMAGE_ID = "sha256:" + "f" * 64


@pytest.mark.parametrize(
    "manifest",
    [
        [],
        {"config": "x", "layers": []},
        {"config": {"digest": "sha256:" + "0" * 64, "size": 2}, "layers": []},  # not the recorded image
        {"config": {"digest": IMAGE_ID, "size": 2}, "layers": ["x"]},
        {
            "config": {"digest": IMAGE_ID, "size": 2},
            "layers": [{"digest": "sha256:../../" + "a" * 58, "size": 1}],
        },
        {
            "config": {"digest": IMAGE_ID, "size": 2},
            "layers": [{"digest": "sha256:" + "a" * 64, "size": "1"}],
        },
    ],
)
def test_an_image_manifest_that_is_not_the_recorded_images_is_refused_before_a_byte_is_written(
    manifest: object, tmp_path: Path
) -> None:
    from repro.share.image import pull_image

    served = _Served(manifest)
    with pytest.raises(CapsuleInvalid):
        pull_image(served, IMAGE_ID, tmp_path)  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
    assert all(".." not in digest for digest in served.asked)


@pytest.mark.parametrize(
    ("raw", "insecure", "plain"),
    [
        ("localhost:5000/r:v1", (), True),
        ("127.0.0.1:5000/r:v1", (), True),
        ("registry.lan:5000/r:v1", (), False),
        ("registry.lan:5000/r:v1", ("registry.lan:5000",), True),
        ("registry.lan:5000/r:v1", ("registry.lan",), True),  # a host alone: every port of it
        ("registry.lan:5000/r:v1", ("registry.lan:5001",), False),
        ("registry.lan.evil.example:5000/r:v1", ("registry.lan",), False),
    ],
)
def test_plain_http_only_to_this_machine_or_a_registry_named_insecure(
    raw: str, insecure: tuple[str, ...], plain: bool
) -> None:
    from repro.share.client import plain_http_allowed

    assert plain_http_allowed(reference.parse(raw), insecure) is plain


def test_registries_insecure_in_repro_yaml_is_read_and_checked(tmp_path: Path) -> None:
    from repro import config
    from repro.errors import ConfigError

    (tmp_path / "repro.yaml").write_text("registries:\n  insecure: [registry.lan:5000, '[::1]:5000']\n")
    assert config.load(tmp_path).insecure_registries == ("registry.lan:5000", "[::1]:5000")
    for bad in ("http://registry.lan", "registry.lan/team", "registry.lan:port"):
        (tmp_path / "repro.yaml").write_text(f"registries:\n  insecure: ['{bad}']\n")
        with pytest.raises(ConfigError, match="registries.insecure"):
            config.load(tmp_path)
