"""Reading one package source: the files a project has there, with the digests the source states.

An index is a PEP 503 simple repository (HTML) or a PEP 691 one (JSON), over http(s) or
``file://`` (a directory holding ``<project>/index.html``); a find-links location is a
directory of files or a page of links. Pages are parsed with ``pypi-simple``; nothing
is executed and nothing but the project's page is fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from repro.errors import IndexUnreadable
from repro.fetch.names import DistName, parse
from repro.fetch.reach import is_local, local_path, shown
from repro.fetch.sources import Sources

if TYPE_CHECKING:  # requests and pypi-simple are imported where an index is read: every command starts faster
    import requests
    from pypi_simple import ProjectPage


@dataclass(frozen=True)
class Link:
    """A distribution file a source offers."""

    name: DistName
    url: str  # http(s) or file URL, without a digest fragment
    sha256: str | None  # the digest the source states; None when it states none (a plain directory)
    source: str  # the index or find-links location it came from


class Reader:
    """Lists projects' files on the sources of one pip configuration (one per thread)."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self._sessions: dict[str, requests.Session] = {}

    def session(self, source: str) -> requests.Session:
        """The HTTP session for ``source``: the configured CA bundle, client certificate and trusted hosts."""
        if source not in self._sessions:
            import requests

            s = requests.Session()
            host = urlsplit(source).hostname or ""
            s.verify = False if host in self.sources.trusted_hosts else (self.sources.cert or True)
            if self.sources.client_cert:
                s.cert = self.sources.client_cert
            self._sessions[source] = s
        return self._sessions[source]

    def close(self) -> None:
        for s in self._sessions.values():
            s.close()
        self._sessions.clear()

    def files(self, source: str, key: str) -> list[Link]:
        """The distribution files of project ``key`` (PEP 503 normal form) on ``source``.

        A project the source does not have gives an empty list.

        Raises:
            IndexUnreadable: the source itself cannot be read (missing, refused, an error status).
        """
        is_index = source in self.sources.indexes
        if is_local(source):
            return self._local(source, key, is_index)
        page = self._remote(source, key, is_index)
        return _links(page, key, source) if page is not None else []

    def _local(self, source: str, key: str, is_index: bool) -> list[Link]:
        root = local_path(source)
        if not root.exists():
            raise IndexUnreadable(shown(source), "no such file or directory")
        where = root / key if is_index and root.is_dir() else root
        try:
            if where.is_file():
                return _links(_page_from_html(key, where.read_bytes(), where.as_uri()), key, source)
            if (where / "index.html").is_file():
                html = (where / "index.html").read_bytes()
                return _links(_page_from_html(key, html, where.as_uri() + "/"), key, source)
            if where.is_dir():
                return _dir_links(where, key, source)
        except OSError as e:
            raise IndexUnreadable(shown(source), e.strerror or type(e).__name__) from e
        return []  # pip too skips an index that has no folder for the project

    def _remote(self, source: str, key: str, is_index: bool) -> ProjectPage | None:
        import requests
        from pypi_simple import NoSuchProjectError, PyPISimple
        from pypi_simple.errors import UnsupportedContentTypeError, UnsupportedRepoVersionError

        session = self.session(source)
        timeout = self.sources.timeout
        try:
            if is_index:
                try:
                    return PyPISimple(source, session=session).get_project_page(key, timeout=timeout)
                except NoSuchProjectError:
                    return None
            r = session.get(source, timeout=timeout)
            r.raise_for_status()
            return _page_from_html(key, r.content, r.url)
        except requests.HTTPError as e:
            status = e.response.status_code if e.response is not None else "?"
            raise IndexUnreadable(shown(source), f"HTTP {status}") from e
        except requests.RequestException as e:
            raise IndexUnreadable(shown(source), _reason(e)) from e
        except (UnsupportedContentTypeError, UnsupportedRepoVersionError, ValueError) as e:
            raise IndexUnreadable(shown(source), f"not a package index page ({e})") from e


def _page_from_html(key: str, html: bytes, base_url: str) -> ProjectPage:
    from pypi_simple import ProjectPage
    from pypi_simple.errors import UnsupportedRepoVersionError

    try:
        return ProjectPage.from_html(key, html, base_url=base_url)
    except (UnsupportedRepoVersionError, ValueError) as e:
        raise IndexUnreadable(shown(base_url), f"not a package index page ({e})") from e


def _links(page: ProjectPage, key: str, source: str) -> list[Link]:
    """The page's files of project ``key``; a remote page's links only over http(s) (a remote index
    never makes repro read a file of this machine)."""
    remote = not is_local(source)
    links = []
    for pkg in page.packages:
        name = parse(pkg.filename)
        if remote and urlsplit(pkg.url).scheme not in ("http", "https"):
            continue
        if name is not None and name.key == key:
            links.append(Link(name, pkg.url, pkg.digests.get("sha256"), source))
    return links


def _dir_links(folder: Path, key: str, source: str) -> list[Link]:
    """The project's files in a directory (a find-links folder); no digest is stated there."""
    found = []
    for path in sorted(folder.iterdir()):
        name = parse(path.name)
        if name is not None and name.key == key and path.is_file():
            found.append(Link(name, path.as_uri(), None, source))
    return found


def _reason(e: requests.RequestException) -> str:
    import requests

    if isinstance(e, requests.Timeout):
        return "timed out"
    if isinstance(e, requests.ConnectionError):
        return "connection failed"
    return type(e).__name__
