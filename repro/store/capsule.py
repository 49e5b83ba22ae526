"""The capsule format's names: its format string and the names of its members.

A capsule on disk is a directory holding ``capsule.yaml`` and a ``blobs/`` tree of
content-addressed files (xxh3-128 hex names, ``blobs/ab/abcdef…``). Exported, it is a
single tar of the same members plus ``SHA256SUMS``, written deterministically
(`repro.store.tarwriter`) and read back as untrusted input (`repro.store.verify`). The record it
holds is `repro.store.record`; its (de)serialisation `repro.store.recordio`.
"""

from __future__ import annotations

FORMAT = "repro.capsule/v1"
READABLE_FORMATS = (FORMAT,)
RECORD_NAME = "capsule.yaml"
SUMS_NAME = "SHA256SUMS"
# `repro export --sign`: a MAC over the exact bytes of SHA256SUMS (repro/store/signing.py). The one member
# SHA256SUMS does not list; it comes after it, so adding it changes no other member.
SIGNATURE_NAME = "SIGNATURE"
# `repro export --attest`: the run's in-toto attestation (repro/store/attestation.py), which names the
# SHA-256 of SHA256SUMS; so, like SIGNATURE, it is not listed there and comes after it.
ATTESTATION_NAME = "ATTESTATION.intoto.jsonl"
# `repro export --attest --format oms`: an OpenSSF Model Signing bundle of the run's model files
# (repro/store/oms.py); it names no capsule member, and stands beside SIGNATURE all the same.
MODEL_SIGNATURE_NAME = "MODEL_SIGNATURE.sig"
# the members SHA256SUMS does not list
UNSUMMED = (SUMS_NAME, SIGNATURE_NAME, ATTESTATION_NAME, MODEL_SIGNATURE_NAME)
BLOB_DIR = "blobs"
# `repro export --with-image`: the environment image as `docker save` wrote it (every layer
# once). Checksummed like every member; never extracted, streamed to the engine from the tar.
IMAGE_MEMBER = "image/docker-image.tar"
PYLOCK_MEMBER = "pylock.toml"  # the run's lock as PEP 751 pylock.toml, a copy of its blob


def blob_member(digest: str) -> str:
    """The member path of a blob inside a capsule (and inside the store)."""
    return f"{BLOB_DIR}/{digest[:2]}/{digest}"
