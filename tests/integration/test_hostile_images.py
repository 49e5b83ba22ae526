"""Images from a capsule, against a real engine: a replaced image archive moves no tag, a record
does not choose the base image, and `repro gc --images` touches only this store's images.

Hostile capsules are made as an attacker would: a genuine `export --with-image`, its image
archive replaced by one built `FROM repro-base` and saved with `RepoTags` naming the base image
and other tags, the record edited to match, SHA256SUMS recomputed. Every image these tests make
carries a unique `org.repro.test` label and is removed by the test; other images are only read.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from repro.backends.base import BuiltImage, Event
from repro.backends.docker.archive import carried_image
from repro.backends.docker.engine import engine, find_image
from repro.config import DEFAULT_BASE_IMAGE
from repro.errors import CapsuleInvalid, ExitCode
from repro.store.capsule import IMAGE_MEMBER
from tests.builders import show_json
from tests.conftest import QUICKSTART_LOCK, Project, git
from tests.forging import forge

docker = pytest.importorskip("docker")


pytestmark = pytest.mark.docker  # skipped, with the reason, where no engine with the base image answers

TEST_LABEL = "org.repro.test"

# A training-shaped probe: argparse, outputs written where the run writes them, a line per step.
PROBE = """\
import argparse, json, os
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--out", default="outputs")
p.add_argument("--epochs", type=int, default=2)
args = p.parse_args()
Path(args.out).mkdir(exist_ok=True)
for epoch in range(args.epochs):
    print(f"epoch {epoch}: loss {1.0 / (epoch + 1):.4f}")
seen = {name: os.path.exists(name) for name in ("/hostile", "/decoy")}
Path(args.out, "probe.json").write_text(json.dumps(seen, sort_keys=True))
print(json.dumps(seen, sort_keys=True))
"""


# --------------------------------------------------------------------------- engine helpers


def _tags() -> dict[str, str]:
    """Every tag in the engine → the image id it names."""
    with engine() as client:
        return {t: str(i["Id"]) for i in client.api.images(all=True) for t in i.get("RepoTags") or []
                if t != "<none>:<none>"}  # fmt: skip


def _exists(ref: str) -> bool:
    with engine() as client:
        return find_image(client, ref) is not None


def _build(dockerfile: str, tag: str, label: str) -> str:
    """Build a small image (no network) with the test's label; its id."""
    with engine(timeout=600) as client:
        image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True,
                                       labels={TEST_LABEL: label}, network_mode="none")  # fmt: skip
        return str(image.id)


def _remove(*refs: str) -> None:
    with engine() as client:
        for ref in refs:
            try:
                client.api.remove_image(ref, force=True)
            except docker.errors.ImageNotFound:
                pass


@pytest.fixture
def made() -> Iterator[list[str]]:
    """Image refs a test made; removed afterwards, whatever happens."""
    refs: list[str] = []
    yield refs
    _remove(*reversed(refs))


def _saved_with_tags(image_id: str, repo_tags: list[str]) -> bytes:
    """`docker save` of one image, its manifest and legacy `repositories` rewritten to name ``repo_tags``."""
    with engine(timeout=600) as client:
        raw = b"".join(client.api.get_image(image_id, chunk_size=1 << 20))
    return with_tags(raw, repo_tags)


def with_tags(raw: bytes, repo_tags: list[str]) -> bytes:
    """An image archive (as `docker save` or `podman save` writes it), its manifest and legacy
    `repositories` rewritten to name ``repo_tags``."""
    members: dict[str, tuple[tarfile.TarInfo, bytes]] = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for info in tar:
            body = tar.extractfile(info).read() if info.isreg() else b""  # type: ignore[union-attr]
            members[info.name] = (info, body)
    manifest = json.loads(members["manifest.json"][1])
    manifest[0]["RepoTags"] = repo_tags
    top = manifest[0]["Layers"][-1].split("/")[0]
    repositories: dict[str, dict[str, str]] = {}
    for ref in repo_tags:
        name, _, version = ref.rpartition(":")
        repositories.setdefault(name, {})[version] = top
    members["manifest.json"] = (members["manifest.json"][0], json.dumps(manifest).encode())
    members["repositories"] = (tarfile.TarInfo("repositories"), json.dumps(repositories).encode())
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for info, body in members.values():
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body) if info.isreg() else None)
    return out.getvalue()


# --------------------------------------------------------------------------- capsule helpers


