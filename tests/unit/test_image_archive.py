"""Images by content, without an engine: a capsule's image archive read and stripped of every
name, the image names a record may carry, the store's image ledger, and the base-image note.

The engine side (loading, tagging, `gc --images` on a real engine) is in
tests/integration/test_hostile_images.py.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from repro.backends import imagearchive, images
from repro.errors import CapsuleInvalid, ExitCode
from repro.rerun.execute import base_note
from repro.store import images as store_images
from repro.store import limits
from repro.store.capsule import RECORD_NAME
from repro.store.record import ImageInfo, Record
from repro.store.recordio import dump_record, load_record
from repro.store.runs import Store

CONFIG_A = json.dumps({"architecture": "amd64", "config": {"Labels": {"a": "1"}}}).encode()
CONFIG_B = json.dumps({"architecture": "amd64", "config": {"Labels": {"b": "2"}}}).encode()
LAYER = b"layer bytes " * 1000
ID_A = "sha256:" + hashlib.sha256(CONFIG_A).hexdigest()
ID_B = "sha256:" + hashlib.sha256(CONFIG_B).hexdigest()


def _saved(
    members: dict[str, bytes], links: dict[str, str] | None = None, hard: dict[str, str] | None = None
) -> bytes:
    """A tar shaped like `docker save` output (members in the order given)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(body), 1_700_000_000
            tar.addfile(info, io.BytesIO(body))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name, target in (hard or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.LNKTYPE, target
            tar.addfile(info)
    return out.getvalue()


def _hostile_archive() -> bytes:
    """Two images, named the way an attacker would: the base image's tag among them."""
    manifest = [
        {
            "Config": "a.json",
            "RepoTags": ["repro-base:bookworm", "repro-env:0123"],
            "Layers": ["l1/layer.tar"],
        },
        {"Config": "b.json", "RepoTags": ["python:3.11"], "Layers": ["l1/layer.tar"]},
    ]
    index = {
        "schemaVersion": 2,
        "manifests": [{"digest": "sha256:" + "1" * 64, "annotations": {
            "io.containerd.image.name": "docker.io/library/repro-base:bookworm",
            "org.opencontainers.image.ref.name": "bookworm", "kept.annotation": "yes"}}],
    }  # fmt: skip
    return _saved(
        {
            "l1/layer.tar": LAYER,
            "a.json": CONFIG_A,
            "b.json": CONFIG_B,
            "index.json": json.dumps(index).encode(),
            "manifest.json": json.dumps(manifest).encode(),
            "repositories": json.dumps({"repro-base": {"bookworm": "l1"}}).encode(),
        },
        links={"l2/layer.tar": "../l1/layer.tar"},
    )


def _read(raw: bytes) -> dict[str, tarfile.TarInfo | bytes]:
    found: dict[str, tarfile.TarInfo | bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for info in tar:
            found[info.name] = tar.extractfile(info).read() if info.isreg() else info  # type: ignore[union-attr]
    return found


def test_the_index_names_images_by_the_sha256_of_their_configs() -> None:
    index = imagearchive.read_index(io.BytesIO(_hostile_archive()))
    assert index.configs == {ID_A: "a.json", ID_B: "b.json"}


class _OneWay(io.RawIOBase):
    """A stream that can only be read forward, in small reads (as a member of a compressed capsule)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        chunk = self._data.read(min(len(buffer), 4096))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_the_stream_to_load_is_rebuilt_with_the_recorded_image_alone_under_repro_s_names() -> None:
    original = _read(_hostile_archive())
    index = imagearchive.read_index(io.BytesIO(_hostile_archive()))
    raw = b"".join(imagearchive.rebuilt(io.BytesIO(_hostile_archive()), index.images[ID_A]))
    rebuilt = _read(raw)
    assert set(rebuilt) == {"manifest.json", imagearchive.CONFIG_NAME, imagearchive.layer_name(0)}
    assert json.loads(rebuilt["manifest.json"]) == [  # type: ignore[arg-type]
        {"Config": imagearchive.CONFIG_NAME, "Layers": [imagearchive.layer_name(0)]}
    ]
    assert rebuilt[imagearchive.CONFIG_NAME] == CONFIG_A
    assert rebuilt[imagearchive.layer_name(0)] == original["l1/layer.tar"]


def test_a_layer_named_through_a_link_is_resolved_by_repro() -> None:
    """Newer `docker save` writes the legacy ``<id>/layer.tar`` as a link to the blob it names."""
    manifest = [{"Config": "a.json", "Layers": ["l2/layer.tar", "l3/layer.tar", "l1/layer.tar"]}]
    archive = _saved(
        {"blobs/sha256/l1": LAYER, "a.json": CONFIG_A, "manifest.json": json.dumps(manifest).encode()},
        links={"l1/layer.tar": "../blobs/sha256/l1", "l2/layer.tar": "../blobs/sha256/l1"},
        hard={"l3/layer.tar": "blobs/sha256/l1"},
    )
    image = imagearchive.read_index(io.BytesIO(archive)).images[ID_A]
    assert image.layers == ("blobs/sha256/l1",) * 3
    rebuilt = _read(b"".join(imagearchive.rebuilt(_OneWay(archive), image)))  # type: ignore[arg-type]
    assert json.loads(rebuilt["manifest.json"])[0]["Layers"] == [imagearchive.layer_name(0)] * 3  # type: ignore[arg-type]
    assert rebuilt[imagearchive.layer_name(0)] == LAYER and len(rebuilt) == 3


_MANIFEST_A = json.dumps([{"Config": "a.json", "Layers": ["l1/layer.tar"]}]).encode()


@pytest.mark.parametrize(
    "name",
    ["x/../manifest.json", "./manifest.json", "/manifest.json", "l1//layer.tar", "l1/./layer.tar",
     "../manifest.json", "blob/", "l1\\..\\manifest.json"],
)  # fmt: skip
def test_a_member_name_not_in_canonical_form_is_refused(name: str) -> None:
    members = {"l1/layer.tar": LAYER, "a.json": CONFIG_A, "manifest.json": _MANIFEST_A, name: b"[]"}
    with pytest.raises(CapsuleInvalid, match="image archive") as caught:
        imagearchive.read_index(io.BytesIO(_saved(members)))
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID and "\n" not in caught.value.message


def test_a_member_twice_is_refused() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, body in [("a.json", CONFIG_A), ("manifest.json", _MANIFEST_A), ("l1/layer.tar", LAYER),
                           ("manifest.json", b"[]")]:  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    with pytest.raises(CapsuleInvalid, match="twice"):
        imagearchive.read_index(io.BytesIO(out.getvalue()))


@pytest.mark.parametrize(
    ("links", "hard"),
    [({"l1/layer.tar": "../../etc/passwd"}, {}), ({"l1/layer.tar": "/etc/passwd"}, {}),
     ({"l1/layer.tar": "../gone"}, {}), ({"l1/layer.tar": "l0", "l1/l0": "../blob"}, {}),
     ({}, {"l1/layer.tar": "../blob"}), ({}, {"l1/layer.tar": "x/../blob"}),
     ({"manifest.json": "blob"}, {})],
)  # fmt: skip
def test_a_link_is_refused_unless_it_names_a_canonical_regular_member(
    links: dict[str, str], hard: dict[str, str]
) -> None:
    members = {"blob": LAYER, "a.json": CONFIG_A}
    if "manifest.json" not in links:
        members["manifest.json"] = _MANIFEST_A
    with pytest.raises(CapsuleInvalid, match="image archive"):
        imagearchive.read_index(io.BytesIO(_saved(members, links=links, hard=hard)))


def test_a_special_file_is_refused() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, body in [("a.json", CONFIG_A), ("manifest.json", _MANIFEST_A), ("l1/layer.tar", LAYER)]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        fifo = tarfile.TarInfo("pipe")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
    with pytest.raises(CapsuleInvalid, match="special file"):
        imagearchive.read_index(io.BytesIO(out.getvalue()))


def test_the_stream_is_read_once_front_to_back_in_chunks() -> None:
    image = imagearchive.read_index(io.BytesIO(_hostile_archive())).images[ID_B]
    chunks: Iterator[bytes] = imagearchive.rebuilt(_OneWay(_hostile_archive()), image)  # type: ignore[arg-type]
    rebuilt = _read(b"".join(chunks))
    assert rebuilt[imagearchive.CONFIG_NAME] == CONFIG_B and rebuilt[imagearchive.layer_name(0)] == LAYER


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"a.json": CONFIG_A}, "has no manifest.json"),
        ({"manifest.json": b"{not json"}, "not JSON"),
        ({"manifest.json": b'{"Config": "a.json"}'}, "not a list of images"),
        ({"manifest.json": b'[{"Config": "gone.json"}]'}, "missing config"),
        ({"big.json": b"x" * (imagearchive.MAX_CONFIG_BYTES + 1),
          "manifest.json": b'[{"Config": "big.json"}]'}, "larger than"),
    ],
)  # fmt: skip
def test_an_archive_that_names_no_readable_image_is_refused(members: dict[str, bytes], words: str) -> None:
    with pytest.raises(CapsuleInvalid, match=words) as caught:
        imagearchive.read_index(io.BytesIO(_saved(members)))
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID


def test_a_truncated_or_foreign_archive_is_capsule_invalid() -> None:
    with pytest.raises(CapsuleInvalid):
        imagearchive.read_index(io.BytesIO(b"\x1f\x8b not a tar at all" * 100))
    image = imagearchive.read_index(io.BytesIO(_hostile_archive())).images[ID_A]
    truncated = _hostile_archive()[:2000]
    with pytest.raises(CapsuleInvalid):
        b"".join(imagearchive.rebuilt(io.BytesIO(truncated), image))
    other = _saved({"a.json": CONFIG_A, "manifest.json": _MANIFEST_A})  # the layer gone on the second read
    with pytest.raises(CapsuleInvalid, match="no longer holds"):
        b"".join(imagearchive.rebuilt(io.BytesIO(other), image))


# --------------------------------------------------------------------------- names in a record


@pytest.mark.parametrize(
    "ref",
    ["repro-base:bookworm", "repro-env:0123abcd", "registry.example.com:5000/team/train:v1.2",
     "localhost/x", "ghcr.io/a/b@sha256:" + "c" * 64, "sha256:" + "d" * 64, "a__b-c.d/e"],
)  # fmt: skip
def test_image_references_in_docker_grammar_are_accepted(ref: str) -> None:
    assert limits.is_reference(ref)


@pytest.mark.parametrize(
    "ref",
    ["", "Repro:x", "a:b\nc", "repro-base:bookworm\x1b[2J", "a;rm -rf /", "a:-x", "a//b", ":tag",
     "a:" + "t" * 129, "a" * 256, "../../etc", "a b", "ubuntu:latest\u202e", "sha256:" + "d" * 12,
     "3c1a17ede9ca"],
)  # fmt: skip
def test_other_strings_are_no_image_reference(ref: str) -> None:
    assert not limits.is_reference(ref)


def test_a_loaded_image_is_tagged_by_its_id_in_repro_s_namespace() -> None:
    tag = images.carried_tag(ID_A)
    assert tag == f"repro-env:sha256-{ID_A[7:31]}" and limits.is_reference(tag) and images.is_own_tag(tag)
    assert not images.is_own_tag("repro-base:bookworm") and not images.is_own_tag("repro-envy:x")


def _record_with(**image: str) -> bytes:
    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.deps.image = ImageInfo(
        id=ID_A, tag="repro-env:" + "b" * 24, base="repro-base:bookworm", base_id=ID_B
    )
    for key, value in image.items():
        setattr(record.deps.image, key, value)
    return dump_record(record)


@pytest.mark.parametrize(
    ("field", "value"),
    [("id", "sha256:3c1a"), ("id", "repro-base:bookworm"), ("base_id", "3c1a17ede9ca"),
     ("tag", "repro-base:bookworm\n\x1b[2Jowned"), ("tag", "x" * 600), ("base", "Evil Base"),
     ("template", "../cpu")],
)  # fmt: skip
def test_a_record_s_image_names_are_checked_before_any_use(field: str, value: str) -> None:
    with pytest.raises(CapsuleInvalid, match=f"deps.image.{field} ") as caught:
        load_record(_record_with(**{field: value}))
    assert caught.value.exit_code == ExitCode.CAPSULE_INVALID and caught.value.member == RECORD_NAME
    assert "\n" not in caught.value.message and "\x1b" not in caught.value.message


def test_a_record_s_genuine_image_names_load() -> None:
    image = load_record(_record_with()).deps.image
    assert image is not None and image.id == ID_A and image.base_id == ID_B
    assert load_record(_record_with(base="", base_id="", tag="")).deps.image is not None  # absent is fine


# --------------------------------------------------------------------------- the base a replay builds on


def test_a_rebuilt_image_on_another_base_gets_one_note() -> None:
    recorded = ImageInfo(id=ID_A, base="repro-base:bookworm", base_id=ID_B)
    same = ImageInfo(id=ID_A, base="repro-base:bookworm", base_id=ID_B)
    other = ImageInfo(id=ID_B, base="repro-base:bookworm", base_id="sha256:" + "e" * 64)
    assert base_note(recorded, same) is None and base_note(None, other) is None
    note = base_note(recorded, other)
    assert note is not None and "\n" not in note
    assert ID_B[:19] in note and "sha256:eeeeeeeeeeee" in note and "verdict may" in note
    loaded = ImageInfo(id=ID_A, base="", base_id="sha256:" + "e" * 64, loaded=True)
    assert base_note(recorded, loaded) is None  # a carried image is not rebuilt: no base of this host


# --------------------------------------------------------------------------- the store's image ledger


def _sealed(store: Store, run_id: str, image_id: str | None) -> None:
    record = Record(id=run_id, created="2026-01-01T00:00:00+00:00")
    if image_id:
        record.deps.image = ImageInfo(id=image_id, tag="repro-env:" + "b" * 24)
    run_dir = store.runs_dir / run_id
    run_dir.mkdir(parents=True)
    (run_dir / RECORD_NAME).write_bytes(dump_record(record))


def test_unused_images_are_those_this_store_made_and_no_run_of_it_refers_to(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    made_gone, made_kept, found, imported, by_build = ("sha256:" + c * 64 for c in "12345")
    uses = [
        store_images.ImageUse(made_gone, "20260101-000000-aaaa", made=True),  # its run was removed
        store_images.ImageUse(made_kept, "20260101-000000-bbbb", made=True),
        store_images.ImageUse(found, "20260101-000000-aaaa", made=False),  # someone else's image
        store_images.ImageUse(imported, "20260101-000000-cccc", made=True),
        store_images.ImageUse(by_build, None, made=True),  # `repro build`, no run
    ]
    for use in uses:
        store_images.note(store.dir, use)
    with (store.dir / store_images.LEDGER).open("a") as ledger:
        ledger.write("not json\n{}\n")  # damage is skipped
    _sealed(store, "20260101-000000-bbbb", made_kept)
    (store.runs_dir / "20260101-000000-dddd").mkdir()  # still running: its notes count
    store_images.note(store.dir, store_images.ImageUse(imported, "20260101-000000-dddd", made=False))
    _sealed(store, "20260101-000000-eeee", None)
    assert store_images.uses(store.dir)[:5] == uses
    assert store_images.unused(store) == [made_gone, by_build]

    store_images.forget(store.dir, {made_gone})
    assert made_gone not in {use.id for use in store_images.uses(store.dir)}
    assert store_images.unused(store) == [by_build]


def test_a_ledger_that_cannot_be_written_loses_the_note_not_the_run(tmp_path: Path) -> None:
    missing = tmp_path / "no-store-here"
    store_images.note(missing, store_images.ImageUse(ID_A, None, made=True))
    assert not missing.exists() and store_images.uses(missing) == []


@pytest.mark.parametrize(
    "said",
    [
        "Loaded image ID: {id}",  # Docker
        "Loaded image: {id}",  # Podman's Docker-compatible API, for a nameless archive
    ],
)
def test_the_ids_an_engine_says_it_loaded_are_read_from_either_engine_s_words(said: str) -> None:
    """What the engine says it loaded is what repro removes again when the load was not the recorded
    image: read from Docker's words and Podman's alike."""
    from repro.backends.docker.archive import load_image

    image = "sha256:" + hashlib.sha256(b"loaded").hexdigest()

    class Api:
        def load_image(self, archive: object) -> Iterator[dict[str, str]]:
            yield {"stream": said.format(id=image) + "\n"}

    class Client:
        api = Api()

    assert load_image(Client(), [b""], lambda event: None) == [image]
