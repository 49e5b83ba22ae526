"""Fetching pinned files without running them: file names, pip's configuration, index reading, digests.

The indexes here are real: a PEP 503 tree on disk read through ``file://``, the same tree
served over HTTP on 127.0.0.1 by ``http.server`` in a thread (HTML, and PEP 691 JSON when
asked for it), and a find-links folder.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from repro.errors import BuildError, ExitCode, IndexUnreadable
from repro.facts.lockfile import Pinned
from repro.fetch.download import DigestMismatch
from repro.fetch.index import Reader
from repro.fetch.names import parse
from repro.fetch.pick import target_tags
from repro.fetch.pinned import NotOnIndexes, fetch_pinned
from repro.fetch.reach import shown
from repro.fetch.sources import PYPI, Sources, from_settings, parse_config_list

# --------------------------------------------------------------------------- file names


@pytest.mark.parametrize(
    ("filename", "key", "version", "kind"),
    [
        ("antlr4-python3-runtime-4.9.3.tar.gz", "antlr4-python3-runtime", "4.9.3", "sdist"),
        ("antlr4_python3_runtime-4.13.2-py3-none-any.whl", "antlr4-python3-runtime", "4.13.2", "wheel"),
        ("zope.interface-6.0.tar.gz", "zope-interface", "6.0", "sdist"),
        ("zope_interface-7.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "zope-interface",
         "7.2", "wheel"),
        ("Foo_Bar.baz-1.0.post1.zip", "foo-bar-baz", "1.0.post1", "sdist"),
        ("typing_extensions-4.16.0-py3-none-any.whl", "typing-extensions", "4.16.0", "wheel"),
        ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "torch", "2.13.0+cpu", "wheel"),
        ("ruamel.yaml.clib-0.2.8.tar.gz", "ruamel-yaml-clib", "0.2.8", "sdist"),
    ],
)  # fmt: skip
def test_file_names_split_at_the_version_not_at_the_first_dash(
    filename: str, key: str, version: str, kind: str
) -> None:
    name = parse(filename)
    assert name is not None
    assert (name.key, str(name.version), name.kind) == (key, version, kind)
    assert name.is_release(key, version)


@pytest.mark.parametrize(
    "filename",
    ["antlr4-python3-runtime-4.5.2.macosx-10.10-x86_64.exe", "six-1.0.egg", "x.tar.bz2", "../evil-1.0.tar.gz",
     "a/b-1.0-py3-none-any.whl", "", "nover.tar.gz", "bad-1.0-py3.whl"],
)  # fmt: skip
def test_names_that_are_not_a_wheel_or_sdist_release_are_none(filename: str) -> None:
    assert parse(filename) is None


def test_a_release_is_matched_by_pep_440_equality_and_normal_name() -> None:
    name = parse("Zope.Interface-6.0.tar.gz")
    assert name is not None
    assert name.is_release("zope-interface", "6.0.0") and not name.is_release("zope-interface", "6.0.1")
    assert not name.is_release("zope", "6.0")


# --------------------------------------------------------------------------- pip's configuration


def test_pip_config_precedence_env_over_download_over_global() -> None:
    text = (
        "global.index-url='https://mirror.example/simple'\n"
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
        "download.index-url='https://download.example/simple'\n"
        ":env:.index-url='http://127.0.0.1:9/simple'\n"
        "global.find_links='/opt/wheels'\n"
        "install.index-url='https://not-for-download.example'\n"
        "global.cert='/etc/ssl/ca.pem'\n"
        "global.timeout='60'\n"
    )
    sources = from_settings(parse_config_list(text))
    assert sources.indexes == ("http://127.0.0.1:9/simple", "file:///opt/a/simple", "file:///opt/b/simple")
    assert sources.find_links == ("/opt/wheels",)
    assert sources.cert == "/etc/ssl/ca.pem" and sources.timeout == 60.0
    assert sources.all()[:3] == ("/opt/wheels", "file:///opt/a/simple", "file:///opt/b/simple")  # local first


def test_no_config_is_pypi_and_no_index_is_none() -> None:
    assert from_settings({}).indexes == (PYPI,)
    assert from_settings({"no-index": "true", "find-links": "/w"}).indexes == ()
    assert from_settings({"no-index": "true", "find-links": "/w"}).all() == ("/w",)


def test_credentials_in_an_index_url_are_never_shown() -> None:
    assert shown("https://user:s3cret@pkgs.example/simple/") == "https://***@pkgs.example/simple/"
    assert shown("file:///opt/pypi/simple") == "file:///opt/pypi/simple"


# --------------------------------------------------------------------------- real indexes: disk, loopback


@dataclass
class Index:
    root: Path  # holds simple/ and files/
    files: dict[str, bytes]

    @property
    def simple(self) -> Path:
        return self.root / "simple"

    def sha(self, filename: str) -> str:
        return hashlib.sha256(self.files[filename]).hexdigest()


def _index(root: Path, files: dict[str, bytes], lie: dict[str, str] | None = None) -> Index:
    """A PEP 503 tree: simple/<project>/index.html linking ../../files/<file>#sha256=<digest>."""
    (root / "files").mkdir(parents=True)
    pages: dict[str, list[str]] = {}
    for filename, body in files.items():
        (root / "files" / filename).write_bytes(body)
        name = parse(filename)
        assert name is not None
        digest = (lie or {}).get(filename) or hashlib.sha256(body).hexdigest()
        pages.setdefault(name.key, []).append(
            f'<a href="../../files/{filename}#sha256={digest}">{filename}</a>'
        )
    for key, links in pages.items():
        (root / "simple" / key).mkdir(parents=True)
        (root / "simple" / key / "index.html").write_text(
            "<html><body>" + "<br>".join(links) + "</body></html>"
        )
    return Index(root, files)