def _probe_project(project: Project, nonce: str = "") -> None:
    project.write("probe.py", PROBE)
    if nonce:  # a lockfile of its own: this project's image is built by this test, not found
        project.write("requirements.txt", _tiny_lock() + f"# {nonce}\n")
    project.commit("probe")


def _tiny_lock() -> str:
    """The typing-extensions entry of the committed torch lock: a one-wheel, hash-pinned lock."""
    lines = QUICKSTART_LOCK.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("typing-extensions=="))
    entry = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("    --hash"):
            break
        entry.append(line)
    return "\n".join(entry) + "\n"


def _new_project(path: Path) -> Project:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    other = Project(path)
    other.write(".gitignore", "outputs/\n")
    other.commit("init")
    return other


# --------------------------------------------------------------------------- carried images


class DockerImages:
    """The engine a tag-swap scenario runs against: Docker's, as root (see `tests.integration.test_podman`
    for rootless Podman's)."""

    def tags(self) -> dict[str, str]:
        return _tags()

    def exists(self, ref: str) -> bool:
        return _exists(ref)

    def build(self, dockerfile: str, tag: str, label: str) -> str:
        return _build(dockerfile, tag, label)

    def remove(self, *refs: str) -> None:
        _remove(*refs)

    def saved_with_tags(self, image_id: str, repo_tags: list[str]) -> bytes:
        return _saved_with_tags(image_id, repo_tags)


def test_a_replaced_image_archive_moves_no_tag(project: Project, tmp_path: Path, made: list[str]) -> None:
    key = uuid.uuid4().hex[:12]
    _probe_project(project, nonce=f"carried test {key}")  # an image of its own, not one others share
    assert project.repro("run", "--backend", "docker", "probe.py").code == 0
    original = show_json(project)
    made.append(original["deps"]["image"]["id"])
    tar = tmp_path / "export" / "probe.tar"
    r = project.repro("export", "latest", "-o", str(tar), "--with-image")
    assert r.code == 0, r.err
    swap_tags(DockerImages(), project, original, tar, lambda name: _new_project(tmp_path / name), made)


def swap_tags(
    images: DockerImages,
    project: Project,
    original: dict[str, Any],
    tar: Path,
    new_project: Callable[[str], Project],
    made: list[str],
) -> None:
    """A capsule's image archive replaced by an attacker's that names the base image, the genuine image's
    tag and others: refused while the record is the genuine one; loaded nameless, under repro's own tag
    only, when the record is edited to match; no tag moved either way. ``tar`` is ``original``'s
    ``export --with-image`` from ``project``, whose image only this test uses."""
    key = uuid.uuid4().hex[:12]
    genuine = original["deps"]["image"]
    work = tar.parent

    # The attacker's image: built on the base, saved under the base image's name and others.
    hostile_tag = f"repro-hostile-test:{key}"
    steps = "RUN ln -s /usr/bin/python3 /usr/local/bin/python && echo owned > /hostile\n"
    hostile = images.build(f"FROM {DEFAULT_BASE_IMAGE}\n{steps}", hostile_tag, f"hostile-{key}")
    made.append(hostile)
    names = [
        DEFAULT_BASE_IMAGE,
        genuine["tag"],
        f"repro-victim-test:{key}",
        f"localhost:5000/team/train:{key}",
    ]
    archive = images.saved_with_tags(hostile, names)
    images.remove(hostile_tag, genuine["id"])  # the victim's engine has neither: the replay must load
    assert not images.exists(hostile)
    before = images.tags()

    def unmoved() -> bool:
        return _unmoved(before, images.tags())

    # 1. The archive replaced, the record left as it was: refused before anything is loaded.
    swapped = forge(tar, work / "swapped.tar", lambda rec: None, replace={IMAGE_MEMBER: archive})
    r = project.repro("replay", str(swapped), cwd=new_project("one").root)
    assert r.code == 6, r.out + r.err
    assert "not the recorded image" in r.err and "Traceback" not in r.err
    assert unmoved() and not images.exists(hostile)
    assert not any(images.exists(n) for n in names[2:])

    # 2. The record edited to match, naming the base image as its tag: loaded nameless, checked
    # against the recorded id, tagged in repro's namespace only, and the run contained in it.
    def claim(rec: dict[str, Any]) -> None:
        rec["deps"]["image"].update(id=hostile, tag=DEFAULT_BASE_IMAGE, base=DEFAULT_BASE_IMAGE)

    matched = forge(tar, work / "matched.tar", claim, replace={IMAGE_MEMBER: archive})
    elsewhere = new_project("two")
    r = project.repro("replay", str(matched), "--json", cwd=elsewhere.root)
    assert r.code == 5, r.out + r.err  # it ran in the attacker's image (/hostile), so outputs differ
    assert "outputs/probe.json" in r.out
    new = {t: i for t, i in images.tags().items() if t not in before and i == hostile}
    assert new == {f"repro-env:sha256-{hostile[7:31]}": hostile}, new
    assert unmoved()
    assert not any(images.exists(n) for n in names[2:])
    replay = show_json(elsewhere)
    assert replay["deps"]["image"]["id"] == hostile and replay["deps"]["image"]["loaded"] is True
    assert replay["deps"]["image"]["tag"] == f"repro-env:sha256-{hostile[7:31]}"

    # The genuine capsule still replays in its own image, loaded and named by its id.
    r = project.repro("replay", str(tar), "--json", cwd=new_project("three").root)
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    assert images.tags()[f"repro-env:sha256-{genuine['id'][7:31]}"] == genuine["id"] and unmoved()

    # Later builds start from the real base: replaying the original rebuilds it identical.
    r = project.repro("replay", original["id"], "--json")
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    made.append(show_json(project)["deps"]["image"]["id"])


