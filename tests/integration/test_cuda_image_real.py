"""A real CUDA image, built in one command from this machine's package index (slow: it downloads
about 3 GB of CUDA wheels into the wheelhouse cache once). Skipped unless REPRO_TEST_CUDA_IMAGE=1.

The host's pip configuration here names an index whose torch 2.14.1 is PyPI's CUDA 13.0 build
(nvidia-* runtime packages beside it), so `--cuda-index none` is the setting a build host that
reaches only such an index uses. Inside the image torch reports its CUDA version and repro's
runtime loads; no wheel file is left in it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from repro.backends.base import runtime_source
from tests.conftest import Project

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("REPRO_TEST_CUDA_IMAGE") != "1",
        reason="downloads about 3 GB: set REPRO_TEST_CUDA_IMAGE=1 to build the real CUDA image",
    ),
]


def test_a_cuda_image_from_the_index_has_cuda_torch_and_repro_loads(project: Project) -> None:
    project.write("requirements.in", "torch==2.14.1\n")
    project.commit("deps")
    built = project.repro("build", "--gpus", "--cuda-index", "none", "--json")
    assert built.code == 0, built.err
    image = json.loads(built.out)
    assert image["tag"].startswith("repro-env:cu13.0-") and image["template"] == "cuda"
    lock = (project.root / "lockfiles" / "requirements-cuda.lock.txt").read_text()
    assert "# variant: cuda\n" in lock and "torch==2.14.1" in lock
    inject, package = runtime_source()
    probe = "import torch, sitecustomize, repro.runtime; print(torch.version.cuda, torch.__version__)"
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none",
         "-v", f"{inject}:/opt/repro/inject:ro", "-v", f"{package}/repro:/opt/repro/pkg/repro:ro",
         "-e", "PYTHONPATH=/opt/repro/inject:/opt/repro/pkg", image["id"], "python", "-c", probe],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "13.0"
    labels = subprocess.run(
        ["docker", "image", "inspect", image["id"], "--format", "{{json .Config.Labels}}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert json.loads(labels)["org.repro.cuda"] == "13.0"
    wheels = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image["id"],
         "sh", "-c", "find /opt -name '*.whl' | head -1"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    assert wheels.strip() == ""
