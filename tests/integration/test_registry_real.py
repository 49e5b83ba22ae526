"""Runs shared through a real registry: Debian's distribution server on 127.0.0.1 with basic auth and
TLS from a test CA. A real training run is pushed, pulled into a fresh directory and replayed
`identical`; a sibling run uploads only its new blobs (counted on the registry's disk); a blob
rewritten on the registry's disk is refused; a wrong password is one line; skopeo reads and copies
what repro pushed."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import registryserver
from tests.conftest import CliResult, Project

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(registryserver.missing() is not None, reason=registryserver.missing() or ""),
]


@dataclass
class Shared:
    registry: registryserver.Registry
    project: Project
    run_id: str
    ref: str  # where the run was pushed
    pushed: CliResult
    again: CliResult  # the same run pushed a second time

    def repro(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliResult:
        return self.project.repro(*args, cwd=cwd, env={**self.registry.env(), **(env or {})})


def _train(project: Project, *args: str) -> str:
    r = project.repro("run", "--backend", "local", "--data", "data", "--", "python", "train.py", *args)
    assert r.code == 0, r.err
    return str(json.loads(project.repro("show", "latest", "--json").out)["id"])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registryserver.Registry]:
    with registryserver.running(tmp_path_factory.mktemp("registry")) as running:
        yield running


@pytest.fixture(scope="module")
def shared(registry: registryserver.Registry, tmp_path_factory: pytest.TempPathFactory) -> Shared:
    project = Project.init(tmp_path_factory.mktemp("shared") / "proj")
    project.write(".gitignore", "outputs/\n")
    project.script("train_unseeded.py", "train.py")
    project.points()
    project.commit("train")
    run_id = _train(project, "--epochs", "2")
    ref = f"{registry.host}/team/runs:baseline"
    pushed = project.repro("push", run_id, ref, env=registry.env())
    again = project.repro("push", run_id, ref, env=registry.env())
    return Shared(registry, project, run_id, ref, pushed, again)


def _elsewhere(shared: Shared, where: Path) -> Path:
    """A fresh project directory holding only the data (as a team-mate's checkout would)."""
    (where / "data").mkdir(parents=True)
    shutil.copyfile(shared.project.root / "data" / "points.csv", where / "data" / "points.csv")
    return where


def test_a_pushed_run_pulls_into_a_fresh_directory_and_replays_identical(
    shared: Shared, tmp_path: Path
) -> None:
    assert shared.pushed.code == 0, shared.pushed.err
    assert f"pushed {shared.run_id} → {shared.ref}@sha256:" in shared.pushed.out
    fresh = _elsewhere(shared, tmp_path / "fresh")
    r = shared.repro("pull", f"oci://{shared.ref}", cwd=fresh)
    assert r.code == 0, r.err
    assert r.out.startswith(f"pulled {shared.run_id} from {shared.ref}")
    shown = shared.repro("show", shared.run_id, "--json", cwd=fresh)
    assert shown.code == 0 and json.loads(shown.out)["id"] == shared.run_id
    # replay takes the registry reference itself (pulled and checked again; the store keeps one copy)
    r = shared.repro("replay", f"oci://{shared.ref}", "--backend", "local", "--json", cwd=fresh)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"


def test_a_second_push_uploads_only_blobs_the_registry_lacks(shared: Shared) -> None:
    assert shared.again.code == 0 and "uploaded 0 blobs (0 B)" in shared.again.out, shared.again.out
    sibling = _train(shared.project, "--epochs", "3")  # other outputs, the same code and data
    before = shared.registry.blobs()
    r = shared.repro("push", sibling, f"{shared.registry.host}/team/runs:longer")
    assert r.code == 0, r.err
    layers, uploaded = _counts(r.out)
    raw = _skopeo("inspect", "--raw", f"docker://{shared.registry.host}/team/runs:longer", shared=shared)
    manifest = json.loads(raw)
    assert len(manifest["layers"]) == layers
    new = [layer for layer in manifest["layers"] if layer["digest"] not in before]
    assert 0 < uploaded == len(new) < layers  # the code, the data's list and the like were there already
    # The registry's disk grew by the new layers and the manifest: nothing it held was sent again.
    grown = shared.registry.stored_bytes() - sum(before.values())
    assert grown == sum(layer["size"] for layer in new) + len(raw.encode())
    assert sum(layer["size"] for layer in manifest["layers"] if layer["digest"] in before) > 0


def _counts(out: str) -> tuple[int, int]:
    words = out.split()
    return int(words[words.index("layers") - 1]), int(words[words.index("uploaded") + 1])


def test_a_blob_rewritten_on_the_registry_is_refused_by_its_digest(shared: Shared, tmp_path: Path) -> None:
    raw = _skopeo("inspect", "--raw", f"docker://{shared.ref}", shared=shared)
    record = json.loads(raw)["layers"][0]
    assert record["annotations"]["org.opencontainers.image.title"] == "capsule.yaml"
    blob = shared.registry.blob_file(record["digest"])
    original = blob.read_bytes()
    blob.write_bytes(original.replace(b"epochs", b"epOchs", 1))  # same size, one byte changed
    try:
        fresh = _elsewhere(shared, tmp_path / "fresh")
        r = shared.repro("pull", shared.ref, cwd=fresh)
    finally:
        blob.write_bytes(original)
    assert r.code == 6, r.err
    assert f"blob {record['digest']}" in r.err and "does not match its digest" in r.err
    assert not (fresh / ".repro" / "runs" / shared.run_id).exists()


def test_a_wrong_password_is_one_line_naming_the_login_command(shared: Shared, tmp_path: Path) -> None:
    wrong = registryserver.login_file(tmp_path / "auth.json", shared.registry.host, "trainer", "not-it")
    r = shared.repro("pull", shared.ref, cwd=tmp_path, env={"REGISTRY_AUTH_FILE": str(wrong)})
    assert r.code == 2
    error, hint = r.err.splitlines()
    assert (
        error == f"repro: error: {shared.registry.host}/team/runs refused the login from {wrong} (HTTP 401)"
    )
    assert f"`docker login {shared.registry.host}`" in hint
    r = shared.repro(
        "pull", shared.ref, cwd=tmp_path, env={"REGISTRY_AUTH_FILE": str(tmp_path / "none.json")}
    )
    assert r.code == 2 and "asks for a login and this host has none for it" in r.err


def test_a_registry_whose_certificate_the_host_does_not_trust_is_refused(
    shared: Shared, tmp_path: Path
) -> None:
    r = shared.repro(
        "pull", shared.ref, cwd=tmp_path, env={"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    )
    assert r.code == 3
    assert "TLS failed ([SSL: CERTIFICATE_VERIFY_FAILED]" in r.err and "Traceback" not in r.err


def test_skopeo_and_the_http_api_read_what_repro_pushed(shared: Shared, tmp_path: Path) -> None:
    import requests

    manifest = json.loads(_skopeo("inspect", "--raw", f"docker://{shared.ref}", shared=shared))
    assert manifest["artifactType"] == "application/vnd.repro.run.v1"
    assert manifest["annotations"]["dev.repro.run.id"] == shared.run_id
    _skopeo("copy", f"docker://{shared.ref}", f"oci:{tmp_path / 'copy'}:baseline", shared=shared)
    copied = {p.name for p in (tmp_path / "copy" / "blobs" / "sha256").iterdir()}
    assert {layer["digest"].removeprefix("sha256:") for layer in manifest["layers"]} <= copied
    url = f"https://{shared.registry.host}/v2/team/runs/tags/list"
    auth = (registryserver.USER, registryserver.PASSWORD)
    tags = requests.get(url, auth=auth, verify=str(shared.registry.ca), timeout=30).json()["tags"]
    assert "baseline" in tags


def _skopeo(*args: str, shared: Shared | None = None, registry: registryserver.Registry | None = None) -> str:
    server = shared.registry if shared is not None else registry
    assert server is not None
    env = {**os.environ, **server.env()}
    done = subprocess.run(["skopeo", *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_show_diff_and_verify_take_a_registry_reference(shared: Shared, tmp_path: Path) -> None:
    ref = f"oci://{shared.ref}"
    shown = shared.repro("show", ref, "--json", cwd=tmp_path)
    assert shown.code == 0 and json.loads(shown.out)["id"] == shared.run_id, shown.err
    r = shared.repro("diff", shared.run_id, ref, "--exit-code")
    assert r.code == 0, r.out + r.err  # the run and its pushed copy are the same run
    r = shared.repro("verify", ref, cwd=tmp_path)
    assert r.code == 0 and r.out.startswith(f"ok: {shared.run_id}"), r.err
    assert not (tmp_path / ".repro" / "runs").exists()  # looking imports nothing


@pytest.mark.docker
def test_an_image_goes_as_an_ordinary_image_once_and_comes_back_by_digest(
    registry: registryserver.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repro.share.client import Registry
    from repro.share.image import pull_image, push_image
    from repro.share.reference import parse

    for name, value in registry.env().items():
        monkeypatch.setenv(name, value)
    (tmp_path / "rootfs").mkdir()
    (tmp_path / "rootfs" / "hello.txt").write_text("a layer of one file\n")
    subprocess.run(
        ["tar", "-C", str(tmp_path / "rootfs"), "-cf", str(tmp_path / "rootfs.tar"), "."], check=True
    )
    tag = f"repro-test-share-{os.getpid()}-{tmp_path.name.lower()}:v1"
    image_id = _docker("import", str(tmp_path / "rootfs.tar"), tag).strip()
    try:
        ref = parse(f"{registry.host}/team/images:unused")
        (tmp_path / "w1").mkdir()
        pushed = push_image(Registry(ref, push=True), image_id, tag, tmp_path / "w1")
        assert pushed.uploaded == pushed.size > 0
        (tmp_path / "w2").mkdir()
        again = push_image(Registry(ref, push=True), image_id, tag, tmp_path / "w2")
        assert (again.digest, again.uploaded) == (pushed.digest, 0)  # the same manifest, nothing sent
        inspected = json.loads(_skopeo("inspect", "--no-tags", f"docker://{registry.host}/team/images@{pushed.digest}",
                                       registry=registry))  # fmt: skip
        assert len(inspected["Layers"]) == 1  # skopeo reads it as an ordinary image
        (tmp_path / "pull").mkdir()
        archive = pull_image(Registry(ref.with_digest(pushed.digest)), image_id, tmp_path / "pull")
        _docker("rmi", tag)
        assert f"Loaded image ID: {image_id}" in _docker("load", "-i", str(archive))  # nameless, by its id
        _docker("tag", image_id, tag)  # so that the cleanup below finds it
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


@pytest.mark.docker
def test_a_run_with_an_image_names_it_by_digest_and_brings_it_back(
    registry: registryserver.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repro.share import open_remote
    from repro.store.record import DepsInfo, ImageInfo
    from repro.store.runs import Store
    from repro.store.verify import verify_tar
    from tests.builders import sealed

    tag, image_id = _tiny_image(tmp_path)
    try:
        project = Project.init(tmp_path / "proj")
        store = Store(project.root)
        store.ensure()
        sealed(store, deps=DepsInfo(image=ImageInfo(id=image_id, tag=tag)))
        ref = f"{registry.host}/team/with-image:v1"
        env = registry.env()
        r = project.repro("push", "latest", ref, env=env)
        assert r.code == 0, r.err
        manifest = json.loads(_skopeo("inspect", "--raw", f"docker://{ref}", registry=registry))
        image_digest = manifest["annotations"]["dev.repro.image.manifest"]
        assert manifest["annotations"]["dev.repro.image.id"] == image_id
        image = json.loads(_skopeo("inspect", "--no-tags", f"docker://{registry.host}/team/with-image@{image_digest}",
                                   registry=registry))  # fmt: skip
        assert len(image["Layers"]) == 1  # an ordinary image, in the repository the run went to
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        elsewhere = Store(Project.init(tmp_path / "elsewhere").root)
        loaded = open_remote(elsewhere, f"oci://{ref}")
        assert loaded.image_archive is not None  # carried as a capsule's image is: replay loads it by its id
        assert (verify_tar(loaded.image_archive).image_size or 0) > 0
        _docker_pull(registry, f"{registry.host}/team/with-image@{image_digest}", image_id, tmp_path)
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def _docker_pull(registry: registryserver.Registry, ref: str, image_id: str, tmp_path: Path) -> None:
    """`docker pull` of the image part, by digest, with the test login (DOCKER_CONFIG); the engine
    speaks to a registry on 127.0.0.0/8 without checking its certificate (it is insecure by default
    there), so the test CA need not be installed into the engine."""
    config = tmp_path / "docker-config"
    config.mkdir()
    registryserver.login_file(
        config / "config.json", registry.host, registryserver.USER, registryserver.PASSWORD
    )
    env = {**os.environ, "DOCKER_CONFIG": str(config)}
    done = subprocess.run(["docker", "pull", ref], capture_output=True, text=True, env=env, timeout=300)
    try:
        assert done.returncode == 0, done.stderr
        pulled = _docker("image", "inspect", "--format", "{{.Id}}", ref).strip()
        assert pulled == image_id  # the engine's own id of what it pulled: the run's recorded image
    finally:
        subprocess.run(["docker", "rmi", ref], capture_output=True)


def _tiny_image(tmp_path: Path) -> tuple[str, str]:
    """A one-layer image made with `docker import` under a name of its own: (tag, id)."""
    (tmp_path / "rootfs").mkdir()
    (tmp_path / "rootfs" / "hello.txt").write_text(f"a layer of one file {tmp_path.name}\n")
    subprocess.run(
        ["tar", "-C", str(tmp_path / "rootfs"), "-cf", str(tmp_path / "rootfs.tar"), "."], check=True
    )
    tag = f"repro-test-share-{os.getpid()}-{tmp_path.name.lower()}:v1"
    return tag, _docker("import", str(tmp_path / "rootfs.tar"), tag).strip()


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_signed_attestation_is_attached_as_a_referrer_others_find(shared: Shared, tmp_path: Path) -> None:
    import requests

    key = tmp_path / "me.key"
    assert shared.repro("keygen", "--type", "ed25519", str(key)).code == 0
    ref = f"{shared.registry.host}/team/runs:attested"
    r = shared.repro("push", shared.run_id, ref, "--attest", "--sign", str(key))
    assert r.code == 0, r.err
    assert "uploaded 0 blobs" in r.out  # the run's blobs were there; only the statement is new
    subject = r.out.split("@", 1)[1].split(":", 2)
    subject_digest = f"{subject[0]}:{subject[1]}"
    # The OCI 1.1 referrers tag schema, read by skopeo: the index under sha256-<hex> lists the statement.
    tag = f"docker://{shared.registry.host}/team/runs:{subject_digest.replace(':', '-')}"
    index = json.loads(_skopeo("inspect", "--raw", tag, shared=shared))
    [entry] = index["manifests"]
    assert entry["artifactType"] == "application/vnd.dsse.envelope.v1+json"
    api = f"https://{shared.registry.host}/v2/team/runs"
    session = requests.Session()
    session.auth = (registryserver.USER, registryserver.PASSWORD)
    ca = str(shared.registry.ca)  # per request: REQUESTS_CA_BUNDLE in the environment beats a session's
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    referrer = session.get(f"{api}/manifests/{entry['digest']}", headers=accept, verify=ca, timeout=30).json()
    assert referrer["subject"]["digest"] == subject_digest
    statement = tmp_path / "run.intoto.jsonl"
    statement.write_bytes(
        session.get(f"{api}/blobs/{referrer['layers'][0]['digest']}", verify=ca, timeout=30).content
    )
    r = shared.repro("verify-attestation", str(statement), "--key", f"{key}.pub")
    assert r.code == 0 and r.out.startswith(f"ok: attestation of run {shared.run_id}"), r.out + r.err
    again = shared.repro("push", shared.run_id, ref, "--attest", "--sign", str(key))
    assert again.code == 0
    listed = [m["digest"] for m in json.loads(_skopeo("inspect", "--raw", tag, shared=shared))["manifests"]]
    assert entry["digest"] in listed and len(set(listed)) == len(listed)  # each statement listed once


def test_plain_http_is_spoken_only_to_a_registry_on_this_machine(shared: Shared, tmp_path: Path) -> None:
    with registryserver.running(tmp_path / "plain", tls=False) as plain:
        r = shared.project.repro("push", shared.run_id, f"{plain.host}/team/runs:v1", env=plain.env())
        assert r.code == 0, r.err  # loopback without TLS: HTTPS is tried, then plain HTTP
        assert plain.stored_bytes() > 0
    # the same registry named by a name that is not loopback is never spoken to in plain HTTP
    r = shared.project.repro("push", shared.run_id, "registry.invalid:5000/team/runs:v1", env=plain.env())
    assert r.code == 3 and "registry.invalid:5000 does not answer" in r.err


def test_push_and_pull_answer_in_json(shared: Shared, tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    from repro import schemas

    pushed = shared.repro("push", shared.run_id, f"{shared.registry.host}/team/runs:json", "--json")
    assert pushed.code == 0, pushed.err
    answer = json.loads(pushed.out)
    Draft202012Validator(schemas.load("push")).validate(answer)
    assert answer["id"] == shared.run_id and answer["uploaded"] == 0 and answer["reused"] == answer["layers"]
    assert answer["ref"] == f"{shared.registry.host}/team/runs:json@{answer['digest']}"
    assert answer["digest"] in shared.pushed.out  # the same run: the same manifest as the first push
    fresh = _elsewhere(shared, tmp_path / "fresh")
    pulled = shared.repro("pull", f"oci://{shared.registry.host}/team/runs:json", "--json", cwd=fresh)
    assert pulled.code == 0, pulled.err
    got = json.loads(pulled.out)
    Draft202012Validator(schemas.load("pull")).validate(got)
    where = f"{shared.registry.host}/team/runs:json"
    assert got == {"format": "repro.pull/v1", "id": shared.run_id, "ref": where,
                   "digest": answer["digest"], "image": False}  # fmt: skip


def test_an_oms_model_signature_is_attached_and_the_reference_tool_accepts_it(
    shared: Shared, tmp_path: Path
) -> None:
    import requests

    key = tmp_path / "ec.key"
    assert shared.repro("keygen", "--type", "ecdsa-p256", str(key)).code == 0
    ref = f"{shared.registry.host}/team/runs:signed"
    r = shared.repro("push", shared.run_id, ref, "--attest", "--format", "oms", "--sign", str(key), "--json")
    assert r.code == 0, r.err
    answer = json.loads(r.out)
    assert answer["referrer_format"] == "oms" and answer["referrer"]
    tag = f"docker://{shared.registry.host}/team/runs:{answer['digest'].replace(':', '-')}"
    listed = json.loads(_skopeo("inspect", "--raw", tag, shared=shared))["manifests"]
    entry = next(m for m in listed if m["digest"] == answer["referrer"])
    assert entry["artifactType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    api = f"https://{shared.registry.host}/v2/team/runs"
    auth, ca = (registryserver.USER, registryserver.PASSWORD), str(shared.registry.ca)
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    referrer = requests.get(
        f"{api}/manifests/{entry['digest']}", headers=accept, auth=auth, verify=ca, timeout=30
    )
    layer = referrer.json()["layers"][0]["digest"]
    signature = tmp_path / "model.sig"
    signature.write_bytes(requests.get(f"{api}/blobs/{layer}", auth=auth, verify=ca, timeout=30).content)
    model = tmp_path / "model"
    assert shared.repro("get", shared.run_id, "-o", str(model)).code == 0
    tool = Path(sys.executable).parent / "model_signing"
    verify = [
        str(tool),
        "verify",
        "key",
        "--signature",
        str(signature),
        "--public_key",
        f"{key}.pub",
        str(model),
    ]
    done = subprocess.run(verify, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_plain_http_to_a_registry_named_insecure_in_repro_yaml(shared: Shared, tmp_path: Path) -> None:
    name = socket.gethostname()
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(name, None, socket.AF_INET)}
    except OSError:
        addresses = set()
    if not addresses or not all(a.startswith("127.") for a in addresses):
        pytest.skip(f"this machine's name {name!r} does not resolve to loopback only")
    with registryserver.running(tmp_path / "plain", tls=False) as plain:
        host = f"{name}:{plain.host.rsplit(':', 1)[1]}"  # a name, not a loopback address: not trusted as one
        login = registryserver.login_file(
            tmp_path / "auth.json", host, registryserver.USER, registryserver.PASSWORD
        )
        env = {"REGISTRY_AUTH_FILE": str(login)}
        refused = shared.project.repro("push", shared.run_id, f"{host}/team/runs:v1", env=env)
        assert refused.code == 3 and "TLS failed" in refused.err and "registries" in refused.err
        assert plain.stored_bytes() == 0
        project = Project.init(tmp_path / "proj")
        project.write("repro.yaml", f"registries:\n  insecure: [{host}]\n")
        capsule = tmp_path / "run.tar"
        assert shared.project.repro("export", shared.run_id, "-o", str(capsule)).code == 0
        pushed = project.repro("push", str(capsule), f"{host}/team/runs:v1", env=env)
        assert pushed.code == 0, pushed.err
        assert plain.stored_bytes() > 0
        pulled = project.repro("pull", f"{host}/team/runs:v1", env=env)
        assert pulled.code == 0, pulled.err
    project.write("repro.yaml", "registries:\n  insecure: [http://registry.lan]\n")
    bad = project.repro("pull", f"{host}/team/runs:v1", env=env)
    assert bad.code == 2 and "registries.insecure" in bad.err