def _with_member(raw: bytes, name: str, body: bytes) -> bytes:
    """``raw`` (a tar) with one more regular member ``name`` appended."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for info in src:
            dst.addfile(info, src.extractfile(info) if info.isreg() else None)
        extra = tarfile.TarInfo(name)
        extra.size = len(body)
        dst.addfile(extra, io.BytesIO(body))
    return out.getvalue()


def test_a_member_name_the_engine_would_clean_is_refused(
    project: Project, tmp_path: Path, made: list[str]
) -> None:
    """``x/../manifest.json`` is ``manifest.json`` to the engine: with its RepoTags applied it would
    move an existing tag. Repro refuses the archive before the engine sees any of it."""
    key = uuid.uuid4().hex[:12]
    victim_tag = f"repro-victim-test:{key}"
    victim = _build(f"FROM {DEFAULT_BASE_IMAGE}\nLABEL victim={key}\n", victim_tag, f"victim-{key}")
    made.append(victim_tag)
    _probe_project(project, nonce=f"clean names test {key}")
    assert project.repro("run", "--backend", "docker", "probe.py").code == 0
    genuine = show_json(project)["deps"]["image"]["id"]
    made.append(genuine)
    tar = tmp_path / "probe.tar"
    assert project.repro("export", "latest", "-o", str(tar), "--with-image").code == 0
    with tarfile.open(tar) as t:
        archive = t.extractfile(IMAGE_MEMBER).read()  # type: ignore[union-attr]
    with tarfile.open(fileobj=io.BytesIO(archive)) as t:
        manifest = json.loads(t.extractfile("manifest.json").read())  # type: ignore[union-attr]
    manifest[0]["RepoTags"] = [victim_tag]
    hostile = _with_member(archive, "x/../manifest.json", json.dumps(manifest).encode())
    _remove(genuine)  # the replay would have to load it
    before = _tags()
    forged = forge(tar, tmp_path / "cleaned.tar", None, replace={IMAGE_MEMBER: hostile})
    r = project.repro("replay", str(forged), cwd=_new_project(tmp_path / "elsewhere").root)
    assert r.code == 6, r.out + r.err
    assert "'x/../manifest.json'" in r.err and "canonical form" in r.err and "Traceback" not in r.err
    assert _tags()[victim_tag] == victim and _unmoved(before) and not _exists(genuine)


def _unmoved(before: dict[str, str], after: dict[str, str] | None = None) -> bool:
    """Every tag that existed before and still exists names the same image (others' work may come and go)."""
    after = _tags() if after is None else after
    return all(after[t] == i for t, i in before.items() if t in after) and DEFAULT_BASE_IMAGE in after


def _renamed_like(raw: bytes, like: bytes) -> bytes:
    """An archive holding ``raw``'s image under the member names of ``like``'s (config and layer
    folders, position by position): what a checker that trusts names would take for ``like``."""

    def manifest(tar: tarfile.TarFile) -> dict[str, Any]:
        return dict(json.loads(tar.extractfile("manifest.json").read())[0])  # type: ignore[union-attr]

    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(like)) as model:
        wanted = manifest(model)
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        mine = manifest(src)
        assert len(mine["Layers"]) == len(wanted["Layers"])
        names = {mine["Config"]: wanted["Config"]}
        pairs = zip(mine["Layers"], wanted["Layers"], strict=True)
        names.update({a.split("/")[0]: b.split("/")[0] for a, b in pairs})
        for info in src:
            body = src.extractfile(info).read() if info.isreg() else b""  # type: ignore[union-attr]
            if info.name == "manifest.json":
                body = json.dumps([{**mine, "Config": wanted["Config"], "Layers": wanted["Layers"]}]).encode()
            head, sep, tail = info.name.partition("/")
            info.name = names.get(info.name) or (names.get(head, head) + sep + tail)
            if info.issym():
                first, _, rest = info.linkname.removeprefix("../").partition("/")
                info.linkname = f"../{names.get(first, first)}/{rest}"
            info.size = len(body)
            dst.addfile(info, io.BytesIO(body) if info.isreg() else None)
    return out.getvalue()


