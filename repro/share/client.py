"""A small client of the OCI distribution API (v1.1) over `requests`: the one place that speaks to a
registry, and the one place its errors (network, TLS, HTTP status) become repro errors.

HTTPS always, verified against the host's trust store (``SSL_CERT_FILE`` when set, else the bundle
`requests` ships); plain HTTP only to a registry on this machine, or one the project's repro.yaml
names insecure (`registries.insecure`), that does not speak TLS. The login
comes from the host (`repro.share.auth`), offered as Basic credentials or exchanged for a bearer
token, whichever the registry's challenge asks for. Every blob read is checked against its digest
as it streams; a manifest read by digest is checked too.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin

import requests

from repro.errors import CapsuleInvalid, NotFoundError, RegistryRefused, RegistryUnavailable, UsageError
from repro.share.auth import Login, find_login
from repro.share.reference import Reference

TIMEOUT_S = (10, 300)  # connect, then each read: a registry that stops answering is named, not waited on
CHUNK = 1 << 20
MAX_MANIFEST_BYTES = 4 << 20  # as containerd and the distribution server bound a manifest
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def plain_http_allowed(ref: Reference, insecure: tuple[str, ...]) -> bool:
    """The one rule of plain HTTP: a registry on this machine, or one named insecure (as
    ``host:port``, or ``host`` for every port of it)."""
    return ref.loopback or ref.registry in insecure or ref.hostname in insecure


class Registry:
    """One repository of one registry, spoken to with the host's login for it."""

    def __init__(self, ref: Reference, push: bool = False, insecure: tuple[str, ...] = ()) -> None:
        self.ref = ref
        self.plain_ok = plain_http_allowed(ref, insecure)
        self.scope = f"repository:{ref.repository}:{'pull,push' if push else 'pull'}"
        self.login: Login | None = find_login(ref.registry)
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "repro"
        # per request: `requests` lets REQUESTS_CA_BUNDLE override a session's own setting
        self.verify: str | bool = (
            os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE") or True
        )
        self.scheme = "https"
        self._token: str | None = None
        self._basic: tuple[str, str] | None = None  # the login, once the registry asked for Basic

    # ------------------------------------------------------------------ the API

    def has_blob(self, digest: str) -> bool:
        """Whether the repository holds the blob ``digest``."""
        r = self._call("HEAD", f"blobs/{digest}", ok=(200, 404))
        return r.status_code == 200

    def put_blob(self, digest: str, size: int, body: bytes | IO[bytes]) -> None:
        """Upload one blob (a monolithic upload: POST, then PUT with its digest).

        Raises:
            RegistryUnavailable: the registry did not take it.
        """
        started = self._call("POST", "blobs/uploads/", ok=(202,))
        location = urljoin(self._url(""), started.headers.get("Location", ""))
        sep = "&" if "?" in location else "?"
        headers = {"Content-Type": "application/octet-stream"}
        if size == 0:
            body = b""  # `requests` sends an empty file chunked, which the upload never ends
        self._call(
            "PUT", f"{location}{sep}digest={digest}", ok=(201,), data=body, headers=headers, absolute=True
        )

    def get_blob(self, digest: str, size: int, dest: Path) -> None:
        """Write the blob ``digest`` to ``dest``, refused unless its bytes match the digest and size.

        Raises:
            CapsuleInvalid: the bytes served are not the ones named (changed on the registry or on the way).
        """
        h = hashlib.sha256()
        got = 0
        with self._call("GET", f"blobs/{digest}", stream=True) as r, open(dest, "wb") as f:
            for chunk in _chunks(r):
                got += len(chunk)
                if got > size:
                    break
                h.update(chunk)
                f.write(chunk)
        if got != size or f"sha256:{h.hexdigest()}" != digest:
            raise CapsuleInvalid(
                f"blob {digest} from {self.ref.registry}/{self.ref.repository} does not match its digest "
                "(changed on the registry or on the way); nothing was imported",
                member=digest,
                hint="push the run again from a store that holds it (`repro push RUN REF`)",
            )

    def has_manifest(self, reference: str) -> bool:
        """Whether the repository holds the manifest ``reference`` (a tag or a digest)."""
        r = self._call("HEAD", f"manifests/{reference}", ok=(200, 404), headers={"Accept": MANIFEST_TYPES})
        return r.status_code == 200

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> None:
        self._call(
            "PUT", f"manifests/{reference}", ok=(201,), data=body, headers={"Content-Type": media_type}
        )

    def get_manifest(self) -> bytes:
        """The manifest the reference names; checked against its digest when named by digest.

        Raises:
            NotFoundError: no such tag or digest. CapsuleInvalid: over the bound, or not the digest named.
        """
        return self.get_manifest_at(self.ref.reference, MANIFEST_TYPES)

    def get_manifest_at(self, reference: str, accept: str) -> bytes:
        """The manifest (or index) at ``reference`` of the repository, of a type ``accept`` names; checked
        against the digest named, when the reference is the one the user named by digest.

        Raises:
            NotFoundError: no such tag or digest. CapsuleInvalid: over the bound, or not the digest named.
        """
        headers = {"Accept": accept}
        with self._call("GET", f"manifests/{reference}", stream=True, headers=headers) as r:
            body = b""
            for chunk in _chunks(r):
                body += chunk
                if len(body) > MAX_MANIFEST_BYTES:
                    raise CapsuleInvalid(f"the manifest of {self.ref} is over {MAX_MANIFEST_BYTES >> 20} MiB")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if reference.startswith("sha256:") and digest != reference:
            raise CapsuleInvalid(f"the manifest served for {self.ref} has digest {digest}, not the one named")
        return body

    # ------------------------------------------------------------------ transport

    def _url(self, path: str) -> str:
        return f"{self.scheme}://{self.ref.registry}/v2/{self.ref.repository}/{path}"

    def _call(
        self, method: str, path: str, ok: tuple[int, ...] = (200,), absolute: bool = False, **kw: Any
    ) -> requests.Response:
        """One request, authenticated as the registry asks; every failure becomes a repro error.

        Raises:
            RegistryRefused: the login is refused or missing. NotFoundError: 404 where it is not an answer.
            RegistryUnavailable: no answer, a TLS failure, or a status outside the API.
        """
        url = path if absolute else self._url(path)
        r = self._send(method, url, **kw)
        if r.status_code == 401:
            self._authenticate(r)
            r = self._send(method, url, **kw)
        if r.status_code in ok:
            return r
        r.close()
        raise self._refusal(r, method)

    def _send(self, method: str, url: str, **kw: Any) -> requests.Response:
        headers = dict(kw.pop("headers", {}))
        if self.scheme == "http" and url.startswith("https://"):  # a loopback registry found to speak HTTP
            url = "http://" + url.removeprefix("https://")
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        auth = None if self._token is not None else self._basic
        data = kw.get("data")
        if data is not None and hasattr(data, "seek"):
            data.seek(0)  # a retried upload sends its body again from the start
        try:
            return self.session.request(
                method, url, headers=headers, auth=auth, timeout=TIMEOUT_S, verify=self.verify, **kw
            )
        except requests.exceptions.SSLError as e:
            if self.scheme == "https" and self.plain_ok and self._speaks_plain_http():
                self.scheme = "http"
                return self._send(method, url, headers=headers, **kw)
            raise RegistryUnavailable(
                f"{self.ref.registry}: TLS failed ({_reason(e)})",
                hint="trust the registry's CA (SSL_CERT_FILE=ca.pem), or check the registry's address (one "
                "that speaks only plain HTTP: name it in repro.yaml, registries: {insecure: [HOST:PORT]})",
            ) from e
        except requests.exceptions.RequestException as e:
            raise RegistryUnavailable(
                f"{self.ref.registry} does not answer ({_reason(e)})",
                hint="check the registry's address and that it is up (`curl https://REGISTRY/v2/`)",
            ) from e

    def _speaks_plain_http(self) -> bool:
        try:
            r = self.session.get(f"http://{self.ref.registry}/v2/", timeout=TIMEOUT_S, verify=self.verify)
        except requests.exceptions.RequestException:
            return False
        return "Docker-Distribution-API-Version" in r.headers or r.status_code in (200, 401)

    def _authenticate(self, r: requests.Response) -> None:
        """Answer the registry's challenge with the host's login: Basic, or a bearer token for the scope.

        Raises:
            RegistryRefused: the host has no login for the registry, or the token service refuses it.
        """
        if self.login is None:
            raise self._refusal(r, "")
        kind, _, params = r.headers.get("WWW-Authenticate", "").partition(" ")
        if kind.lower() == "basic":
            if self._basic is not None:
                raise self._refusal(r, "")
            self._basic = (self.login.username, self.login.secret)
            return
        if kind.lower() != "bearer" or self._token is not None:
            raise self._refusal(r, "")
        fields = dict(_CHALLENGE.findall(params))
        query = {"service": fields.get("service", ""), "scope": self.scope}
        auth = (self.login.username, self.login.secret)
        try:
            answer = self.session.get(
                fields.get("realm", ""), params=query, auth=auth, timeout=TIMEOUT_S, verify=self.verify
            )
            token = answer.json().get("token") or answer.json().get("access_token") if answer.ok else None
        except (requests.exceptions.RequestException, ValueError, AttributeError) as e:
            raise RegistryUnavailable(f"{self.ref.registry}: its token service failed ({_reason(e)})") from e
        if not isinstance(token, str) or not token:
            raise self._refusal(answer, "")
        self._token = token

    def _refusal(self, r: requests.Response, method: str) -> Exception:
        where = f"{self.ref.registry}/{self.ref.repository}"
        login = f"`docker login {self.ref.registry}` (or `podman login {self.ref.registry}`)"
        if r.status_code in (401, 403):
            if self.login is None:
                return RegistryRefused(f"{where} asks for a login and this host has none for it", hint=login)
            return RegistryRefused(
                f"{where} refused the login from {self.login.source} (HTTP {r.status_code})",
                hint=f"log in again: {login}",
            )
        if r.status_code == 404 and method == "GET":
            return NotFoundError(
                f"{self.ref} is not in the registry", hint="check the repository and the tag"
            )
        if r.status_code == 400 and method == "PUT":
            return UsageError(f"{where} refused the manifest: {_error_text(r)}")
        return RegistryUnavailable(f"{where} answered {method} with HTTP {r.status_code}: {_error_text(r)}")


def _chunks(r: requests.Response) -> Iterator[bytes]:
    try:
        yield from r.iter_content(CHUNK)
    except requests.exceptions.RequestException as e:
        raise RegistryUnavailable(f"the registry stopped answering ({_reason(e)})") from e


def _error_text(r: requests.Response) -> str:
    try:
        errors = r.json().get("errors") or []
        return "; ".join(str(e.get("message") or e.get("code")) for e in errors) or r.reason
    except (ValueError, AttributeError):
        return str(r.reason)


def _reason(e: BaseException) -> str:
    """The cause in a few words: the TLS verdict or the socket error, not urllib3's retry wrapper."""
    text = str(e)
    found = re.search(r"\[SSL[^\]]*\] [^'\")(]+|\[Errno -?\d+\] [^'\")(]+|Read timed out|timed out", text)
    if found:
        return found.group(0).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__
