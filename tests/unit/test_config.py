from __future__ import annotations

from pathlib import Path

import pytest

from repro import config
from repro.errors import ConfigError


def test_defaults_without_a_project_file(tmp_path: Path) -> None:
    s = config.load(tmp_path, environ={})
    assert s.backend == "auto" and s.threads == 1 and s.outputs == ("outputs",)


def test_yaml_then_env_then_flags(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text(
        "backend: local\nthreads: 2\ndata: [d1, d2]\nimage:\n  base: deb:1\n"
    )
    s = config.load(tmp_path, environ={"REPRO_BASE_IMAGE": "deb:2"})
    assert (s.backend, s.threads, s.data, s.base_image) == ("local", 2, ("d1", "d2"), "deb:2")
    assert s.with_overrides(threads=4, backend=None).threads == 4


def test_pyproject_tool_section(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.repro]\nmode = "off"\n')
    assert config.load(tmp_path, environ={}).mode == "off"


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("treads: 2\n")
    with pytest.raises(ConfigError) as e:
        config.load(tmp_path, environ={})
    assert "treads" in str(e.value) and e.value.hint and "threads" in e.value.hint


@pytest.mark.parametrize("text", ["backend: podman\n", "threads: zero\n", "mode: fast\n", "- a\n", "a: [\n"])
def test_bad_values_are_config_errors(tmp_path: Path, text: str) -> None:
    (tmp_path / "repro.yaml").write_text(text)
    with pytest.raises(ConfigError):
        config.load(tmp_path, environ={})