def test_an_archive_swapped_between_check_and_load_is_removed_again(made: list[str]) -> None:
    """The archive checked is not the one loaded (a capsule replaced on a shared disk mid-replay):
    the engine names the loaded image by its content, repro refuses it and removes it."""
    key = uuid.uuid4().hex[:12]
    genuine = _build(
        f"FROM {DEFAULT_BASE_IMAGE}\nRUN echo {key} > /genuine\n", f"repro-genuine-test:{key}", key
    )
    hostile = _build(
        f"FROM {DEFAULT_BASE_IMAGE}\nRUN echo owned > /hostile\n", f"repro-hostile-test:{key}", key
    )
    made.extend([genuine, hostile])
    checked = _saved_with_tags(genuine, [DEFAULT_BASE_IMAGE])
    swapped = _renamed_like(_saved_with_tags(hostile, [DEFAULT_BASE_IMAGE]), checked)
    _remove(genuine, hostile)
    opened = iter([checked, swapped])

    def archive() -> contextlib.AbstractContextManager[IO[bytes]]:
        return contextlib.nullcontext(io.BytesIO(next(opened)))

    recorded = BuiltImage(genuine, DEFAULT_BASE_IMAGE, DEFAULT_BASE_IMAGE, "", "cpu", "", False, 0.0)
    before = _tags()
    events: list[Event] = []
    with engine() as client, pytest.raises(CapsuleInvalid, match="not the recorded image") as caught:
        carried_image(client, recorded, archive, events.append)
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID
    assert any(hostile in e.text for e in events)  # the engine did load it …
    assert not _exists(hostile) and not _exists(genuine)  # … and it was removed again
    assert _unmoved(before) and not {t for t, i in _tags().items() if i in (genuine, hostile)}


def test_a_record_cannot_choose_the_base_image(project: Project, tmp_path: Path, made: list[str]) -> None:
    key = uuid.uuid4().hex[:12]
    decoy_tag = f"repro-decoy-test:{key}"
    decoy = _build(f"FROM {DEFAULT_BASE_IMAGE}\nRUN touch /decoy\n", decoy_tag, f"decoy-{key}")
    made.append(decoy_tag)
    _probe_project(project, nonce=f"base test {key}")  # an image of its own: built on replay too
    r = project.repro("run", "--backend", "docker", "probe.py")
    assert r.code == 0, r.err
    original = show_json(project)
    made.append(original["deps"]["image"]["id"])
    base_id = original["deps"]["image"]["base_id"]
    tar = tmp_path / "probe.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    _remove(original["deps"]["image"]["id"])  # the replay has to build

    def decoy_base(rec: dict[str, Any]) -> None:
        rec["deps"]["image"].update(base_id=decoy, base=decoy_tag)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = project.repro("replay", str(forge(tar, tmp_path / "decoy.tar", decoy_base)), "--json", cwd=elsewhere)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"  # /decoy was not there: not built FROM the decoy
    assert "the recorded image was built on base" in r.err and decoy[:19] in r.err
    replay = show_json(project, cwd=elsewhere)
    made.append(replay["deps"]["image"]["id"])
    assert (
        replay["deps"]["image"]["base_id"] == base_id
        and replay["deps"]["image"]["base"] == DEFAULT_BASE_IMAGE
    )

    # A name that is no image reference never reaches a message or the engine.
    def odd(rec: dict[str, Any]) -> None:
        rec["deps"]["image"]["base"] = "repro-base:bookworm\n\x1b[2Jowned"

    r = project.repro("replay", str(forge(tar, tmp_path / "odd.tar", odd)), cwd=elsewhere)
    assert r.code == 6 and "deps.image.base" in r.err and "\x1b" not in r.err, r.err


