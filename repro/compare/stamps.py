"""Files whose bytes carry a clock: compared by content, their time fields left out.

A figure saved twice, an archive written twice, differ in bytes only where the writer put the
time (or an identifier drawn at random). These formats are compared with those fields left out,
and a comparison says which of them differed, so a verdict reads
"same content (PDF, creation date ignored)". What is left out, per format:

- PDF: the ``/CreationDate`` and ``/ModDate`` of the document information, the trailer's
  ``/ID``, the XMP packet's dates and document/instance ids (where it is stored uncompressed),
  and the cross-reference offsets that move when a date's length changes;
- PostScript/EPS: the ``%%CreationDate:`` comment;
- PNG: the ``tIME`` chunk and the text chunks (``tEXt``, ``zTXt``, ``iTXt``) whose keyword names
  a time (``Creation Time``, ``date:modify``, ``timestamp``); other text (``Software``, a title)
  is compared. Image data is compared decompressed, however it is split into chunks;
- SVG: the metadata date (``<dc:date>``) and the names of generated ids (Matplotlib draws them
  from a random salt): ids are renamed in order of appearance, references with them;
- gzip: the header's mtime (the name and comment are compared), then the decompressed bytes;
- zip: each member's time and extra fields (where writers keep more times); names, contents
  (decompressed), permissions and comments are compared, the compression method is not;
- tar (plain or compressed): each member's mtime (and a pax header's atime/ctime/mtime); names,
  types, modes, owners, link targets and contents are compared.

An output is opened when its name ends like one of these formats or a zip-based one (`SUFFIXES`);
its first bytes then decide the format (a ``.png`` that holds JPEG bytes is not compared here).
Anything else is no business of this module (`compare` returns None). Standard library only.
"""

from __future__ import annotations

import gzip
import re
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Literal

MAX_TEXT_BYTES = 256 << 20  # PDF, PostScript and SVG files are read whole: larger ones by bytes only
MAX_EXPANDED_BYTES = 8 << 30  # decompressed bytes compared per file (bounds a decompression bomb)
_CHUNK = 1 << 20


# The formats compared here, as they are named in notes and in an output's ``kind``.
StampFormat = Literal["PDF", "PostScript", "PNG", "SVG", "gzip", "zip", "tar", "tar.gz"]


class UnreadableArtifact(ValueError):
    """A file that starts like a known format and then does not parse as one."""


@dataclass
class ContentMatch:
    """Two files of one format compared with their clock fields left out."""

    format: StampFormat
    equal: bool
    ignored: list[str] = field(default_factory=list)  # the left-out fields that did differ
    detail: str = ""  # when not equal: what differs

    @property
    def note(self) -> str:
        """``same content (PDF, creation date ignored)``, or what differs."""
        if not self.equal:
            return (
                f"{self.format} content differs: {self.detail}" if self.detail else f"{self.format} differs"
            )
        shown = _join(self.ignored[:3]) + (
            f" (+{len(self.ignored) - 3} more)" if len(self.ignored) > 3 else ""
        )
        what = f"{shown} ignored" if self.ignored else "other bytes"
        return f"same content ({self.format}, {what})"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --------------------------------------------------------------------------- recognition

_PNG = b"\x89PNG\r\n\x1a\n"


def sniff(head: bytes, suffix: str = "") -> StampFormat | None:
    """The format of a file from its first bytes (at least 512) and its suffix, or None."""
    suffix = suffix.lower()
    if head.startswith(b"%PDF-"):
        return "PDF"
    if head.startswith(_PNG):
        return "PNG"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"%!PS") or (suffix in (".ps", ".eps") and head.lstrip().startswith(b"%!")):
        return "PostScript"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    if suffix == ".svg" or (b"<svg" in head[:4096] and head.lstrip()[:1] == b"<"):
        return "SVG"
    return None


# The names of the files worth opening to sniff (other outputs, a .txt or a .log, are never opened):
# the formats themselves and the common ones built on zip.
SUFFIXES = (
    ".pdf", ".ps", ".eps", ".png", ".svg", ".gz", ".tgz", ".zip", ".tar",
    ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".epub", ".jar", ".whl", ".keras",
)  # fmt: skip


def is_candidate(path: str) -> bool:
    """Whether an output's name says it may be a format compared here (its first bytes decide)."""
    return path.lower().endswith(SUFFIXES)


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4096)


