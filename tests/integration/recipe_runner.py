"""Run a CI recipe's job on this machine, step by step, as its CI service would.

No runner image can be fetched here (`act` pulls them from a registry this machine does not
reach), so a job's shell steps run in order with bash in a clone of the project, with the
variables and files the service provides (``GITHUB_ENV``, ``RUNNER_TEMP``, ``CI_PROJECT_DIR`` …).
Only ``uses:`` steps are not run: each must be pinned to a version, and the few the recipes use are
played by their documented effect — checkout (the clone is there), setup-python (the Python given
is first on PATH; its ``cache-dependency-path`` must match a file), cache (paths restored from and
saved to a directory that outlives the job, by key and restore-keys), upload-artifact (the path is
kept). GitHub expressions are evaluated for what the recipes use: ``always()``, ``success()``,
``hashFiles(…)``, ``runner.os``, ``runner.temp`` and ``steps.<id>.outputs.<name>``, joined by
``&&``, ``||``, ``==``, ``!=``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PINNED = re.compile(r"^[\w.-]+/[\w.-]+@(v\d+(\.\d+)*|[0-9a-f]{40})$")


@dataclass
class StepResult:
    name: str
    ran: bool
    code: int = 0
    output: str = ""


@dataclass
class Job:
    """One job's run: the clone it ran in, its home, the steps' results, what it uploaded."""

    clone: Path
    home: Path
    env: dict[str, str]
    steps: list[StepResult] = field(default_factory=list)
    uploaded: list[Path] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.code == 0 for s in self.steps)

    def log(self) -> str:
        return "\n".join(f"--- {s.name} (exit {s.code})\n{s.output[-4000:]}" for s in self.steps if s.ran)


def hash_files(root: Path, patterns: list[str]) -> str:
    """GitHub's ``hashFiles``: one SHA-256 over the matching files, '' when none matches."""
    files = sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    if not files:
        return ""
    outer = hashlib.sha256()
    for path in files:
        outer.update(hashlib.sha256(path.read_bytes()).digest())
    return outer.hexdigest()


def _evaluate(expr: str, job: Job, previous_ok: bool) -> Any:
    """A GitHub expression (the subset the recipes use) as a Python value."""
    values: list[Any] = []

    def keep(value: Any) -> str:
        values.append(value)
        return f"_v[{len(values) - 1}]"

    def files(m: re.Match[str]) -> str:
        return keep(hash_files(job.clone, re.findall(r"'([^']*)'", m.group(1))))

    text = re.sub(r"hashFiles\(([^)]*)\)", files, expr.strip())
    text = re.sub(r"'([^']*)'", lambda m: keep(m.group(1)), text)
    text = re.sub(
        r"steps\.([\w-]+)\.outputs\.([\w-]+)",
        lambda m: keep(job.outputs.get(m.group(1), {}).get(m.group(2), "")),
        text,
    )
    text = text.replace("runner.os", keep("Linux")).replace("runner.temp", keep(job.env["RUNNER_TEMP"]))
    text = (
        text.replace("always()", "True")
        .replace("success()", str(previous_ok))
        .replace("failure()", str(not previous_ok))
    )
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    assert re.fullmatch(r"[\s\w\[\]().!=<>]*", text), f"an expression this runner does not know: {expr}"
    return eval(text, {"__builtins__": {}}, {"_v": values, "True": True, "False": False})  # noqa: S307


def _substitute(value: str, job: Job) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(_evaluate(m.group(1), job, True)), value)


def _bash(script: str, job: Job, env: dict[str, str], timeout: float) -> tuple[int, str]:
    path = job.home / f"step-{len(job.steps)}.sh"
    path.write_text(script)
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=job.clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
    )  # fmt: skip
    return proc.returncode, proc.stdout


