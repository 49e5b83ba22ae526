"""What the user names: ``[oci://]REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]``."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from repro.errors import UsageError

SCHEME = "oci://"
DEFAULT_TAG = "latest"
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HOST = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::[0-9]{1,5})?$")


@dataclass(frozen=True)
class Reference:
    """A run's place in a registry."""

    registry: str  # host[:port], as the user wrote it
    repository: str
    tag: str | None = None
    digest: str | None = None  # sha256:…, when named by digest

    @property
    def reference(self) -> str:
        """The manifest reference the registry API takes: the digest when named, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG

    @property
    def hostname(self) -> str:
        host = self.registry.rsplit(":", 1)[0] if not self.registry.endswith("]") else self.registry
        return host.strip("[]")

    @property
    def loopback(self) -> bool:
        """Whether the registry is on this machine: the only place plain HTTP is spoken to."""
        if self.hostname == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.hostname).is_loopback
        except ValueError:
            return False

    def with_digest(self, digest: str) -> Reference:
        return Reference(self.registry, self.repository, self.tag, digest)

    def __str__(self) -> str:
        name = f"{self.registry}/{self.repository}"
        if self.tag or not self.digest:
            name += f":{self.tag or DEFAULT_TAG}"
        return name + (f"@{self.digest}" if self.digest else "")


def is_remote(ref: str) -> bool:
    """Whether a run ref names a registry (``oci://…``) rather than a run or a capsule file."""
    return ref.startswith(SCHEME)


def parse(raw: str) -> Reference:
    """The reference ``raw`` names, with or without ``oci://``.

    Raises:
        UsageError: not REGISTRY/REPOSITORY[:TAG|@DIGEST], or no registry named.
    """
    text = raw.removeprefix(SCHEME)
    hint = (
        "name the registry, the repository and a tag: `ghcr.io/team/runs:baseline`, `localhost:5000/runs:v1`"
    )
    host, slash, rest = text.partition("/")
    if not slash or not _HOST.match(host) or not ("." in host or ":" in host or host == "localhost"):
        raise UsageError(f"{raw!r} names no registry", hint=hint)
    digest = tag = None
    if "@" in rest:
        rest, _, digest = rest.partition("@")
        if not _DIGEST.match(digest):
            raise UsageError(f"{raw!r}: {digest!r} is not a sha256 digest", hint=hint)
    elif ":" in rest.rsplit("/", 1)[-1]:
        rest, _, tag = rest.rpartition(":")
        if not _TAG.match(tag):
            raise UsageError(f"{raw!r}: {tag!r} is not a valid tag", hint=hint)
    if not _REPOSITORY.match(rest):
        raise UsageError(
            f"{raw!r}: {rest!r} is not a valid repository name (lower case, / between parts)", hint=hint
        )
    return Reference(host, rest, tag, digest)
