from __future__ import annotations

from pathlib import Path

from repro.facts.command import config_files, normalise_argv, parse_params, script_args


def test_py_first_argument_means_python() -> None:
    assert normalise_argv(["train.py", "--lr", "0.1"]) == ["python", "train.py", "--lr", "0.1"]
    assert normalise_argv(["python", "train.py"]) == ["python", "train.py"]


def test_script_args_skip_interpreter_flags_and_modules() -> None:
    assert script_args(["python", "-u", "train.py", "--lr", "1"]) == ["--lr", "1"]
    assert script_args(["python", "-m", "pkg.train", "--x"]) == ["--x"]
    assert script_args(["./run.sh", "--a=1"]) == ["--a=1"]


def test_params_forms() -> None:
    params = parse_params(["--lr", "0.02", "--batch-size=64", "--flag", "--name", "resnet", "-e", "3",
                           "--shift", "-1.5", "--tag", "a", "--tag", "b", "--verbose"])  # fmt: skip
    assert params == {
        "lr": 0.02, "batch_size": 64, "flag": True, "name": "resnet", "e": 3, "shift": -1.5,
        "tag": ["a", "b"], "verbose": True,
    }  # fmt: skip


def test_params_stop_at_double_dash_and_ignore_positionals() -> None:
    assert parse_params(["data.csv", "--lr", "1e-3", "--", "--ignored", "1"]) == {"lr": 0.001}


def test_config_files_named_in_argv(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "exp.yaml").write_text("lr: 1\n")
    found = config_files(["--config=conf/exp.yaml", "missing.yaml", "x.txt"], tmp_path, tmp_path)
    assert found == [tmp_path / "conf" / "exp.yaml"]


def test_script_path() -> None:
    from repro.facts.command import script_path

    assert script_path(["python", "-u", "train.py", "--lr", "1"]) == "train.py"
    assert script_path(["python", "-m", "pkg.train"]) is None
    assert script_path(["python", "-c", "print(1)"]) is None
    assert script_path(["bash", "run.sh"]) is None
