"""Image inputs without an engine: templates, content tags, lockfile parsing, wheelhouse, context."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from repro.backends import images
from repro.errors import BuildError, NotFoundError
from repro.facts.lockfile import parse_lockfile
from repro.fetch.names import parse as parse_dist
from repro.fetch.sources import Sources
from repro.store import limits

BASE_ID = "sha256:" + "ab" * 32


def _wheel(dir: Path, name: str, body: bytes) -> tuple[Path, str]:
    path = dir / name
    path.write_bytes(body)
    return path, hashlib.sha256(body).hexdigest()


def _lock_text(*names: str) -> str:
    return "".join(f"{n}==1.0 \\\n    --hash=sha256:{_sha(n)}\n" for n in names)


def _sha(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


TORCH_LOCK = _lock_text("filelock", "torch", "nvidia-cublas-cu12", "typing-extensions", "nvidia-cudnn-cu12")


def test_render_puts_the_base_id_in_from_and_copies_no_code() -> None:
    for template in limits.TEMPLATES:
        text = images.render_dockerfile(template, BASE_ID, TORCH_LOCK)
        assert f"FROM {BASE_ID}\n" in text
        assert "{{" not in text
        assert "--no-index" in text and "--require-hashes" in text
        assert "/opt/venv/bin" in text.split("PATH=")[1].split(":")[0]
        build, image = text.split(f"FROM {BASE_ID}\n")  # the wheels' stage, then the image's
        assert build.count(f"FROM {BASE_ID} AS {images.BUILD_STAGE}\n") == 1
        copies = [line for line in build.splitlines() if line.startswith(("COPY", "ADD"))]
        assert copies and all(c.startswith(f"COPY {images.LAYERS_DIR}/") for c in copies)
        # The image takes only what was installed: no layer of it holds the build context's wheels.
        copies = [line for line in image.splitlines() if line.startswith(("COPY", "ADD"))]
        # The image's venv is its own, made without pip: nothing pre-installed can shadow a locked one.
        assert "RUN python3 -m venv --without-pip /opt/venv\n" in image
        assert image.index("--without-pip") < image.index("COPY")
        assert all(c.startswith(f"COPY --from={images.BUILD_STAGE} {images.INSTALLED}/") for c in copies)
        assert len(copies) == 3 and "pip install" not in image and images.LAYERS_DIR not in image
    assert "NVIDIA_VISIBLE_DEVICES" in images.render_dockerfile("cuda", BASE_ID)
    assert "pip install" not in images.render_dockerfile("cpu", BASE_ID)  # nothing locked
    with pytest.raises(NotFoundError):
        images.render_dockerfile("rocm", BASE_ID)


def test_large_wheels_get_layers_of_their_own_ahead_of_the_rest() -> None:
    groups = images.layer_groups(parse_lockfile(TORCH_LOCK))
    assert [(name, [r.key for r in reqs]) for name, reqs in groups] == [
        ("nvidia", ["nvidia-cublas-cu12", "nvidia-cudnn-cu12"]),
        ("torch", ["torch"]),
        ("rest", ["filelock", "typing-extensions"]),
    ]
    lines = images.render_dockerfile("cpu", BASE_ID, TORCH_LOCK).splitlines()
    at = {key: next(i for i, line in enumerate(lines) if key in line)
          for key in ("FROM", "venv /opt/venv", "COPY layers/00-nvidia/", "COPY layers/01-torch/",
                      "COPY layers/02-rest/")}  # fmt: skip
    assert list(at.values()) == sorted(at.values())
    assert sum("pip install --no-index --no-deps --require-hashes" in line for line in lines) == 3


def test_adding_a_small_package_keeps_the_large_layers_text() -> None:
    """The build cache reuses a layer while its step and its files are unchanged: adding a small
    package changes only the last group's step and files."""
    before = images.render_dockerfile("cpu", BASE_ID, TORCH_LOCK)
    after = images.render_dockerfile("cpu", BASE_ID, TORCH_LOCK + _lock_text("tqdm"))
    head = before.split("COPY layers/02-rest/")[0]
    assert after.startswith(head)
    assert images.image_tag(before, TORCH_LOCK.encode(), BASE_ID) != images.image_tag(
        after, (TORCH_LOCK + _lock_text("tqdm")).encode(), BASE_ID
    )