def compare(a: Path, b: Path, suffix: str = "", *, _depth: int = 0) -> ContentMatch | None:
    """``a`` and ``b`` compared by content with their clock fields left out; None when ``a`` is
    not a format this module knows. A ``b`` of another format is a difference.

    Raises:
        UnreadableArtifact: a file that starts like its format and does not parse.
        OSError: a file cannot be read.
    """
    fmt = sniff(_head(a), suffix)
    if fmt is None:
        return None
    if fmt == "gzip" and _gzip_holds_tar(a):
        fmt = "tar.gz"
    other = sniff(_head(b), suffix)
    if other == "gzip" and _gzip_holds_tar(b):
        other = "tar.gz"
    if other != fmt:
        return ContentMatch(fmt, False, detail=f"one file is {fmt}, the other {other or 'not'}")
    try:
        return _COMPARERS[fmt](a, b, _depth)
    except (zlib.error, EOFError, gzip.BadGzipFile, zipfile.BadZipFile, tarfile.TarError) as e:
        raise UnreadableArtifact(f"not a readable {fmt} file: {e}") from e


# --------------------------------------------------------------------------- text formats


def _read_text_format(a: Path, b: Path, fmt: str) -> tuple[bytes, bytes]:
    if max(a.stat().st_size, b.stat().st_size) > MAX_TEXT_BYTES:
        raise UnreadableArtifact(f"{fmt} file over {MAX_TEXT_BYTES >> 20} MiB: compared by bytes only")
    return a.read_bytes(), b.read_bytes()


@dataclass(frozen=True)
class _Rule:
    label: str
    pattern: re.Pattern[bytes]
    replacement: bytes


def _apply(rules: tuple[_Rule, ...], a: bytes, b: bytes) -> tuple[bytes, bytes, list[str]]:
    """Both texts with every rule applied, and the labels of the rules whose matches differed."""
    differed: list[str] = []
    for rule in rules:
        found_a = [m.group(0) for m in rule.pattern.finditer(a)]
        if found_a != [m.group(0) for m in rule.pattern.finditer(b)] and rule.label not in differed:
            differed.append(rule.label)
        a, b = rule.pattern.sub(rule.replacement, a), rule.pattern.sub(rule.replacement, b)
    return a, b, differed


_PDF_STRING = rb"(?:\((?:[^()\\]|\\.)*\)|<[0-9A-Fa-f\s]*>)"
_XMP = rb"(?:xmp:CreateDate|xmp:ModifyDate|xmp:MetadataDate|xmpMM:DocumentID|xmpMM:InstanceID)"
_PDF_RULES = (
    _Rule("creation date", re.compile(rb"/CreationDate\s*" + _PDF_STRING), b"/CreationDate()"),
    _Rule("modification date", re.compile(rb"/ModDate\s*" + _PDF_STRING), b"/ModDate()"),
    _Rule(
        "document ID", re.compile(rb"/ID\s*\[\s*" + _PDF_STRING + rb"\s*" + _PDF_STRING + rb"\s*\]"), b"/ID[]"
    ),
    _Rule("XMP dates and ids", re.compile(rb"<(" + _XMP + rb")>[^<]*</\1>"), rb"<\1></\1>"),
    _Rule("XMP dates and ids", re.compile(rb"(" + _XMP + rb')=(["\'])[^"\']*\2'), rb"\1=\2\2"),
)
# Offsets of the objects: they move when a date of another length moves the objects after it.
_PDF_XREF = re.compile(rb"(\bxref\s).*?(\btrailer\b)", re.S)
_PDF_STARTXREF = re.compile(rb"(\bstartxref\s+)\d+")


def _compare_pdf(a: Path, b: Path, depth: int) -> ContentMatch:
    da, db = _read_text_format(a, b, "PDF")
    da, db, ignored = _apply(_PDF_RULES, da, db)
    if da == db:
        return ContentMatch("PDF", True, ignored)
    da, db = (_PDF_STARTXREF.sub(rb"\1", _PDF_XREF.sub(rb"\1\2", d)) for d in (da, db))
    if da == db:
        return ContentMatch("PDF", True, ignored)
    return ContentMatch("PDF", False, detail="pages or objects differ")