def _read_github_env(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        if "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
    return found


def run_github_job(
    workflow: dict[str, Any],
    job_name: str,
    clone: Path,
    home: Path,
    python_bin: Path,
    cache_dir: Path,
    base_env: dict[str, str],
    overrides: dict[str, str | None],
    timeout: float = 1800,
) -> Job:
    """Run ``job_name`` of ``workflow`` in ``clone``; ``cache_dir`` plays actions/cache across jobs.
    ``overrides`` replace (None: remove) the recipe's variables that name hosts not reached here."""
    spec = workflow["jobs"][job_name]
    temp = home / "runner-temp"
    temp.mkdir(parents=True)
    env = {**base_env, "HOME": str(home), "RUNNER_TEMP": str(temp), "RUNNER_OS": "Linux", "CI": "true",
           "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(clone), "GITHUB_ENV": str(home / "github_env"),
           "GITHUB_STEP_SUMMARY": str(home / "step_summary.md"),
           "GITHUB_OUTPUT": str(home / "github_output")}  # fmt: skip
    env.update({k: str(v) for k, v in (workflow.get("env") or {}).items()})
    env.update({k: str(v) for k, v in (spec.get("env") or {}).items()})
    _override(env, overrides)
    job = Job(clone, home, env)
    saves: list[tuple[str, list[Path]]] = []
    previous_ok = True
    for i, step in enumerate(spec["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        condition = step.get("if")
        if not (_evaluate(condition, job, previous_ok) if condition is not None else previous_ok):
            job.steps.append(StepResult(name, ran=False))
            continue
        if "uses" in step:
            result = _action(step, job, python_bin, cache_dir, saves)
        else:
            run = step["run"]
            assert "${{" not in run, (
                f"{name}: an expression inside run: is evaluated by no shell (and unsafe)"
            )
            step_env = {**job.env, **_read_github_env(home / "github_env")}
            step_env.update({k: _substitute(str(v), job) for k, v in (step.get("env") or {}).items()})
            code, out = _bash(run, job, step_env, timeout)
            result = StepResult(name, ran=True, code=code, output=out)
        job.steps.append(result)
        previous_ok = previous_ok and result.code == 0
    for key, paths in saves:  # actions/cache's post step: save what a miss restored nothing for
        entry = cache_dir / key
        if not entry.exists():
            for n, path in enumerate(paths):
                if path.exists():
                    shutil.copytree(path, entry / str(n), symlinks=True)
            entry.mkdir(parents=True, exist_ok=True)
    return job


def _action(
    step: dict[str, Any], job: Job, python_bin: Path, cache_dir: Path, saves: list[tuple[str, list[Path]]]
) -> StepResult:
    uses: str = step["uses"]
    assert PINNED.match(uses), f"{uses}: pin actions to a version (owner/name@vN) or a commit"
    action = uses.split("@", 1)[0]
    given = {k: _substitute(str(v), job) for k, v in (step.get("with") or {}).items()}
    if action == "actions/checkout":
        assert (job.clone / ".git").is_dir()
    elif action == "actions/setup-python":
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        assert given["python-version"] == version, f"the runner's Python here is {version}"
        job.env["PATH"] = f"{python_bin}{os.pathsep}{job.env['PATH']}"
        if given.get("cache") == "pip":
            patterns = [p.strip() for p in given.get("cache-dependency-path", "requirements.txt").split("\n")]
            assert hash_files(job.clone, [p for p in patterns if p]), (
                f"setup-python fails: no file matches cache-dependency-path {patterns}"
            )
    elif action == "actions/cache":
        paths = [
            Path(p.strip().replace("~", job.env["HOME"], 1)) for p in given["path"].splitlines() if p.strip()
        ]
        key = given["key"]
        restore = [k.strip() for k in given.get("restore-keys", "").splitlines() if k.strip()]
        hit = (cache_dir / key).is_dir()
        found = key if hit else next(
            (e.name for prefix in restore for e in sorted(cache_dir.glob("*"), reverse=True)
             if e.name.startswith(prefix)), None,
        )  # fmt: skip
        if found is not None:
            for n, path in enumerate(paths):
                saved = cache_dir / found / str(n)
                if saved.is_dir():
                    shutil.copytree(saved, path, symlinks=True, dirs_exist_ok=True)
        job.outputs[step.get("id", "")] = {"cache-hit": "true" if hit else "false"}
        saves.append((key, paths))
    elif action == "actions/upload-artifact":
        job.uploaded.append(Path(given["path"]))
    else:
        raise AssertionError(f"{uses}: an action this runner does not know")
    return StepResult(uses, ran=True)


def _override(env: dict[str, str], overrides: dict[str, str | None]) -> None:
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value


def run_gitlab_job(
    config: dict[str, Any],
    job_name: str,
    clone: Path,
    base_env: dict[str, str],
    overrides: dict[str, str | None],
) -> Job:
    """``before_script`` and ``script`` (stopping at the first failing line), then ``after_script``."""
    spec = config[job_name]
    env = {**base_env, "CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": str(clone)}
    for name, value in (spec.get("variables") or {}).items():
        env[name] = str(value).replace("$CI_PROJECT_DIR", str(clone))
    _override(env, overrides)
    home = Path(env["HOME"])
    job = Job(clone, home, env)
    main = [*spec.get("before_script", []), *spec.get("script", [])]
    code, out = _bash("\n".join(main) + "\n", job, env, 1800)
    job.steps.append(StepResult("before_script + script", ran=True, code=code, output=out))
    after = spec.get("after_script", [])
    if after:
        code, out = _bash("\n".join(after) + "\n", job, env, 600)
        job.steps.append(StepResult("after_script", ran=True, code=code, output=out))
    return job