def test_tag_is_a_hash_of_all_three_inputs() -> None:
    dockerfile = images.render_dockerfile("cpu", BASE_ID)
    tag = images.image_tag(dockerfile, b"six==1\n", BASE_ID)
    assert tag.startswith("repro-env:") and len(tag.split(":")[1]) == images.TAG_HEX
    assert tag == images.image_tag(dockerfile, b"six==1\n", BASE_ID)
    assert tag != images.image_tag(dockerfile + "\n", b"six==1\n", BASE_ID)
    assert tag != images.image_tag(dockerfile, b"six==2\n", BASE_ID)
    assert tag != images.image_tag(dockerfile, b"six==1\n", "sha256:" + "cd" * 32)
    # parts are length-prefixed: moving bytes between parts changes the tag
    assert images.image_tag("ab", b"c", "d") != images.image_tag("a", b"bc", "d")


def test_labels_and_image_ids() -> None:
    labels = images.image_labels(b"x", BASE_ID, "cpu")
    assert labels[images.LABEL_LOCK] == images.lock_hash(b"x")
    assert labels[images.LABEL_BASE] == BASE_ID and labels[images.LABEL_TEMPLATE] == "cpu"
    assert images.LABEL_VERSION in labels
    assert limits.is_image_id(BASE_ID)
    assert not limits.is_image_id("repro-base:bookworm") and not limits.is_image_id("sha256:abc")


LOCK = """\
#
# This file is autogenerated by pip-compile
#
--extra-index-url file:///opt/pypi/simple
--find-links /opt/wheels

typing-extensions==4.16.0 \\
    --hash=sha256:{a} \\
    --hash=sha256:{b}
    # via torch
Jinja2[i18n]==3.1.6 ; python_version >= "3.8" \\
    --hash=sha256:{c}
"""


def test_parse_lockfile_joins_continuations_and_skips_options() -> None:
    text = LOCK.format(a="1" * 64, b="2" * 64, c="3" * 64)
    pinned = parse_lockfile(text)
    assert [(p.key, p.version) for p in pinned] == [("typing-extensions", "4.16.0"), ("jinja2", "3.1.6")]
    assert pinned[0].hashes == ["1" * 64, "2" * 64]
    assert pinned[1].hashes == ["3" * 64]
    assert "--hash=sha256:" + "1" * 64 in pinned[0].text


def test_parse_lockfile_rejects_unpinned_or_unhashed() -> None:
    with pytest.raises(BuildError, match="not pinned"):
        parse_lockfile("torch>=2\n")
    with pytest.raises(BuildError, match="no --hash"):
        parse_lockfile("torch==2.13.0\n")


def _simple_index(root: Path, files: dict[str, bytes]) -> Sources:
    """A PEP 503 index on disk holding ``files``, as the only source."""
    for filename, body in files.items():
        name = parse_dist(filename)
        assert name is not None
        page = root / "simple" / name.key
        page.mkdir(parents=True, exist_ok=True)
        (root / filename).write_bytes(body)
        digest = hashlib.sha256(body).hexdigest()
        (page / "index.html").write_text(f'<a href="../../{filename}#sha256={digest}">{filename}</a>')
    return Sources(indexes=((root / "simple").as_uri(),))