_PS_RULES = (_Rule("creation date", re.compile(rb"^%%CreationDate:[^\r\n]*", re.M), b"%%CreationDate:"),)


def _compare_ps(a: Path, b: Path, depth: int) -> ContentMatch:
    da, db = _read_text_format(a, b, "PostScript")
    da, db, ignored = _apply(_PS_RULES, da, db)
    return ContentMatch("PostScript", da == db, ignored, "" if da == db else "drawing commands differ")


_SVG_RULES = (
    _Rule("date", re.compile(rb"<((?:\w+:)?date)\b[^>]*>[^<]*</\1>"), rb"<\1></\1>"),
    _Rule("date", re.compile(rb"<((?:\w+:)?date)\b[^>]*/>"), rb"<\1/>"),
)
_SVG_ID = re.compile(rb'\bid=(["\'])([^"\']+)\1')


def _canonical_ids(text: bytes) -> bytes:
    """Ids renamed ``_id1``, ``_id2``… in order of appearance, with every ``#id`` reference."""
    names: dict[bytes, bytes] = {}
    for m in _SVG_ID.finditer(text):
        names.setdefault(m.group(2), b"_id%d" % (len(names) + 1))
    if not names:
        return text
    alternatives = b"|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    token = re.compile(rb'(\bid=["\']|#)(' + alternatives + rb')(?=["\')\s;,]|$)')
    return token.sub(lambda m: m.group(1) + names[m.group(2)], text)


def _compare_svg(a: Path, b: Path, depth: int) -> ContentMatch:
    da, db = _read_text_format(a, b, "SVG")
    da, db, ignored = _apply(_SVG_RULES, da, db)
    if da == db:
        return ContentMatch("SVG", True, ignored)
    ca, cb = _canonical_ids(da), _canonical_ids(db)
    if ca == cb:
        return ContentMatch("SVG", True, [*ignored, "generated ids"])
    return ContentMatch("SVG", False, detail="drawing differs")


# --------------------------------------------------------------------------- PNG

_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")
_TIME_KEYWORD = re.compile(r"time|date|created|modified|modify|create", re.I)


def _png_chunks(path: Path) -> Iterator[tuple[bytes, bytes]]:
    with open(path, "rb") as f:
        if f.read(8) != _PNG:
            raise UnreadableArtifact("no PNG signature")
        while True:
            header = f.read(8)
            if not header:
                return
            if len(header) < 8:
                raise UnreadableArtifact("a PNG chunk header is cut short")
            length, kind = int.from_bytes(header[:4], "big"), header[4:]
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                raise UnreadableArtifact(f"the PNG chunk {kind!r} is cut short")
            yield kind, data
            if kind == b"IEND":
                return


def _png_parts(path: Path) -> tuple[list[tuple[bytes, bytes]], bytes, dict[str, list[bytes]]]:
    """(chunks compared, the image data, the chunks left out by label)."""
    kept: list[tuple[bytes, bytes]] = []
    idat: list[bytes] = []
    left: dict[str, list[bytes]] = {}
    for kind, data in _png_chunks(path):
        if kind == b"IDAT":
            if not kept or kept[-1] != (b"IDAT", b""):
                kept.append((b"IDAT", b""))  # where the image data stands; its split is not compared
            idat.append(data)
        elif kind == b"tIME":
            left.setdefault("tIME", []).append(data)
        elif kind in _TEXT_CHUNKS and _TIME_KEYWORD.search(_keyword(data)):
            left.setdefault(f"text {_keyword(data)!r}", []).append(data)
        else:
            kept.append((kind, data))
    return kept, b"".join(idat), left


def _keyword(data: bytes) -> str:
    return data.split(b"\0", 1)[0][:79].decode("latin-1")


def _compare_png(a: Path, b: Path, depth: int) -> ContentMatch:
    chunks_a, image_a, left_a = _png_parts(a)
    chunks_b, image_b, left_b = _png_parts(b)
    if chunks_a != chunks_b:
        kinds_a, kinds_b = [k for k, _ in chunks_a], [k for k, _ in chunks_b]
        which = next((k for (k, x), (_, y) in zip(chunks_a, chunks_b, strict=False) if x != y), b"?")
        detail = "the chunks differ" if kinds_a != kinds_b else f"chunk {which.decode('latin-1')} differs"
        return ContentMatch("PNG", False, detail=detail)
    if image_a != image_b and not _same_stream(_inflate(image_a), _inflate(image_b)):
        return ContentMatch("PNG", False, detail="pixels differ")
    ignored = [label for label in dict.fromkeys([*left_a, *left_b]) if left_a.get(label) != left_b.get(label)]
    return ContentMatch("PNG", True, ignored)


