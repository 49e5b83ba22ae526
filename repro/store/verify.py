"""Reading a capsule tar as untrusted input: every member checked against ``SHA256SUMS`` and every
blob against its content-address name, within the bounds of `repro.store.limits`; members read in
place (a list blob, the image archive, the seal) without trusting anything unchecked.
"""

from __future__ import annotations

import contextlib
import hashlib
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from zlib import error as zlib_error

from repro.errors import CapsuleInvalid, NotFoundError
from repro.store import limits as rules
from repro.store.capsule import (
    ATTESTATION_NAME,
    BLOB_DIR,
    FORMAT,
    IMAGE_MEMBER,
    MODEL_SIGNATURE_NAME,
    RECORD_NAME,
    SIGNATURE_NAME,
    SUMS_NAME,
    UNSUMMED,
    blob_member,
)
from repro.store.record import Record
from repro.store.recordio import hydrate, load_record


def _safe_member_name(name: str) -> str:
    """A member name, refused unless in canonical form (`limits.member_name_problem`): a name an
    extractor would clean into another (``./capsule.yaml``, ``blobs//x``) is not cleaned here.

    Raises:
        CapsuleInvalid: absolute paths, `.` or `..` segments, empty names or segments.
    """
    problem = rules.member_name_problem(name)
    if problem is not None:
        raise CapsuleInvalid(
            f"member path escapes the capsule or is not in canonical form: {name[:200]!r} {problem}",
            member=name[:200],
        )
    return name


@dataclass
class Verified:
    """What `verify_tar` found: the parsed record and the member names checked."""

    record: Record
    members: list[str]
    image_size: int | None = None  # bytes of the carried image archive, when there is one
    sums: bytes = b""  # the SHA256SUMS bytes every member was checked against
    signature: bytes | None = None  # the SIGNATURE member, when the capsule is signed
    attestation: bytes | None = None  # the ATTESTATION member, when the capsule carries one
    model_signature: bytes | None = None  # the MODEL_SIGNATURE member (an OMS bundle), when carried


def verify_tar(path: Path, extract_to: Path | None = None) -> Verified:
    """Check every member of a capsule tar against SHA256SUMS and every blob against its
    content-address name; optionally extract it.

    Only regular files with safe names are accepted; nothing is written outside
    ``extract_to``; reading stops at the bounds of `capsule_rules` (members, bytes).

    Raises:
        NotFoundError: no file at ``path``.
        CapsuleInvalid: unreadable/truncated tar, unsafe member, checksum mismatch, a blob
            whose bytes do not match its name, missing or unexpected member, unknown format,
            a record field that escapes its root, a capsule over the bounds.
    """
    if not path.is_file():
        what = "a directory, not a capsule file" if path.is_dir() else "no capsule file"
        raise NotFoundError(f"{what} at {path}", hint="check the path; export one with `repro export`")
    tar = _open_tar(path)
    budget = rules.TarBudget(path.stat().st_size, packed=is_compressed(path))
    contents: dict[str, bytes] = {}
    digests: dict[str, str] = {}
    misnamed: list[str] = []
    image_size: int | None = None
    try:
        with tar:
            for info in tar:
                name = _safe_member_name(info.name)
                if not info.isreg():
                    raise CapsuleInvalid(
                        f"member {name!r} is a {'link' if info.issym() or info.islnk() else 'special file'}, "
                        "not a regular file",
                        member=name,
                    )
                if name in digests:
                    raise CapsuleInvalid(f"member {name!r} appears twice", member=name)
                budget.take(name, info.size)
                if name == IMAGE_MEMBER:
                    image_size = info.size
                into = extract_to if name != IMAGE_MEMBER else None  # gigabytes: read in place later
                digests[name] = _read_member(tar, info, name, into, contents, misnamed)
    except (tarfile.TarError, OSError, EOFError, zlib_error) as e:
        raise CapsuleInvalid(f"{path.name} is truncated or damaged: {_first_line(e)}") from e
    _check_sums(path, contents, digests)
    if misnamed:  # the checksums agree, so the bytes were replaced and the sums recomputed
        raise CapsuleInvalid(
            f"blob {misnamed[0].rsplit('/', 1)[-1]} does not match its content-address name "
            "(its bytes were replaced)",
            member=misnamed[0],
        )
    record = load_record(contents[RECORD_NAME])
    if record.lists:  # every member was checked above: a list blob read now is the one summed
        if extract_to is not None:
            hydrate(record, lambda digest: read_list_file(extract_to / blob_member(digest), digest))
        else:
            hydrate(record, lambda digest: _read_list_member(path, digest))
    for digest in record.blobs():
        if not rules.is_digest(digest):  # else its bytes would escape the name check above
            raise CapsuleInvalid(f"the record names a blob {digest!r} that is not a content digest")
        if blob_member(digest) not in digests:
            raise CapsuleInvalid(f"blob {digest} named by the record is missing", member=blob_member(digest))
    if extract_to is not None:
        (extract_to / RECORD_NAME).write_bytes(contents[RECORD_NAME])
    return Verified(
        record=record,
        members=sorted(digests),
        image_size=image_size,
        sums=contents[SUMS_NAME],
        signature=contents.get(SIGNATURE_NAME),
        attestation=contents.get(ATTESTATION_NAME),
        model_signature=contents.get(MODEL_SIGNATURE_NAME),
    )


