"""The CI recipes in recipes/ci/ parse, and every repro call in them is a real command with valid options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from repro.cli import cli
from repro.cli.lazy import TABLE

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "ci"
SEPARATORS = {";", "&&", "||", "|", "then", "do", "else", "fi", "done", "(", ")", ">", ">>", "<"}


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((RECIPES / name).read_text())
    assert isinstance(data, dict)
    return data


def _github_lines() -> list[str]:
    workflow = _load("github-actions.yml")
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def _gitlab_lines() -> list[str]:
    config = _load("gitlab-ci.yml")
    lines: list[str] = []
    for job in config.values():
        if isinstance(job, dict) and "script" in job:
            for key in ("before_script", "script", "after_script"):
                lines += job.get(key, [])
    return lines


def repro_calls(script: str) -> list[list[str]]:
    """Every `repro …` invocation in a shell snippet, as the argument list after `repro`."""
    calls: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        for i, token in enumerate(tokens):
            if token == "repro" and (i == 0 or tokens[i - 1] in SEPARATORS):
                args = []
                for t in tokens[i + 1 :]:
                    if t in SEPARATORS - {"then", "do", "else", "fi", "done"}:
                        break
                    args.append(t)
                calls.append(args)
    return calls


def check_call(args: list[str]) -> None:
    """Parse ``repro ARGS`` as click would, without running anything.

    Raises:
        AssertionError: an unknown command, option or option value.
    """
    assert args, "repro with no command"
    name, rest = args[0], args[1:]
    assert name in TABLE, f"`repro {name}` is not a repro command"
    command = cli.load(name)
    try:
        ctx = command.make_context(name, list(rest))
    except click.ClickException as e:
        raise AssertionError(f"`repro {shlex.join(args)}`: {e.format_message()}") from e
    passed = ctx.params.get("command")
    if passed:  # commands that pass the rest through must not swallow a mistyped repro option
        assert not passed[0].startswith("-"), f"`repro {shlex.join(args)}`: {passed[0]} is not an option"


@pytest.mark.parametrize("lines", [_github_lines, _gitlab_lines], ids=["github", "gitlab"])
def test_every_repro_call_in_the_recipes_is_valid(lines) -> None:  # type: ignore[no-untyped-def]
    calls = [c for line in lines() for c in repro_calls(line)]
    names = {c[0] for c in calls}
    assert {"check", "export"} <= names
    assert any("--against" in c for c in calls) and any("--junit" in c for c in calls)
    for call in calls:
        check_call(call)


def test_github_posts_the_summary_and_uploads_the_capsule() -> None:
    job = next(iter(_load("github-actions.yml")["jobs"].values()))
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "$GITHUB_STEP_SUMMARY" in runs and "--markdown" in runs
    assert '--html "$REPORTS/check.html"' in runs  # the page lands where the artifact is uploaded from
    uses = [step.get("uses", "") for step in job["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    (upload,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["path"] == "${{ runner.temp }}/repro/"
    assert any(u.startswith("actions/checkout@") for u in uses)


def test_gitlab_keeps_junit_reports_and_artifacts() -> None:
    job = _load("gitlab-ci.yml")["repro-check"]
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always"
    assert artifacts["reports"]["junit"]
    assert "repro-reports/" in artifacts["paths"]


@pytest.mark.parametrize(
    "line",
    [
        "repro chek -- python t.py",
        "repro check --junitt r.xml -- python t.py",
        "repro check --runs two -- python t.py",
        "repro export latest --bogus",
    ],
)
def test_the_validator_rejects_mistakes(line: str) -> None:
    (call,) = repro_calls(line)
    with pytest.raises(AssertionError):
        check_call(call)


def test_calls_are_found_inside_shell_constructs() -> None:
    script = (
        'if [ -f g.tar ]; then repro check --against g.tar; fi\nrepro export latest -o "$R/c.tar" || true'
    )
    assert repro_calls(script) == [["check", "--against", "g.tar"], ["export", "latest", "-o", "$R/c.tar"]]


def test_the_recipes_and_the_readme_install_repro_by_its_distribution_name() -> None:
    readme = (RECIPES.parents[1] / "README.md").read_text()
    assert "python -m pip install repro-capsule" in readme
    for text in ("\n".join(_github_lines()), "\n".join(_gitlab_lines())):
        assert "pip install repro-capsule" in text
        assert re.search(r"pip install repro(?![-\w\[])", text) is None  # the unrelated project of that name


def test_github_pins_its_actions_makes_and_caches_the_base_image_and_caches_files_that_exist() -> None:
    job = next(iter(_load("github-actions.yml")["jobs"].values()))
    uses = [step["uses"] for step in job["steps"] if "uses" in step]
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", u) for u in uses), uses
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert '"$(command -v repro)" base-image' in runs and "docker load" in runs and "docker save" in runs
    assert job["env"]["REPRO_BACKEND"] == "docker"  # explicit: the base image is made above the runs
    setup = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@"))
    patterns = setup["with"]["cache-dependency-path"].split()
    quickstart = RECIPES.parent / "quickstart"
    assert any(quickstart.glob(p) for p in patterns)  # setup-python fails when none matches
    cache = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/cache@"))
    assert "~/.cache/repro/wheelhouse" in cache["with"]["path"]


def test_github_replays_the_golden_capsule_sandboxed_and_says_why_as_the_readme_does() -> None:
    """The golden capsule comes with the pull request: untrusted. Its step names no host backend (the
    job's REPRO_BACKEND is docker, the sandbox), and its comment speaks of images as the README's
    "Images by content" does: built on this runner's base image from the capsule's lockfile."""
    job = next(iter(_load("github-actions.yml")["jobs"].values()))
    step = next(s for s in job["steps"] if "golden" in s.get("name", ""))
    (call,) = repro_calls(step["run"])
    assert call[:3] == ["check", "--against", "golden/capsule.tar"]
    assert "--backend" not in call and "REPRO_BACKEND" not in step.get("env", {})
    assert job["env"]["REPRO_BACKEND"] == "docker"
    text = (RECIPES / "github-actions.yml").read_text()
    comment = text.split("- name: The golden capsule still reproduces with this code", 1)[1].split("run:", 1)[
        0
    ]
    assert "sandbox" in comment and "image.base" in comment and "Images by content" in comment
    assert "runner's Python" not in text and "--backend local" not in text
    readme = (RECIPES.parents[1] / "README.md").read_text()
    assert "### Images by content" in readme or "## Images by content" in readme
    ci = (RECIPES.parents[1] / "docs" / "ci.md").read_text()
    assert "replayed on the runner's Python (`--backend local`)" not in ci