def _inflate(data: bytes) -> Iterator[bytes]:
    z = zlib.decompressobj()
    total = 0
    for i in range(0, len(data), _CHUNK):
        out = z.decompress(data[i : i + _CHUNK], _CHUNK)
        while True:
            total += len(out)
            if total > MAX_EXPANDED_BYTES:
                raise UnreadableArtifact("image data expands past the comparison bound")
            yield out
            if not z.unconsumed_tail:
                break
            out = z.decompress(z.unconsumed_tail, _CHUNK)
    yield z.flush()


# --------------------------------------------------------------------------- streams


def _same_stream(a: Iterator[bytes], b: Iterator[bytes]) -> bool:
    """Whether two byte streams (cut into chunks anywhere) carry the same bytes."""
    a, b = (c for c in a if c), (c for c in b if c)
    buf_a = buf_b = b""
    total = 0
    while True:
        buf_a = buf_a or next(a, b"")
        buf_b = buf_b or next(b, b"")
        if not buf_a or not buf_b:
            return not buf_a and not buf_b
        n = min(len(buf_a), len(buf_b))
        if buf_a[:n] != buf_b[:n]:
            return False
        total += n
        if total > MAX_EXPANDED_BYTES:
            raise UnreadableArtifact("contents expand past the comparison bound")
        buf_a, buf_b = buf_a[n:], buf_b[n:]


def _read_chunks(f: IO[bytes] | gzip.GzipFile) -> Iterator[bytes]:
    while chunk := f.read(_CHUNK):
        yield chunk


# --------------------------------------------------------------------------- gzip


@dataclass(frozen=True)
class _GzipHeader:
    mtime: int
    name: bytes
    comment: bytes


def _gzip_header(path: Path) -> _GzipHeader:
    with open(path, "rb") as f:
        fixed = f.read(10)
        if len(fixed) < 10 or fixed[:2] != b"\x1f\x8b":
            raise UnreadableArtifact("a gzip header is cut short")
        flags, mtime = fixed[3], int.from_bytes(fixed[4:8], "little")
        if flags & 4:  # FEXTRA
            f.read(int.from_bytes(f.read(2), "little"))
        name = _zero_terminated(f) if flags & 8 else b""
        comment = _zero_terminated(f) if flags & 16 else b""
    return _GzipHeader(mtime, name, comment)


def _zero_terminated(f: IO[bytes]) -> bytes:
    out = bytearray()
    while (c := f.read(1)) not in (b"", b"\0"):
        out += c
        if len(out) > 4096:
            break
    return bytes(out)


def _gzip_holds_tar(path: Path) -> bool:
    try:
        with gzip.open(path, "rb") as f:
            head = f.read(512)
    except (OSError, EOFError, zlib.error):
        return False
    return len(head) >= 262 and head[257:262] == b"ustar"


def _compare_gzip(a: Path, b: Path, depth: int) -> ContentMatch:
    ha, hb = _gzip_header(a), _gzip_header(b)
    if (ha.name, ha.comment) != (hb.name, hb.comment):
        return ContentMatch("gzip", False, detail="the header's file name or comment differs")
    with gzip.open(a, "rb") as fa, gzip.open(b, "rb") as fb:
        same = _same_stream(_read_chunks(fa), _read_chunks(fb))
    ignored = ["header mtime"] if ha.mtime != hb.mtime else []
    return ContentMatch("gzip", same, ignored, "" if same else "decompressed bytes differ")


# --------------------------------------------------------------------------- archive members

_NESTED_DEPTH = 3  # an archive in an archive in an archive is still compared by content


