"""Runs shared through an OCI registry (`repro push`, `repro pull`, ``oci://`` refs).

A run travels as an OCI 1.1 artifact: an image manifest whose ``artifactType`` names a repro run,
its config the empty descriptor, and one content-addressed layer per capsule member (the record,
each blob, the lock), titled with the member's name. `reference` parses what the user names,
`auth` finds the host's login for it, `client` speaks the distribution API over HTTPS (the one
place its errors become repro errors), `artifact` builds and checks the manifest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from repro.store.runs import LoadedRun, Store


def open_remote(store: Store, ref: str) -> LoadedRun:
    """The run an ``oci://`` ref names, pulled and verified (`artifact.open_remote`), plain HTTP
    allowed to the registries the project's repro.yaml names insecure; the HTTP client is imported
    only when a registry is named, so every other command starts without it.

    Raises:
        ConfigError: a bad repro.yaml. And as `artifact.open_remote`.
    """
    return open_pulled(store, ref)[0]


def open_pulled(store: Store, ref: str) -> tuple[LoadedRun, str]:
    """`open_remote`'s run and the digest of the manifest it came from (`repro pull`).

    Raises:
        ConfigError: a bad repro.yaml. And as `artifact.open_pulled`.
    """
    from repro import config
    from repro.share import artifact

    return artifact.open_pulled(store, ref, config.load(store.root).insecure_registries)
