"""A capsule's strings reach the terminal as text: escapes shown, never obeyed.

A genuine run is exported, then its record is edited as an attacker would (SHA256SUMS
recomputed): terminal escapes that erase a line (``\\x1b[2K``), carriage returns and bidi
overrides (U+202E) in the command, working directory, warnings, environment names and backend
name. `show`, `verify`, `diff`, `ls` and `replay` (its notes and verdict) must print them as
visible escapes, so what a reviewer reads is what the capsule says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.forging import forge

TRAIN = """\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--tag", default="plain")
parser.add_argument("--out", default="outputs")
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "model.txt"), "w") as f:
    f.write("weights 0.25 0.5\\n")
print("trained")
"""

HIDE = "\x1b[2K\r"  # erase the line, back to its start: what follows overwrites what came before
RLO = "\u202e"  # right-to-left override: the rest of the line is shown reversed
RAW = ("\x1b", "\r", RLO)


def _clean(text: str) -> None:
    for raw in RAW:
        assert raw not in text, repr(text)


@pytest.fixture
def exported(project: Project, tmp_path: Path) -> Path:
    project.write("train.py", TRAIN)
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--seed", "3", "--", "python", "train.py")
    assert r.code == 0, r.err
    tar = tmp_path / "genuine.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    return tar


def _hostile_text(record: dict[str, Any]) -> None:
    record["command"]["argv"] = ["python", "train.py", "--tag", f"rm -rf ~{HIDE}python train.py"]
    record["command"]["params"] = {"tag": f"x{RLO}yz"}
    record["warnings"] = [f"{HIDE}all fine", f"two\nlines{RLO}"]
    record["determinism"]["env"][f"EVIL{HIDE}OMP"] = "1"  # dropped by a replay, and named


def test_show_verify_diff_ls_and_replay_print_a_capsules_escapes(
    project: Project, exported: Path, tmp_path: Path
) -> None:
    bad = forge(exported, tmp_path / "bad.tar", _hostile_text)
    shown = project.repro("show", str(bad))
    assert shown.code == 0, shown.err
    _clean(shown.out + shown.err)
    assert "rm -rf ~\\x1b[2K\\rpython train.py" in shown.out
    assert "tag=x\\u202eyz" in shown.out
    warnings = [line for line in shown.out.splitlines() if line.startswith("warning")]
    assert any(line.endswith("\\x1b[2K\\rall fine") for line in warnings), warnings
    assert any(line.endswith("two\\nlines\\u202e") for line in warnings), warnings  # one line, not two
    as_json = json.loads(project.repro("show", str(bad), "--json").out)  # JSON keeps the exact text
    assert as_json["command"]["argv"][-1] == f"rm -rf ~{HIDE}python train.py"

    verified = project.repro("verify", str(bad))
    assert verified.code == 0 and verified.out.startswith("ok:"), verified.err

    diffed = project.repro("diff", str(exported), str(bad))
    assert diffed.code == 0, diffed.err
    _clean(diffed.out + diffed.err)
    assert "tag  x\\u202eyz" in diffed.out and "EVIL\\x1b[2K\\rOMP" in diffed.out
    markdown = project.repro("diff", str(exported), str(bad), "--markdown")
    _clean(markdown.out)

    elsewhere = tmp_path / "elsewhere"  # a store without the genuine run: the capsule is imported
    elsewhere.mkdir()
    replayed = project.repro("replay", str(bad), cwd=elsewhere)
    assert replayed.code == 0, replayed.out + replayed.err
    _clean(replayed.out + replayed.err)
    assert "EVIL\\x1b[2K\\rOMP" in replayed.err and "IDENTICAL" in replayed.out
    listed = project.repro("ls", cwd=elsewhere)
    _clean(listed.out)
    assert "\\x1b[2K\\rpython" in listed.out


@pytest.mark.parametrize(
    ("field", "value"),
    [(("backend", "name"), f"docker{HIDE}local"), (("command", "cwd"), f"sub{RLO}dir")],
)
def test_a_hostile_name_or_path_is_named_as_escapes(
    project: Project, exported: Path, tmp_path: Path, field: tuple[str, str], value: str
) -> None:
    def edit(record: dict[str, Any]) -> None:
        record[field[0]][field[1]] = value

    bad = forge(exported, tmp_path / "bad.tar", edit)
    r = project.repro("show", str(bad))
    _clean(r.out + r.err)
    if field == ("backend", "name"):  # a backend is a plain word: refused, the field named
        assert r.code == 6 and "backend.name" in r.err and "\\x1b[2K\\rlocal" in r.err, r.err
    else:  # a path may hold any character a file name may: shown, escaped
        assert r.code == 0 and "(cwd sub\\u202edir)" in r.out, r.out + r.err


LIAR = """\
import sys
print("\\x1b[1A\\x1b[2K\\rrepro: run 1 · backend docker · mode strict", flush=True)  # up, erase, forge
print("\\x1b[8m" + "hidden from here on", flush=True)  # conceal, never reset
print("\\x1b[32mgreen\\x1b[0m epoch 1 10%|#   |\\repoch 1 100%|####|", flush=True)
"""


def test_a_replayed_commands_output_cannot_reach_what_repro_printed_before_it(project: Project) -> None:
    """A replayed record's code prints through repro: it may colour its own lines and redraw a bar
    with carriage returns, not move the cursor, erase repro's lines or leave the terminal concealed.
    `repro run` passes the user's own command's output through unchanged."""
    project.write("liar.py", LIAR)
    project.commit("liar")
    r = project.repro("run", "--backend", "local", "liar.py")
    assert r.code == 0, r.err
    assert "\x1b[1A\x1b[2K" in r.out  # your own command: its bytes as it wrote them
    r = project.repro("replay", "--backend", "local", "latest")
    assert r.code == 0, r.err
    assert "\x1b[1A" not in r.err and "\x1b[2K" not in r.err, r.err
    assert "\\x1b[1A\\x1b[2K" in r.err  # shown as escapes, never obeyed
    lines = r.err.splitlines()
    assert any(line.startswith("repro: replaying ") and "backend local" in line for line in lines)
    hidden = r.err.index("hidden from here on")
    assert "\x1b[0m" in r.err[hidden : r.err.index("repro:", hidden)]  # its colour ends before repro speaks
    assert "\x1b[32mgreen\x1b[0m epoch 1 10%|#   |" in r.err and "epoch 1 100%|####|" in r.err


# Every control a terminal obeys, in the forms a log carries them: ESC (erase line), CSI as its one
# C1 byte, BEL, DEL, a NEL (C1) and an OSC 8 hyperlink whose text hides where it points.
CONTROLS = "\x1b[2K\r\x9b1A\x07\x7f\x85 \x1b]8;;https://evil.invalid/\x1b\\docs\x1b]8;;\x1b\\"
RAW_CONTROLS = ("\x1b", "\x9b", "\x07", "\x7f", "\x85", "\r")


def test_json_answers_hold_no_raw_control_and_decode_to_the_exact_text(
    project: Project, exported: Path, tmp_path: Path
) -> None:
    def edit(record: dict[str, Any]) -> None:
        record["results"]["stderr_tail"] = [f"loss 0.5{CONTROLS}", "done"]
        record["warnings"] = [f"note{CONTROLS}"]
        record["command"]["params"] = {"tag": f"x{CONTROLS}"}

    bad = forge(exported, tmp_path / "bad.tar", edit)
    shown = project.repro("show", str(bad), "--json")
    assert shown.code == 0, shown.err
    for raw in RAW_CONTROLS:
        assert raw not in shown.out, (raw, shown.out)
    assert all(" " <= c <= "~" or c == "\n" for c in shown.out)  # printable ASCII, whatever it holds
    record = json.loads(shown.out)
    assert record["results"]["stderr_tail"][0] == f"loss 0.5{CONTROLS}"
    assert record["warnings"][0]["message"] == f"note{CONTROLS}"
    assert record["command"]["params"] == {"tag": f"x{CONTROLS}"}

    diffed = project.repro("diff", str(exported), str(bad), "--json")
    assert diffed.code in (0, 1), diffed.err
    for raw in RAW_CONTROLS:
        assert raw not in diffed.out, (raw, diffed.out)
    assert f"x{CONTROLS}" in _strings(json.loads(diffed.out))  # the changed param, exact


def _strings(value: Any) -> list[str]:
    """Every string a decoded JSON value holds, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