def read_list_file(path: Path, digest: str) -> bytes | None:
    """A list blob's bytes from a file (in a store, or an extracted capsule), refused over the bound
    before it is read and checked against its name; None when there is no such file.

    Raises:
        CapsuleInvalid: over `limits.MAX_LIST_BYTES`, or bytes that do not match the name.
    """
    import xxhash

    try:
        if path.stat().st_size > rules.MAX_LIST_BYTES:
            raise CapsuleInvalid(
                f"the list blob {digest} is larger than {rules.MAX_LIST_BYTES >> 20} MiB", member=str(path)
            )
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    if xxhash.xxh3_128_hexdigest(data) != digest:
        raise CapsuleInvalid(
            f"blob {digest} does not match its content-address name (replaced or corrupt): {path}",
            member=str(path),
            hint="the store was changed by hand or damaged; re-import the run's capsule",
        )
    return data


def _read_list_member(path: Path, digest: str) -> bytes | None:
    """A list blob's bytes read in place from a capsule tar (verified without extracting).

    Raises:
        CapsuleInvalid: over `limits.MAX_LIST_BYTES`, bytes that do not match the name, unreadable.
    """
    import xxhash

    name = blob_member(digest)
    try:
        with open_member(path, name) as f:
            data = f.read(rules.MAX_LIST_BYTES + 1)
    except CapsuleInvalid:
        return None
    if len(data) > rules.MAX_LIST_BYTES:
        raise CapsuleInvalid(
            f"the list blob {digest} is larger than {rules.MAX_LIST_BYTES >> 20} MiB", member=name
        )
    if xxhash.xxh3_128_hexdigest(data) != digest:
        raise CapsuleInvalid(f"blob {digest} does not match its content-address name", member=name)
    return data


def is_capsule_file(path: Path) -> bool:
    """Whether ``path`` is a capsule tar (`repro export` writes the record first, its format first).

    Reads one tar header and the record's first bytes; never raises.
    """
    try:
        with tarfile.open(path, "r:") as tar:
            first = tar.next()
            if first is None or first.name != RECORD_NAME or not first.isreg():
                return False
            member = tar.extractfile(first)
            family = FORMAT.split("/")[0]  # any version: an older or newer capsule is repro's file too
            return member is not None and member.read(64).startswith(f"format: {family}/".encode())
    except (tarfile.TarError, OSError, EOFError, zlib_error):
        return False


_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")  # gzip, bzip2, xz, zstd


def is_compressed(path: Path) -> bool:
    """Whether the file at ``path`` starts as a compressed stream does (its size hides its expansion)."""
    try:
        with open(path, "rb") as f:
            return f.read(6).startswith(_COMPRESSED)
    except OSError:
        return False


def _open_tar(path: Path) -> tarfile.TarFile:
    """Open a capsule tar (plain or compressed).

    Raises:
        CapsuleInvalid: it is not a tar archive, or cannot be read.
    """
    try:
        return tarfile.open(path, "r:*")
    except tarfile.ReadError as e:
        raise CapsuleInvalid(
            f"{path.name} is not a capsule: not a tar archive",
            hint="a capsule is the .tar that `repro export` writes",
        ) from e
    except (tarfile.TarError, OSError, EOFError) as e:
        raise CapsuleInvalid(f"{path.name} is not a readable capsule tar: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _read_member(
    tar: tarfile.TarFile,
    info: tarfile.TarInfo,
    name: str,
    extract_to: Path | None,
    keep: dict[str, bytes],
    misnamed: list[str],
) -> str:
    """Stream one member: its SHA-256, its xxh3-128 when it is a blob (checked against its
    name), the bytes of the record and sums, the file under ``extract_to``."""
    import xxhash

    f = tar.extractfile(info)
    if f is None:
        raise CapsuleInvalid(f"member {name!r} cannot be read", member=name)
    h = hashlib.sha256()
    blob = blob_digest(name)
    x = xxhash.xxh3_128() if blob is not None else None
    wanted = name in (RECORD_NAME, *UNSUMMED)
    buf = bytearray()
    out = None
    if extract_to is not None and not wanted:
        target = extract_to / name
        target.parent.mkdir(parents=True, exist_ok=True)
        out = open(target, "wb")
    try:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            if x is not None:
                x.update(chunk)
            if wanted:
                buf += chunk
            if out is not None:
                out.write(chunk)
    finally:
        if out is not None:
            out.close()
    if x is not None and x.hexdigest() != blob:
        misnamed.append(name)
    if wanted:
        keep[name] = bytes(buf)
    return h.hexdigest()