FILES = {
    "antlr4-python3-runtime-4.9.3.tar.gz": b"antlr sdist",
    "zope.interface-6.0.tar.gz": b"zope sdist",
    "zope_interface-6.0-py3-none-any.whl": b"zope wheel",
    "only_other_python-1.0-cp312-cp312-manylinux_2_17_x86_64.whl": b"cp312 wheel",
    "only_other_python-1.0.tar.gz": b"its sdist",
}


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the tree; a project page as PEP 691 JSON when the client asks for it first."""

    json_pages = False

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        page = Path(self.directory) / self.path.lstrip("/") / "index.html"
        if self.json_pages and self.path.startswith("/simple/") and page.is_file():
            from pypi_simple import ProjectPage

            key = self.path.strip("/").split("/")[1]
            parsed = ProjectPage.from_html(
                key, page.read_bytes(), base_url=f"http://{self.headers['Host']}{self.path}"
            )
            body = json.dumps({
                "meta": {"api-version": "1.0"}, "name": key,
                "files": [{"filename": p.filename, "url": p.url, "hashes": p.digests}
                          for p in parsed.packages],
            }).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return _index(tmp_path / "index", FILES)


def _serve(root: Path, json_pages: bool = False) -> Iterator[str]:
    handler = type("H", (_Handler,), {"json_pages": json_pages})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(params=["html", "json"])
def served(index: Index, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _serve(index.root, json_pages=request.param == "json")


def _pin(index: Index, filename: str, *more: str) -> Pinned:
    name = parse(filename)
    assert name is not None
    hashes = [index.sha(f) for f in (filename, *more)]
    return Pinned(name.key, str(name.version), hashes, f"{name.key}=={name.version}")


def test_the_file_index_lists_a_projects_files_with_their_digests(index: Index) -> None:
    uri = index.simple.as_uri()
    reader = Reader(Sources(indexes=(uri,)))
    links = reader.files(uri, "antlr4-python3-runtime")
    assert [(link.name.filename, link.sha256) for link in links] == [
        ("antlr4-python3-runtime-4.9.3.tar.gz", index.sha("antlr4-python3-runtime-4.9.3.tar.gz"))
    ]
    assert links[0].url == (index.root / "files" / "antlr4-python3-runtime-4.9.3.tar.gz").as_uri()
    assert reader.files(uri, "not-there") == []  # pip too passes over an index without the project


def test_the_loopback_index_lists_the_same_files(index: Index, served: str) -> None:
    reader = Reader(Sources(indexes=(served,)))
    try:
        links = reader.files(served, "zope-interface")
    finally:
        reader.close()
    assert sorted((link.name.filename, link.sha256) for link in links) == [
        ("zope.interface-6.0.tar.gz", index.sha("zope.interface-6.0.tar.gz")),
        ("zope_interface-6.0-py3-none-any.whl", index.sha("zope_interface-6.0-py3-none-any.whl")),
    ]
    assert all(link.url.startswith(served.rsplit("/simple/", 1)[0] + "/files/") for link in links)
    assert Reader(Sources(indexes=(served,))).files(served, "not-there") == []


def test_an_index_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path, index: Index) -> None:
    gone = (tmp_path / "no-such-index").as_uri()
    with pytest.raises(IndexUnreadable) as caught:
        Reader(Sources(indexes=(gone,))).files(gone, "six")
    assert gone in caught.value.message and "\n" not in caught.value.message
    assert caught.value.exit_code == ExitCode.UNEXPECTED and caught.value.hint

    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://user:pw@127.0.0.1:{s.getsockname()[1]}/simple/"
    with pytest.raises(IndexUnreadable) as caught:
        Reader(Sources(indexes=(closed,), timeout=5)).files(closed, "six")
    assert "connection failed" in caught.value.message and "pw" not in caught.value.message

    for url in _serve(index.root):
        broken = url.replace("/simple/", "/files/")  # a folder of files is no index: 404 → nothing there
        assert Reader(Sources(indexes=(broken,))).files(broken, "six") == []
        page = url + "zope-interface/"  # a find-links page of links over http
        links = Reader(Sources(find_links=(page,))).files(page, "zope-interface")
        assert len(links) == 2


def test_fetch_takes_the_wheel_else_the_sdist_and_checks_every_digest(
    index: Index, served: str, tmp_path: Path
) -> None:
    dest = tmp_path / "house"
    dest.mkdir()
    pins = [
        _pin(index, "antlr4-python3-runtime-4.9.3.tar.gz"),
        _pin(index, "zope.interface-6.0.tar.gz", "zope_interface-6.0-py3-none-any.whl"),
        _pin(index, "only_other_python-1.0.tar.gz",
             "only_other_python-1.0-cp312-cp312-manylinux_2_17_x86_64.whl"),
    ]  # fmt: skip
    lines: list[str] = []
    got = fetch_pinned(pins, dest, "3.11", Sources(indexes=(served,)), lines.append)
    assert {k: (f.path.name, f.kind) for k, f in got.items()} == {
        "antlr4-python3-runtime": ("antlr4-python3-runtime-4.9.3.tar.gz", "sdist"),
        "zope-interface": ("zope_interface-6.0-py3-none-any.whl", "wheel"),
        "only-other-python": ("only_other_python-1.0.tar.gz", "sdist"),  # its wheel is for 3.12
    }
    for f in got.values():
        assert hashlib.sha256(f.path.read_bytes()).hexdigest() == f.sha256
    assert sorted(p.name for p in dest.iterdir()) == sorted(f.path.name for f in got.values())  # no partials
    assert len(lines) == 3

    other = tmp_path / "house312"
    other.mkdir()
    got = fetch_pinned(pins[2:], other, "3.12", Sources(indexes=(index.simple.as_uri(),)))
    assert got["only-other-python"].kind == "wheel"


def test_a_file_whose_bytes_are_not_locked_is_never_kept(tmp_path: Path) -> None:
    body = b"the real sdist"
    stated = {"six-1.0.tar.gz": hashlib.sha256(body).hexdigest()}  # the page states the locked digest
    lying = _index(tmp_path / "lying", {"six-1.0.tar.gz": b"other bytes"}, lie=stated)
    dest = tmp_path / "house"
    dest.mkdir()
    pin = Pinned("six", "1.0", [hashlib.sha256(body).hexdigest()], "six==1.0")
    with pytest.raises(DigestMismatch) as caught:
        fetch_pinned([pin], dest, None, Sources(indexes=(lying.simple.as_uri(),)))
    assert "six-1.0.tar.gz" in caught.value.message and isinstance(caught.value, BuildError)
    assert list(dest.iterdir()) == []

    # A find-links folder states no digest: a file of the release with other bytes is passed over.
    folder = tmp_path / "links"
    folder.mkdir()
    (folder / "six-1.0.tar.gz").write_bytes(b"a rebuilt sdist")
    with pytest.raises(NotOnIndexes) as missing:
        fetch_pinned([pin], dest, None, Sources(indexes=(), find_links=(str(folder),)))
    assert "six==1.0" in missing.value.message and str(folder) in (missing.value.hint or "")
    assert list(dest.iterdir()) == []
    (folder / "six-1.0.tar.gz").write_bytes(body)
    got = fetch_pinned([pin], dest, None, Sources(indexes=(), find_links=(str(folder),)))
    assert got["six"].path.read_bytes() == body


def test_target_tags_follow_the_python_version() -> None:
    assert any(t.interpreter == "cp312" for t in target_tags("3.12"))
    assert not any(t.abi == "cp311" for t in target_tags("3.12"))  # cp311-abi3 does install on 3.12
    assert target_tags(None)[0] == target_tags()[0]


def test_an_unreadable_source_is_passed_over_when_another_has_the_file(index: Index, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/simple/"
    dest = tmp_path / "house"
    dest.mkdir()
    sources = Sources(indexes=(closed, index.simple.as_uri()), timeout=5)
    pin = _pin(index, "antlr4-python3-runtime-4.9.3.tar.gz")
    assert fetch_pinned([pin], dest, None, sources)["antlr4-python3-runtime"].kind == "sdist"
    absent = Pinned("six", "1.0", ["9" * 64], "six==1.0")
    with pytest.raises(IndexUnreadable) as caught:  # found nowhere: the unreadable index is the likely cause
        fetch_pinned([pin, absent], dest, None, sources)
    assert caught.value.message == f"the package index {closed} cannot be read: connection failed"


def test_a_remote_index_cannot_point_at_a_file_of_this_machine(tmp_path: Path) -> None:
    root = tmp_path / "evil"
    (root / "simple" / "six").mkdir(parents=True)
    host_file = tmp_path / "six-1.0.tar.gz"
    host_file.write_bytes(b"a file of the host")
    digest = hashlib.sha256(b"a file of the host").hexdigest()
    link = f'<a href="{host_file.as_uri()}#sha256={digest}">six-1.0.tar.gz</a>'
    (root / "simple" / "six" / "index.html").write_text(link)
    for url in _serve(root):
        assert Reader(Sources(indexes=(url,))).files(url, "six") == []
    local = (root / "simple").as_uri()  # the same page read from this machine's own index: allowed
    assert len(Reader(Sources(indexes=(local,))).files(local, "six")) == 1


def test_a_lock_whose_files_are_not_found_is_not_looked_up_again_each_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repro.fetch import locate

    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path))
    empty = tmp_path / "empty-links"
    empty.mkdir()
    sources = Sources(indexes=(), find_links=(empty.as_uri(),))
    lock = "numpy==2.2.6 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    calls = []
    real = locate.pylock_text

    def counted(text: str, src: Sources | None = None) -> str:
        calls.append(text)
        return real(text, src)

    monkeypatch.setattr(locate, "pylock_text", counted)
    assert locate.cached_pylock(lock, sources) is None
    assert locate.cached_pylock(lock, sources) is None
    assert len(calls) == 1  # the second run reads the kept answer, not the sources
    marker = next((tmp_path / "pylock").glob("*.none"))
    assert "numpy" in marker.read_text()
    old = marker.stat().st_mtime - locate.NONE_FOUND_FOR_S - 1
    os.utime(marker, (old, old))
    assert locate.cached_pylock(lock, sources) is None
    assert len(calls) == 2  # a day later the sources are read again
