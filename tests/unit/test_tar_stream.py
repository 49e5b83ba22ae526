"""The capsule's tar stream: byte for byte what `tarfile` writes for the same members."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from repro.store import tarwriter

NAMES = [
    "capsule.yaml",
    "blobs/" + "ab" * 16,
    "x" * 100,  # the longest name a plain ustar header holds
    "y" * 101,  # longer: a PAX header first
    "données/é.txt",  # not ASCII: a PAX header first
    "a/b c/d\\e",
]


@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 8**11 - 1, 8**11])
@pytest.mark.parametrize("name", NAMES)
def test_each_header_is_the_one_tarfile_writes(name: str, size: int) -> None:
    expected = tarwriter._tarinfo(name, size).tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    assert tarwriter._header(name, size) == expected


def test_a_stream_of_files_and_bytes_is_the_archive_tarfile_writes(tmp_path: Path) -> None:
    members: list[tuple[str, bytes]] = [
        (n, (n * (i * 97 + 1)).encode()[: i * 700]) for i, n in enumerate(NAMES)
    ]
    members.append(("big.bin", bytes(range(256)) * 9000))  # over one gathered block
    files = {}
    for i, (name, data) in enumerate(members):
        files[name] = tmp_path / f"f{i}"
        files[name].write_bytes(data)
    reference = io.BytesIO()
    with tarfile.open(fileobj=reference, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            tar.addfile(tarwriter._tarinfo(name, len(data)), io.BytesIO(data))
    written = io.BytesIO()
    stream = tarwriter._TarStream(written)
    for i, (name, data) in enumerate(members):
        if i % 2:
            stream.add_bytes(name, data)
        else:
            sha, xxh = stream.add_file(name, files[name], blob=i == 0)
            assert (xxh is not None) == (i == 0) and len(sha) == 64
    stream.close()
    assert written.getvalue() == reference.getvalue()


def test_a_file_that_shrinks_while_it_is_copied_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, n)[:0])
    with pytest.raises(OSError, match="shrank"):
        tarwriter._TarStream(io.BytesIO()).add_file("f", path, blob=False)