# --------------------------------------------------------------------------- gc --images


@pytest.mark.serial  # removes images engine-wide: not while other tests run in the engine
def test_gc_images_touches_only_this_stores_images(project: Project, tmp_path: Path, made: list[str]) -> None:
    key = uuid.uuid4().hex[:12]
    _probe_project(project)

    def run_with_lock(where: Project, nonce: str) -> dict[str, Any]:
        where.write("requirements.txt", _tiny_lock() + f"# {nonce}\n")
        where.commit(nonce)
        r = where.repro("run", "--backend", "docker", "probe.py")
        assert r.code == 0, r.err
        record = show_json(where)
        made.append(record["deps"]["image"]["id"])
        assert record["deps"]["image"]["reused"] is False  # this store made it
        return record

    unused = run_with_lock(project, f"gc unused {key}")
    built_on = run_with_lock(project, f"gc parent {key}")
    loaded_on = run_with_lock(project, f"gc loaded parent {key}")
    retagged = run_with_lock(project, f"gc retagged {key}")
    kept = run_with_lock(project, f"gc kept {key}")
    other = _new_project(tmp_path / "other")
    _probe_project(other)
    theirs = run_with_lock(other, f"gc other store {key}")
    # A repro-labelled image of another project; a user's image built on one of this store's;
    # another user image that came through save/load (no parent link, as with BuildKit); and a
    # name a user gave one of this store's images.
    foreign = _build(f"FROM {DEFAULT_BASE_IMAGE}\nLABEL org.repro.lock-hash={key}\n", f"repro-env:{key}", key)
    made.append(foreign)
    user_tag, loaded_tag, named = (
        f"repro-user-test:{key}",
        f"repro-user-test:loaded-{key}",
        f"mymodel-test:{key}",
    )
    user = _build(f"FROM {built_on['deps']['image']['tag']}\nRUN echo mine > /mine\n", user_tag, key)
    made.append(user_tag)  # removed first: it stands on one of this store's images
    _build(f"FROM {loaded_on['deps']['image']['tag']}\nRUN echo mine > /mine\n", loaded_tag, key)
    made.append(loaded_tag)
    with engine(timeout=600) as client:
        archive = b"".join(client.api.get_image(loaded_tag, chunk_size=1 << 20))
        client.api.remove_image(loaded_tag)
        list(client.api.load_image(archive))
        assert not client.api.inspect_image(loaded_tag)["Parent"]  # no link to the image it stands on
        client.api.tag(retagged["deps"]["image"]["id"], *named.split(":"))
    made.append(named)
    ours = (unused, built_on, loaded_on, retagged)
    for record in ours:  # runs removed by hand: their images are unused now
        shutil.rmtree(project.root / ".repro" / "runs" / record["id"])
    base_id = _tags()[DEFAULT_BASE_IMAGE]

    r = project.repro("gc", "--images", "--dry-run")
    assert r.code == 0, r.err
    assert unused["deps"]["image"]["tag"] in r.out and "would free" in r.out
    assert _exists(unused["deps"]["image"]["id"])

    r = project.repro("gc", "--images")
    assert r.code == 0, r.err
    removed = [line for line in r.out.splitlines() if line.startswith("removed image")]
    assert len(removed) == 1 and unused["deps"]["image"]["tag"] in removed[0], r.out
    assert any(line.startswith("freed ") for line in r.out.splitlines()), r.out
    kept_lines = [line for line in r.out.splitlines() if line.startswith("kept image")]
    assert len(kept_lines) == 3, r.out
    assert f"{built_on['deps']['image']['tag']}" in r.out and f"image {user_tag} was built on it" in r.out
    assert f"{loaded_on['deps']['image']['tag']}" in r.out and f"image {loaded_tag} was built on it" in r.out
    assert f"it is also tagged {named}" in r.out
    assert not _exists(unused["deps"]["image"]["id"])
    for survivor in (built_on, loaded_on, retagged, kept, theirs):
        assert _exists(survivor["deps"]["image"]["id"]), survivor["deps"]["image"]
    assert _exists(foreign) and _exists(user) and _exists(loaded_tag) and _exists(named)
    assert _tags()[DEFAULT_BASE_IMAGE] == base_id
    assert theirs["deps"]["image"]["tag"] not in r.out and f"repro-env:{key}" not in r.out

    r = project.repro("gc", "--images")  # nothing more to do, and it says so
    assert r.code == 0 and "removed image" not in r.out, r.out + r.err