def test_wheelhouse_reuses_files_matching_lock_hashes(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    te, te_hash = _wheel(house, "typing_extensions-4.16.0-py3-none-any.whl", b"te")
    _wheel(house, "six-1.0-py3-none-any.whl", b"six")
    lock = tmp_path / "req.lock"
    lock.write_text(
        f"typing-extensions==4.16.0 \\\n    --hash=sha256:{'0' * 64} \\\n    --hash=sha256:{te_hash}\n"
    )
    no_index = Sources(indexes=())  # nothing can be downloaded
    for _ in range(2):  # the second time from the digest cache
        got = images.prepare_wheelhouse(lock, house, sources=no_index)
        assert {k: (f.path, f.kind, f.sha256) for k, f in got.items()} == {
            "typing-extensions": (te, "wheel", te_hash)
        }
    assert (house / ".sha256.json").is_file()


def test_wheelhouse_downloads_only_what_is_missing(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    have, have_hash = _wheel(house, "filelock-4.2.11-py3-none-any.whl", b"fl")
    want = {
        "typing_extensions-4.16.0-py3-none-any.whl": b"typing",
        "antlr4-python3-runtime-4.9.3.tar.gz": b"a",
    }
    sources = _simple_index(tmp_path / "index", want)
    (tmp_path / "index" / "simple" / "filelock").mkdir()  # the index would not have it: it is not asked
    lock = tmp_path / "req.lock"
    lock.write_text(
        f"filelock==4.2.11 \\\n    --hash=sha256:{have_hash}\n"
        f"typing-extensions==4.16.0 \\\n    --hash=sha256:{hashlib.sha256(b'typing').hexdigest()}\n"
        f"antlr4-python3-runtime==4.9.3 --hash=sha256:{hashlib.sha256(b'a').hexdigest()}\n"
    )
    lines: list[str] = []
    files = images.prepare_wheelhouse(lock, house, lines.append, sources=sources)
    assert [(f.path.name, f.kind) for f in files.values()] == [
        (have.name, "wheel"),
        ("typing_extensions-4.16.0-py3-none-any.whl", "wheel"),
        ("antlr4-python3-runtime-4.9.3.tar.gz", "sdist"),  # the name is not cut at its first dash
    ]
    assert lines[0].startswith("fetching 2 of 3 pinned distributions")
    again = images.prepare_wheelhouse(lock, house, sources=Sources(indexes=()))  # all there now
    assert again == files


def test_wheelhouse_fails_when_no_source_has_a_matching_file(tmp_path: Path) -> None:
    lock = tmp_path / "req.lock"
    lock.write_text(f"six==1.0 \\\n    --hash=sha256:{'9' * 64}\n")
    sources = _simple_index(tmp_path / "index", {"six-1.0-py3-none-any.whl": b"other bytes"})
    with pytest.raises(BuildError, match="six==1.0"):
        images.prepare_wheelhouse(lock, tmp_path / "house", sources=sources)
    assert [p.name for p in (tmp_path / "house").iterdir() if not p.name.startswith(".")] == []
    with pytest.raises(NotFoundError):
        images.prepare_wheelhouse(tmp_path / "missing.lock", tmp_path / "house")


def test_cache_dir_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path))
    assert images.wheelhouse_dir() == tmp_path / "wheelhouse"


def test_context_holds_dockerfile_and_one_folder_per_layer(tmp_path: Path) -> None:
    six, six_hash = _wheel(tmp_path, "six-1.0-py3-none-any.whl", b"wheel bytes")
    torch, torch_hash = _wheel(tmp_path, "torch-1.0-cp311-none-any.whl", b"big wheel")
    lock = f"six==1.0 --hash=sha256:{six_hash}\ntorch==1.0 --hash=sha256:{torch_hash}\n".encode()
    buf = io.BytesIO()
    built = hashlib.sha256(b"big wheel, built from source").hexdigest()
    wheels = {"six": images.Wheel(six), "torch": images.Wheel(torch, built_sha256=built)}
    images.write_context(buf, "FROM x\n", lock, wheels)
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        assert tar.getnames() == [
            "Dockerfile",
            "layers/00-torch",
            "layers/00-torch/requirements.lock",
            "layers/00-torch/torch-1.0-cp311-none-any.whl",
            "layers/01-rest",
            "layers/01-rest/requirements.lock",
            "layers/01-rest/six-1.0-py3-none-any.whl",
        ]
        member = tar.extractfile("layers/01-rest/six-1.0-py3-none-any.whl")
        assert member is not None and member.read() == b"wheel bytes"
        part = tar.extractfile("layers/00-torch/requirements.lock")
        # a wheel built in the sandbox is installed against the digest it left the sandbox with
        assert part is not None and part.read().decode() == f"torch==1.0 --hash=sha256:{built}\n"
        part = tar.extractfile("layers/01-rest/requirements.lock")
        assert part is not None and part.read().decode() == f"six==1.0 --hash=sha256:{six_hash}\n"
        assert tar.getmember("layers/00-torch/torch-1.0-cp311-none-any.whl").mtime == 0
    empty = io.BytesIO()
    images.write_context(empty, "FROM x\n", b"", {})
    empty.seek(0)
    with tarfile.open(fileobj=empty) as tar:
        assert tar.getnames() == ["Dockerfile"]
    with pytest.raises(BuildError, match="no wheel"):
        images.write_context(io.BytesIO(), "FROM x\n", lock, {"six": images.Wheel(six)})


def test_base_image_python_version_and_prerequisites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repro.backends import baseimage
    from repro.errors import BackendUnavailable

    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "python3").symlink_to("python3.11")
    assert baseimage.python_version(tmp_path) == "3.11"
    assert baseimage.python_version(tmp_path / "none") is None
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(BackendUnavailable, match="needs root"):
        baseimage.check_prerequisites()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(BackendUnavailable, match="debootstrap is not installed") as caught:
        baseimage.check_prerequisites()
    hint = caught.value.hint or ""
    assert caught.value.exit_code == 3 and "apt-get install debootstrap" in hint
    assert "make " not in hint  # a Makefile target exists only in repro's source checkout
