"""Package index locations: on this machine or not, shown without credentials, and whether one answers
(asked once and briefly before pip or a fetch depends on it).

pip retries an unreachable index for minutes (five retries of each request, each with its own
timeout); one short request first turns that into one line. Any HTTP answer counts as an
answer (an index may refuse its root page); a refused connection, a name that does not resolve
or a timeout does not.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from repro.errors import IndexUnreachable

PROBE_SECONDS = 5.0


def is_local(location: str) -> bool:
    """Whether a source is on this machine (a path or a ``file://`` URL)."""
    return "://" not in location or location.startswith("file:")


def local_path(location: str) -> Path:
    """The path of a local source (a plain path or a ``file://`` URL)."""
    if location.startswith("file:"):
        from urllib.request import url2pathname  # 8 ms (http.client, email): only for a file: URL

        return Path(url2pathname(unquote(urlsplit(location).path)))
    return Path(location).expanduser()


def shown(location: str) -> str:
    """A source as it may be printed: any user name or password in the URL replaced by ``***``."""
    parts = urlsplit(location)
    if "@" not in parts.netloc:
        return location
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def check_reachable(index: str, timeout: float = PROBE_SECONDS) -> None:
    """Return when ``index`` answers (any HTTP status; a local folder that exists).

    Raises:
        IndexUnreachable: it does not (the reason in a few words).
    """
    if is_local(index):
        if not local_path(index).exists():
            raise IndexUnreachable(shown(index), "no such file or directory")
        return
    import requests  # where an index is asked: every command starts without it

    try:
        with requests.get(index, timeout=timeout, stream=True, allow_redirects=False):
            return
    except requests.Timeout as e:
        raise IndexUnreachable(shown(index), f"no answer within {timeout:.0f}s") from e
    except requests.ConnectionError as e:
        raise IndexUnreachable(shown(index), _why(e)) from e
    except requests.RequestException as e:
        raise IndexUnreachable(shown(index), type(e).__name__) from e


def _why(e: BaseException) -> str:
    """The cause of a failed connection, found in the chain of exceptions (not in their text)."""
    seen: BaseException | None = e
    causes: list[BaseException] = []
    while seen is not None and len(causes) < 16:
        causes.append(seen)
        reason = getattr(seen, "reason", None)  # urllib3's MaxRetryError keeps its cause here
        seen = reason if isinstance(reason, BaseException) else (seen.__cause__ or seen.__context__)
    if any(isinstance(c, socket.gaierror) for c in causes):
        return "its host name does not resolve"
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return "connection refused"
    return "connection failed"
