from __future__ import annotations

from pathlib import Path

import pytest

from repro import config
from repro.errors import ConfigError


def test_defaults_without_a_project_file(tmp_path: Path) -> None:
    s = config.load(tmp_path, environ={})
    assert s.backend == "auto" and s.threads is None and s.outputs == ("outputs",)


def test_yaml_then_env_then_flags(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text(
        "backend: local\nthreads: 2\ndata: [d1, d2]\nimage:\n  base: deb:1\n"
    )
    s = config.load(tmp_path, environ={"REPRO_BASE_IMAGE": "deb:2"})
    assert (s.backend, s.threads, s.data, s.base_image) == ("local", 2, ("d1", "d2"), "deb:2")
    assert config.resolve(tmp_path, config.Flags(threads=4), environ={}).settings.threads == 4


def test_pyproject_tool_section(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.repro]\nmode = "off"\n')
    assert config.load(tmp_path, environ={}).mode == "off"


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("treads: 2\n")
    with pytest.raises(ConfigError) as e:
        config.load(tmp_path, environ={})
    assert "treads" in str(e.value) and e.value.hint and "threads" in e.value.hint


@pytest.mark.parametrize("text", ["backend: nomad\n", "threads: zero\n", "mode: fast\n", "- a\n", "a: [\n"])
def test_bad_values_are_config_errors(tmp_path: Path, text: str) -> None:
    (tmp_path / "repro.yaml").write_text(text)
    with pytest.raises(ConfigError):
        config.load(tmp_path, environ={})


def test_each_source_wins_over_the_one_below(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("mode: off\nseed: 5\nthreads: 2\n")
    env = {"REPRO_MODE": "gpu", "REPRO_SEED_DEFAULT": "6"}
    plan = config.resolve(tmp_path, config.Flags(mode="strict"), environ=env)

    assert (plan.mode, plan.settings.seed, plan.settings.threads, plan.settings.isa) == (
        "strict",
        6,
        2,
        "auto",
    )
    assert plan.source("mode") == "--mode"
    assert plan.source("seed") == "REPRO_SEED_DEFAULT"
    assert plan.source("threads") == "repro.yaml"
    assert plan.source("isa") == "default"
    assert config.resolve(tmp_path, environ=env).mode == "gpu"
    assert config.resolve(tmp_path, environ={}).mode == "off"


def test_gpus_choose_the_mode_only_when_nothing_else_does(tmp_path: Path) -> None:
    assert config.resolve(tmp_path, config.Flags(gpus="1"), environ={}).mode == "gpu"
    assert config.resolve(tmp_path, config.Flags(gpus="1"), environ={"REPRO_MODE": "off"}).mode == "off"
    assert config.resolve(tmp_path, environ={}).source("mode") == "default"


def test_a_record_ranks_between_the_project_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("backend: docker\n")
    recorded = config.resolve(tmp_path, environ={}).with_recorded(backend="local")
    assert (recorded.settings.backend, recorded.source("backend")) == ("local", "the record")

    env = config.resolve(tmp_path, environ={"REPRO_BACKEND": "docker"}).with_recorded(backend="local")
    assert (env.settings.backend, env.source("backend")) == ("docker", "REPRO_BACKEND")

    flag = config.resolve(tmp_path, config.Flags(backend="auto"), environ={"REPRO_BACKEND": "docker"})
    assert flag.with_recorded(backend="local").settings.backend == "auto"


def test_a_tool_file_ranks_over_the_project_file_and_under_the_environment(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("backend: docker\n")
    ini = config.Layer(config.Rank.FILE, {"backend": ("local", "pytest ini repro_backend")})
    assert config.resolve(tmp_path, environ={}, extra=(ini,)).settings.backend == "local"
    env = {"REPRO_BACKEND": "auto"}
    assert config.resolve(tmp_path, environ=env, extra=(ini,)).settings.backend == "auto"


def test_one_seed_fixed_for_later_runs_keeps_its_source(tmp_path: Path) -> None:
    plan = config.resolve(tmp_path, environ={}).with_seed(41)
    assert (plan.settings.seed, plan.source("seed")) == (41, "default")


@pytest.mark.parametrize(
    ("environ", "flags", "named"),
    [
        ({"REPRO_MODE": "fast"}, config.Flags(), "REPRO_MODE"),
        ({}, config.Flags(threads=0), "--threads"),
        ({"REPRO_THREADS": "many"}, config.Flags(), "REPRO_THREADS"),
        ({"REPRO_ISA": "sse9"}, config.Flags(), "REPRO_ISA"),
    ],
)
def test_a_bad_value_names_where_it_came_from(
    tmp_path: Path, environ: dict[str, str], flags: config.Flags, named: str
) -> None:
    with pytest.raises(ConfigError) as e:
        config.resolve(tmp_path, flags, environ=environ)
    assert named in e.value.message
