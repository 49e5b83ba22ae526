"""Every text from a capsule is escaped for where it is written: a Markdown report (a CI comment, a
docs page) renders no tag, image or link a capsule wrote; a terminal gets no control sequence a
capsule wrote, colours included; JUnit XML and SVG stay well-formed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from repro.check import CheckResult
from repro.compare.verdict import Verdict, compare_runs
from repro.diff import diff_records
from repro.store.record import FileEntry
from repro.ui import check as check_render
from repro.ui import diff as diff_render
from repro.ui import escape
from repro.ui import verdict as verdict_render
from repro.ui.records import show_text
from tests.builders import Blobs, make_record, same_as, side

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
LINK = "[click me](javascript:alert(3))"
AUTOLINK = "<javascript:alert(4)>"
IMG_LINK = "![x](https://evil.example/t.png)"
SGR = "\x1b[31mRED\x1b[0m"
OSC = "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07"
HOSTILE = f"{SCRIPT} {IMG} {LINK} {AUTOLINK} {IMG_LINK} {SGR} {OSC}"


class _Tags(HTMLParser):
    """The tags and links of rendered HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def _live(md: str) -> list[str]:
    """What of a Markdown document would be live once rendered: tags other than layout, links and
    images whose target a capsule chose, and raw angle brackets when no renderer is installed."""
    markdown = pytest.importorskip("markdown")
    html = markdown.markdown(md, extensions=["tables", "fenced_code"])
    parser = _Tags()
    parser.feed(html)
    layout = {"p", "h3", "h4", "h2", "table", "thead", "tbody", "tr", "th", "td", "ul", "ol", "li", "code",
              "pre", "em", "strong", "blockquote", "details", "summary", "br", "hr"}  # fmt: skip
    live = [t for t, _ in parser.tags if t not in layout]
    live += [f"{t} {a}" for t, attrs in parser.tags for a in attrs if a[0] in ("href", "src", "onerror")]
    return live


def _outside_code(md: str) -> str:
    """The Markdown without its code spans and fenced blocks (where markup is shown, not run)."""
    md = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", md)
    return re.sub(r"`[^`\n]*`", "", md)


def _assert_inert_markdown(md: str) -> None:
    assert _live(md) == []
    prose = _outside_code(md)
    for raw in ("<script", "<img", "](javascript:", "<javascript:", "![x](http"):
        assert raw not in prose, raw
    assert "\x1b" not in md and "\x07" not in md


def _metrics() -> list[dict[str, Any]]:
    return [{"name": f"loss {HOSTILE}", "value": 1.0, "step": 1}]


@pytest.fixture
def verdict(tmp_path: Path) -> Verdict:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    name = "report <img src=x onerror=alert(2)> [x](javascript:alert(3)).txt"
    (a / name).write_text("accuracy 0.91\n")
    (b / name).write_text("accuracy 0.87\n")
    v = compare_runs(
        side(a, f"run-{SCRIPT}", _metrics(), f"epoch 1 {HOSTILE}\n"),
        side(b, f"run-{SGR}", _metrics(), f"epoch 1 {IMG} ```\n"),
        "gpu",
    )
    v.notes.append(f"note from the capsule: {HOSTILE}")
    return v


def test_verdict_markdown_renders_no_tag_link_or_control(verdict: Verdict) -> None:
    md = verdict_render.render_markdown(verdict)
    _assert_inert_markdown(md)
    assert "report" in md and "alert(2)" in md  # shown, as text


def test_check_markdown_and_junit_are_inert(verdict: Verdict, tmp_path: Path) -> None:
    result = CheckResult(kind="against", mode="gpu", capsule=f"golden{SCRIPT}.tar", verdicts=[verdict])
    _assert_inert_markdown(check_render.render_markdown(result))
    junit = check_render.render_junit(result)
    root = ET.fromstring(junit.split("\n", 1)[1])  # well-formed: no raw control character
    text = ET.tostring(root, encoding="unicode")
    assert "\x1b" not in junit and "<script" not in text.replace("&lt;script", "")


def test_diff_markdown_causes_tables_and_notes_are_inert() -> None:
    blobs = Blobs()
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.command.argv = ["python", "train.py", "--note", HOSTILE]
    b.command.params = {f"note{IMG}": HOSTILE}
    b.env.variables = {"TORCH_NOTE": HOSTILE}
    b.results.outputs = [FileEntry(path=f"outputs/{LINK}.pt", size=1000, hash="m2")]
    b.code.branch = f"main{SCRIPT}"
    md = diff_render.render_markdown(diff_records(a, b, blobs), show_all=True)
    _assert_inert_markdown(md)
    assert "alert(3)" in md


def test_terminal_renderings_carry_no_control_sequence(verdict: Verdict) -> None:
    for text in (
        verdict_render.render_text(verdict, colour=True),
        check_render.render_text(
            CheckResult(kind="against", mode="gpu", capsule=f"g{SGR}.tar", verdicts=[verdict]), colour=True
        ),
    ):
        assert "\x1b[31mRED" not in text and "\x1b]8" not in text and "\x07" not in text
        assert "\\x1b[31mRED" in text  # shown, not obeyed
    blobs = Blobs()
    a = make_record(blobs, "a")
    b = same_as(a, "b")
    b.command.argv = ["python", "train.py", "--note", SGR]
    text = diff_render.render_text(diff_records(a, b, blobs), colour=True)
    assert "\x1b[31mRED" not in text and "\\x1b[31mRED" in text
    b.results.stderr_tail = [f"Traceback {SGR}"]
    b.warnings = []
    b.command.params = {"x": SGR}
    shown = show_text(b)
    assert "\x1b[31mRED" not in shown and "\\x1b[31mRED" in shown


@pytest.mark.parametrize(
    ("fn", "text", "absent"),
    [
        (escape.markdown, SCRIPT, "<script"),
        (escape.markdown, LINK, "](javascript:"),
        (escape.markdown, AUTOLINK, "<javascript"),
        (escape.markdown, "a\nb|c", "\n"),
        (escape.html, IMG, "<img"),
        (escape.svg, "a\x00b<c", "\x00"),
        (escape.xml, "a\x1b[31mb\x0c", "\x1b"),
        (escape.terminal, SGR, "\x1b"),
        (escape.terminal, "a\u202eb", "\u202e"),
    ],
)
def test_one_escaping_function_per_target(fn: Any, text: str, absent: str) -> None:
    assert absent not in fn(text)


def test_a_csv_cell_is_never_a_formula() -> None:
    assert escape.csv('=HYPERLINK("http://evil")').startswith("'=")
    assert escape.csv("model.pt") == "model.pt"
