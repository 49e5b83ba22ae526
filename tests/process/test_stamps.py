"""Files whose bytes carry a clock, written twice by real writers in separate processes, compare
by content with their time fields left out; a real change of content is still a divergence."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from repro.compare import stamps
from repro.compare.verdict import compare_runs
from repro.ui.verdict import render_text
from tests.builders import side

pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'repro-capsule[plot]')")

# A figure script in the shape of a training repository's plotting code: loss curve, saved in three
# formats, a report PDF stamped with today's date, an image with a creation-time text chunk.
FIGURES = textwrap.dedent(
    """
    import sys
    from datetime import datetime

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    losses = [0.9, 0.71, 0.52, 0.44, 0.40]
    loss = float(sys.argv[1]) if len(sys.argv) > 1 else losses[-1]
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(range(1, 6), losses[:-1] + [loss], marker="o", label="train")
    ax.set_xlabel("epoch"); ax.set_ylabel("loss"); ax.legend()
    for ext in ("pdf", "png", "svg", "eps"):
        fig.savefig(f"loss.{ext}")
    fig.savefig("report.pdf", metadata={"CreationDate": datetime.now(), "Title": "run report"})
    fig.savefig("stamped.png", metadata={"Creation Time": datetime.now().isoformat(), "Title": "loss"})
    """
)

# Archives as training code writes them: a gzip'd predictions file, a zip bundle, a tar.gz of the run.
ARCHIVES = textwrap.dedent(
    """
    import gzip, sys, tarfile, zipfile
    rows = sys.argv[1] if len(sys.argv) > 1 else "1,0.25"
    with gzip.open("predictions.csv.gz", "wt") as f:
        f.write("id,score\\n" + rows + "\\n")
    with zipfile.ZipFile("bundle.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", '{"lr": 0.05}')
        z.write("predictions.csv.gz")
    with tarfile.open("run.tar.gz", "w:gz") as t:
        t.add("bundle.zip")
    """
)


def _write(where: Path, script: str, *args: str, epoch: str | None = None) -> Path:
    """Run ``script`` in ``where`` in a separate interpreter (without SOURCE_DATE_EPOCH unless given)."""
    where.mkdir(parents=True)
    time.sleep(1.0 - time.time() % 1.0)  # a new second: clock fields (1 s resolution) differ between writes
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = epoch
    subprocess.run([sys.executable, "-c", script, *args], cwd=where, env=env, check=True, timeout=300)
    return where


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("figures")
    first = _write(base / "a", FIGURES)
    subprocess.run(["sleep", "1.1"], check=True)  # another second in every date
    return first, _write(base / "b", FIGURES)


def test_figures_saved_twice_differ_in_bytes_and_compare_same_by_content(figures: tuple[Path, Path]) -> None:
    a, b = figures
    for name in ("loss.pdf", "loss.svg", "loss.eps", "report.pdf", "stamped.png"):
        assert (a / name).read_bytes() != (b / name).read_bytes(), name  # the premise: the clock is in them
    expected = {
        "loss.pdf": "same content (PDF, creation date ignored)",
        "report.pdf": "same content (PDF, creation date ignored)",
        "loss.svg": "same content (SVG, date and generated ids ignored)",
        "loss.eps": "same content (PostScript, creation date ignored)",
        "stamped.png": "same content (PNG, text 'Creation Time' ignored)",
    }
    for name, note in expected.items():
        match = stamps.compare(a / name, b / name, Path(name).suffix)
        assert match is not None and match.equal and match.note == note, (name, match)


def test_a_replayed_figure_with_other_dates_is_identical_and_the_verdict_names_the_format(
    figures: tuple[Path, Path],
) -> None:
    a, b = figures
    v = compare_runs(side(a, "run", nested=False), side(b, "replay", nested=False), "strict")
    assert v.status == "identical", v.reasons
    by_name = {o.path: o for o in v.outputs}
    assert by_name["loss.pdf"].kind == "PDF" and by_name["loss.pdf"].status == "same"
    assert by_name["loss.png"].original_hash == by_name["loss.png"].replay_hash  # Agg writes no clock
    assert v.summary.startswith("identical: 6 outputs identical (5 equal by content: ")
    assert "PDF" in v.summary and "SVG" in v.summary and "PNG" in v.summary
    text = render_text(v, colour=False)
    assert "= report.pdf" in text and "same content (PDF, creation date ignored)" in text


def test_source_date_epoch_makes_matplotlib_pdfs_identical_in_bytes(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", FIGURES, epoch="1764000000")
    b = _write(tmp_path / "b", FIGURES, epoch="1764000000")
    assert (a / "loss.pdf").read_bytes() == (b / "loss.pdf").read_bytes()
    assert (a / "loss.eps").read_bytes() == (b / "loss.eps").read_bytes()
    assert (a / "report.pdf").read_bytes() != (b / "report.pdf").read_bytes()  # a date the script chose


def test_a_figure_with_other_data_still_diverges(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", FIGURES, "0.40")
    b = _write(tmp_path / "b", FIGURES, "0.41")
    for name, fmt in (
        ("loss.pdf", "PDF"),
        ("loss.svg", "SVG"),
        ("loss.png", "PNG"),
        ("loss.eps", "PostScript"),
    ):
        match = stamps.compare(a / name, b / name, Path(name).suffix)
        assert match is not None and not match.equal, name
        assert match.note.startswith(f"{fmt} content differs"), match.note
    v = compare_runs(side(a, "run", nested=False), side(b, "replay", nested=False), "strict")
    assert v.status == "diverged"
    (o,) = [o for o in v.outputs if o.path == "loss.pdf"]
    assert o.status == "changed" and o.note == "PDF content differs: pages or objects differ"


def test_archives_written_at_other_times_compare_same_and_their_contents_still_count(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", ARCHIVES)
    os.utime(a / "predictions.csv.gz", (0, 0))  # zip and tar take the member times from the file
    subprocess.run(["sleep", "2.1"], check=True)  # zip keeps times in 2-second steps
    b = _write(tmp_path / "b", ARCHIVES)
    for name in ("predictions.csv.gz", "bundle.zip", "run.tar.gz"):
        assert (a / name).read_bytes() != (b / name).read_bytes(), name
    notes = {
        name: stamps.compare(a / name, b / name)
        for name in ("predictions.csv.gz", "bundle.zip", "run.tar.gz")
    }
    assert notes["predictions.csv.gz"] == stamps.ContentMatch("gzip", True, ["header mtime"])
    zipped = notes["bundle.zip"]
    assert zipped is not None and zipped.equal and zipped.format == "zip"
    assert zipped.ignored == ["member times", "header mtime of predictions.csv.gz"]
    tarred = notes["run.tar.gz"]
    assert tarred is not None and tarred.equal and tarred.format == "tar.gz"
    assert tarred.ignored[:2] == ["header mtime", "member times"]
    assert (
        tarred.note.startswith("same content (tar.gz, header mtime, member times and ")
        and "more" in tarred.note
    )

    c = _write(tmp_path / "c", ARCHIVES, "1,0.26")
    for name in ("predictions.csv.gz", "bundle.zip", "run.tar.gz"):
        match = stamps.compare(a / name, c / name)
        assert match is not None and not match.equal, name
    assert stamps.compare(a / "bundle.zip", c / "bundle.zip") == stamps.ContentMatch(
        "zip", False, [], "member predictions.csv.gz differs"
    )


def test_pdf_ids_and_dates_of_other_lengths_are_left_out_with_their_offsets(tmp_path: Path) -> None:
    def pdf(date: str, ident: str, page: str = "BT /F1 12 Tf (loss 0.40) Tj ET") -> bytes:
        objects = [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(page), page.encode()),
            b"<< /Producer (writer) /CreationDate (%s) /ModDate (%s) >>" % (date.encode(), date.encode()),
        ]
        out, offsets = bytearray(b"%PDF-1.4\n"), []
        for i, body in enumerate(objects, 1):
            offsets.append(len(out))
            out += b"%d 0 obj\n%s\nendobj\n" % (i, body)
        xref = len(out)
        out += b"xref\n0 6\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets)
        out += b"trailer\n<< /Size 6 /Root 1 0 R /Info 5 0 R /ID [<%s> <%s>] >>\n" % (
            ident.encode(),
            ident.encode(),
        )
        out += b"startxref\n%d\n%%%%EOF\n" % xref
        return bytes(out)

    (tmp_path / "a.pdf").write_bytes(pdf("D:20261125101500Z", "0123456789abcdef"))
    (tmp_path / "b.pdf").write_bytes(pdf("D:20261125111500+01'00'", "fedcba9876543210"))
    (tmp_path / "c.pdf").write_bytes(
        pdf("D:20261125101500Z", "0123456789abcdef", "BT /F1 12 Tf (loss 0.41) Tj ET")
    )
    match = stamps.compare(tmp_path / "a.pdf", tmp_path / "b.pdf")
    assert (
        match is not None
        and match.note == "same content (PDF, creation date, modification date and document ID ignored)"
    )
    changed = stamps.compare(tmp_path / "a.pdf", tmp_path / "c.pdf")
    assert changed is not None and not changed.equal


def test_png_time_chunk_and_text_chunks(tmp_path: Path) -> None:
    from PIL import Image, PngImagePlugin

    def save(name: str, when: bytes, software: str, pixel: int = 0) -> Path:
        info = PngImagePlugin.PngInfo()
        info.add(b"tIME", when)
        info.add_text("date:modify", when.hex())
        info.add_text("Software", software)
        Image.new("L", (8, 8), pixel).save(tmp_path / name, pnginfo=info)
        return tmp_path / name

    a = save("a.png", b"\x07\xea\x0b\x19\x0a\x0f\x00", "trainer 1.0")
    b = save("b.png", b"\x07\xea\x0b\x19\x0a\x10\x07", "trainer 1.0")
    match = stamps.compare(a, b)
    assert match is not None and match.note == "same content (PNG, tIME and text 'date:modify' ignored)"
    other_software = stamps.compare(a, save("c.png", b"\x07\xea\x0b\x19\x0a\x0f\x00", "trainer 1.1"))
    assert other_software is not None and not other_software.equal  # only clock fields are left out
    other_pixels = stamps.compare(a, save("d.png", b"\x07\xea\x0b\x19\x0a\x0f\x00", "trainer 1.0", 255))
    assert other_pixels == stamps.ContentMatch("PNG", False, [], "pixels differ")


def test_unknown_formats_damaged_files_and_formats_that_do_not_match(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"\x00" * 600)
    assert stamps.compare(tmp_path / "a.bin", tmp_path / "a.bin") is None
    (tmp_path / "cut.gz").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03broken")
    (tmp_path / "also.gz").write_bytes(b"\x1f\x8b\x08\x00\x01\x00\x00\x00\x00\x03broken")
    with pytest.raises(stamps.UnreadableArtifact):
        stamps.compare(tmp_path / "cut.gz", tmp_path / "also.gz")
    (tmp_path / "x.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (tmp_path / "y.pdf").write_bytes(b"\x89PNG\r\n\x1a\n")
    match = stamps.compare(tmp_path / "x.pdf", tmp_path / "y.pdf")
    assert match == stamps.ContentMatch("PDF", False, [], "one file is PDF, the other PNG")


def test_a_damaged_output_is_changed_with_a_note_never_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "preds.gz").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03broken")
    (b / "preds.gz").write_bytes(b"\x1f\x8b\x08\x00\x01\x00\x00\x00\x00\x03broken")
    v = compare_runs(side(a, "run", nested=False), side(b, "replay", nested=False), "strict")
    (o,) = v.outputs
    assert v.status == "diverged" and o.status == "changed" and (o.note or "").startswith("unreadable: ")


# --------------------------------------------------------------------------- the run's clock


def test_the_clock_is_the_runs_start_or_the_users_value_and_a_hostile_one_is_never_set() -> None:
    from repro.facts.determinism import clock_env, run_environment, source_date_epoch
    from repro.store.record import Record

    assert source_date_epoch("2026-11-25T10:15:00+00:00", {}) == 1795601700
    assert source_date_epoch("2026-11-25T10:15:00+00:00", {"SOURCE_DATE_EPOCH": "1700000000"}) == 1700000000
    for bad in ("soon", "-5", "1e9", "99999999999999"):
        assert source_date_epoch("2026-11-25T10:15:00+00:00", {"SOURCE_DATE_EPOCH": bad}) == 1795601700
    assert clock_env(1795601700) == {"SOURCE_DATE_EPOCH": "1795601700"}
    for hostile in (None, -1, 10**20, True):
        assert clock_env(hostile) == {}

    record = Record(id="r", created="2026-11-25T10:15:00+00:00")
    assert "SOURCE_DATE_EPOCH" not in run_environment(record)  # a record from before the clock was kept
    record.determinism.source_date_epoch = 1795601700
    assert run_environment(record)["SOURCE_DATE_EPOCH"] == "1795601700"