def blob_digest(name: str) -> str | None:
    """The digest a `blobs/xx/<digest>` member claims; None for other members (which the
    record cannot name, so they are never used)."""
    parts = name.split("/")
    if len(parts) != 3 or parts[0] != BLOB_DIR or not rules.is_digest(parts[2]) or parts[1] != parts[2][:2]:
        return None
    return parts[2]


def _check_sums(path: Path, contents: dict[str, bytes], digests: dict[str, str]) -> None:
    if SUMS_NAME not in contents:
        raise CapsuleInvalid(f"{path.name} has no {SUMS_NAME}", member=SUMS_NAME)
    expected: dict[str, str] = {}
    for line in contents[SUMS_NAME].decode(errors="replace").splitlines():
        if not line.strip():
            continue
        digest, _, name = line.partition("  ")
        expected[_safe_member_name(name)] = digest
    for name, digest in expected.items():
        if name not in digests:
            raise CapsuleInvalid(f"member {name} is missing (truncated capsule?)", member=name)
        if digests[name] != digest:
            raise CapsuleInvalid(
                f"member {name} does not match its checksum (corrupt or tampered)", member=name
            )
    extra = set(digests) - set(expected) - set(UNSUMMED)
    if extra:
        name = sorted(extra)[0]
        raise CapsuleInvalid(f"member {name} is not in {SUMS_NAME} (tampered)", member=name)
    if RECORD_NAME not in contents:
        raise CapsuleInvalid(f"{path.name} has no {RECORD_NAME}", member=RECORD_NAME)


def read_seal(path: Path) -> tuple[bytes, bytes | None]:
    """The SHA256SUMS and SIGNATURE (None when unsigned) of a capsule tar, read in place: other
    members are skipped, nothing is extracted or checked against the sums.

    Raises:
        CapsuleInvalid: no such file, an unreadable tar, no SHA256SUMS, a member over its bound.
    """
    if not path.is_file():
        raise CapsuleInvalid(
            f"no capsule file at {path}", hint="check the path; export one with `repro export`"
        )
    found: dict[str, bytes] = {}
    budget = rules.TarBudget(path.stat().st_size, packed=is_compressed(path))
    try:
        with _open_tar(path) as tar:
            for info in tar:
                name = _safe_member_name(info.name)
                if name not in (SUMS_NAME, SIGNATURE_NAME):
                    budget.take(name, 0)  # skipped, not read: counted against the member bound only
                    continue
                if name in found or not info.isreg():
                    raise CapsuleInvalid(f"member {name} appears twice or is not a regular file", member=name)
                budget.take(name, info.size)
                f = tar.extractfile(info)
                found[name] = f.read() if f is not None else b""
    except (tarfile.TarError, OSError, EOFError, zlib_error) as e:
        raise CapsuleInvalid(f"{path.name} is not a readable capsule tar: {_first_line(e)}") from e
    if SUMS_NAME not in found:
        raise CapsuleInvalid(f"{path.name} has no {SUMS_NAME}", member=SUMS_NAME)
    return found[SUMS_NAME], found.get(SIGNATURE_NAME)


@contextlib.contextmanager
def open_member(path: Path, name: str) -> Iterator[IO[bytes]]:
    """Read one member of a capsule tar in place (for the image archive: gigabytes, not copied).

    Raises:
        CapsuleInvalid: the member is missing or the tar unreadable.
    """
    tar = _open_tar(path)
    try:
        member = tar.extractfile(name)
    except KeyError:
        tar.close()
        member = None
    except (tarfile.TarError, OSError) as e:
        tar.close()
        raise CapsuleInvalid(f"{path.name} is not a readable capsule tar: {_first_line(e)}") from e
    if member is None:
        raise CapsuleInvalid(f"{path.name} has no member {name}", member=name)
    with tar, member:
        yield member