def _member_same(name: str, fa: IO[bytes], fb: IO[bytes], depth: int, ignored: list[str]) -> bool:
    """Whether two members of archives carry the same content; a member of a format known here
    (a gzip in a zip) whose bytes differ is compared by content, its left-out fields added to
    ``ignored`` (``header mtime of data.csv.gz``)."""
    if _same_stream(_read_chunks(fa), _read_chunks(fb)):
        return True
    if depth >= _NESTED_DEPTH:
        return False
    fa.seek(0)
    fb.seek(0)
    with tempfile.TemporaryDirectory(prefix="repro-member-") as tmp:
        pa, pb = Path(tmp) / "a", Path(tmp) / "b"
        for src, dest in ((fa, pa), (fb, pb)):
            with open(dest, "wb") as out:
                copied = 0
                for chunk in _read_chunks(src):
                    copied += len(chunk)
                    if copied > MAX_TEXT_BYTES:
                        return False
                    out.write(chunk)
        match = compare(pa, pb, PurePosixPath(name).suffix, _depth=depth + 1)
    if match is None or not match.equal:
        return False
    ignored += [f"{label} of {name}" for label in match.ignored if f"{label} of {name}" not in ignored]
    return True


def _note(ignored: list[str], label: str) -> None:
    if label not in ignored:
        ignored.insert(0, label)


# --------------------------------------------------------------------------- zip


def _compare_zip(a: Path, b: Path, depth: int) -> ContentMatch:
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        ia, ib = za.infolist(), zb.infolist()
        if [i.filename for i in ia] != [i.filename for i in ib]:
            return ContentMatch("zip", False, detail="the member names differ")
        if za.comment != zb.comment:
            return ContentMatch("zip", False, detail="the archive comment differs")
        ignored: list[str] = []
        for x, y in zip(ia, ib, strict=True):
            if (x.external_attr, x.comment) != (y.external_attr, y.comment):
                return ContentMatch(
                    "zip", False, detail=f"member {x.filename}'s permissions or comment differ"
                )
            with za.open(x) as fx, zb.open(y) as fy:
                if not _member_same(x.filename, fx, fy, depth, ignored):
                    return ContentMatch("zip", False, detail=f"member {x.filename} differs")
            if x.extra != y.extra:
                _note(ignored, "member extra fields")
            if x.date_time != y.date_time:
                _note(ignored, "member times")
    return ContentMatch("zip", True, ignored)


# --------------------------------------------------------------------------- tar

_PAX_TIMES = ("mtime", "atime", "ctime", "LIBARCHIVE.creationtime", "size")


def _tar_key(m: tarfile.TarInfo) -> tuple[object, ...]:
    pax = {k: v for k, v in m.pax_headers.items() if k not in _PAX_TIMES}
    return (m.name, m.type, m.mode, m.uid, m.gid, m.uname, m.gname, m.linkname, sorted(pax.items()))


def _compare_tar(a: Path, b: Path, depth: int, fmt: StampFormat = "tar") -> ContentMatch:
    ignored: list[str] = []
    with tarfile.open(a, "r:*") as ta, tarfile.open(b, "r:*") as tb:
        while True:
            x, y = ta.next(), tb.next()
            if x is None or y is None:
                if x is not y:
                    return ContentMatch(fmt, False, detail="the member lists differ")
                break
            if _tar_key(x) != _tar_key(y):
                return ContentMatch(fmt, False, detail=f"member {x.name} differs")
            if x.isfile():
                fx, fy = ta.extractfile(x), tb.extractfile(y)
                assert fx is not None and fy is not None
                if not _member_same(x.name, fx, fy, depth, ignored):
                    return ContentMatch(fmt, False, detail=f"member {x.name} differs")
            if x.mtime != y.mtime:
                _note(ignored, "member times")
    if fmt == "tar.gz" and _gzip_header(a).mtime != _gzip_header(b).mtime:
        _note(ignored, "header mtime")
    return ContentMatch(fmt, True, ignored)


def _compare_tar_gz(a: Path, b: Path, depth: int) -> ContentMatch:
    return _compare_tar(a, b, depth, "tar.gz")


_COMPARERS: dict[StampFormat, Callable[[Path, Path, int], ContentMatch]] = {
    "PDF": _compare_pdf,
    "PostScript": _compare_ps,
    "SVG": _compare_svg,
    "PNG": _compare_png,
    "gzip": _compare_gzip,
    "zip": _compare_zip,
    "tar": _compare_tar,
    "tar.gz": _compare_tar_gz,
}
FORMATS = tuple(_COMPARERS)  # the formats this module compares, as they are named in notes
