"""One Slurm task per node: note the node's hardware, then become the run's launcher on it.

The slurm backend's batch script starts this on every node of the allocation
(``srun python -S -m repro.runtime.node …``; ``-S`` keeps the injected runtime out of
this launcher, so the command it becomes counts as the run's first process). It writes
``<facts>/node<k>.json`` (node name, CPU model and count, memory, GPUs) and then execs
the command itself, or torchrun for this node's ranks: signals Slurm sends the task
(cancel, the warning before a time limit) reach the command, not a middleman.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from repro.runtime import contract
from repro.runtime.launch import launch_argv

ENGINES = ("docker", "podman")  # what runs a run's image on a node


def _meminfo_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        return None
    return platform.processor() or None


def _gpus() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def node_facts(node_rank: int) -> dict[str, Any]:
    """What this node is: its Slurm name, host, CPUs the job may use, memory, GPUs."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    return {
        "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
        "node_rank": node_rank,
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "memory_bytes": _meminfo_bytes(),
        "gpus": _gpus(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("repro.runtime.node: the command follows `--`")
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="python -m repro.runtime.node")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--nproc-per-node", type=int, required=True)
    p.add_argument("--facts", required=True, help="directory for node<k>.json")
    p.add_argument("--log-dir", required=True, help="torchrun's per-rank logs go under <log-dir>/node<k>")
    p.add_argument("--master", default=None, help="ADDR:PORT of the first node (several nodes)")
    p.add_argument("--image", default=None, help="run the command in this image (docker run)")
    p.add_argument("--engine", default="docker", choices=ENGINES, help="what runs the image")
    p.add_argument("--archive", default=None, help="podman: load the image from this archive where missing")
    p.add_argument("--storage", default=None, help="podman: this node's storage (--root/--runroot under it)")
    p.add_argument("--shm-size", default="2g", help="podman: the container's /dev/shm")
    p.add_argument("--bind", default="", help="comma-separated host paths mounted at the same paths")
    p.add_argument("--pass-env", default="", help="comma-separated variables passed into the container")
    return p.parse_args(argv[:cut]), argv[cut + 1 :]


def _podman(storage: str | None) -> list[str]:
    """``podman`` with this node's own storage: the image is loaded once per node, not per job."""
    if not storage:
        return ["podman"]
    return ["podman", f"--root={storage}/root", f"--runroot={storage}/run"]


def node_storage(base: str | None) -> str | None:
    """This node's Podman storage under ``base``: one directory per Slurm node name."""
    node = os.environ.get("SLURMD_NODENAME") or platform.node()
    return f"{base}/{node}" if base else None


def load_once(image: str, archive: str | None, storage: str | None) -> bool:
    """Load ``archive`` into this node's Podman storage unless it holds ``image`` already; whether it
    loaded. The archive is the one repro saved of the image it built: the image must then be there
    under that id, or the task stops.

    Raises:
        SystemExit: the archive did not load, or loaded another image.
    """
    podman = _podman(storage)
    exists = [*podman, "image", "exists", image]
    if subprocess.run(exists, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0:
        return False
    if not archive:
        raise SystemExit(f"repro: this node's Podman storage has no image {image[:19]} and no archive")
    done = subprocess.run([*podman, "load", "-q", "-i", archive], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0 or subprocess.run(exists, capture_output=True).returncode != 0:
        raise SystemExit(f"repro: could not load the run's image on this node: {done.stderr.strip()[-300:]}")
    return True


def container_argv(
    image: str, binds: list[str], names: list[str], node_rank: int,
    engine: str = "docker", storage: str | None = None, shm_size: str = "2g",
) -> list[str]:  # fmt: skip
    """``docker run`` (or rootless ``podman run``) for this node's share of the run: host network (the
    ranks meet across nodes), this user, the project, runtime and data at their host paths, the run's
    variables."""
    attempt = os.environ.get("SLURM_RESTART_COUNT", "0")
    name = f"repro-{os.environ.get(contract.RUN_ID_ENV, 'run')}-node{node_rank}-{attempt}"
    argv = _podman(storage) if engine == "podman" else ["docker"]
    argv += ["run", "--rm", "--init", f"--name={name}", "--network=host",
             f"--user={os.getuid()}:{os.getgid()}", f"--workdir={os.getcwd()}",
             "--label=org.repro.slurm=1"]  # fmt: skip
    if engine == "podman":  # the node's ranks share the container's IPC; rootless: no host /dev/mqueue
        argv.append(f"--shm-size={shm_size}")
        if os.getuid() != 0:  # this user inside: files written are the user's, never a sub-id's
            argv.append("--userns=keep-id")
    else:
        argv.append("--ipc=host")
    argv += [f"--volume={path}:{path}" for path in binds if path]
    argv += [f"--env={n}" for n in names if n]  # the value comes from this process's environment
    return [*argv, image]


def main(argv: list[str] | None = None) -> None:
    args, command = _parse(sys.argv[1:] if argv is None else argv)
    node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    facts = Path(args.facts)
    facts.mkdir(parents=True, exist_ok=True)
    noted = node_facts(node_rank)
    storage = node_storage(args.storage) if args.engine == "podman" else None
    if args.image and args.engine == "podman":
        noted["image_loaded"] = load_once(args.image, args.archive, storage)
    tmp = facts / f".node{node_rank}.json.tmp"
    tmp.write_text(json.dumps(noted, sort_keys=True))
    os.replace(tmp, facts / f"node{node_rank}.json")
    master = None
    if args.master:
        host, _, port = args.master.rpartition(":")
        master = (host, int(port))
    python = "python" if args.image else sys.executable  # in an image: the image's interpreter
    run = launch_argv(
        command, args.nproc_per_node, python=python, log_dir=f"{args.log_dir}/node{node_rank}",
        nodes=args.nodes, node_rank=node_rank, master=master,
    )  # fmt: skip
    if run and run[0] in ("python", "python3"):
        run[0] = python
    if args.image:
        binds, names = args.bind.split(","), args.pass_env.split(",")
        run = container_argv(args.image, binds, names, node_rank, args.engine, storage, args.shm_size) + run
    os.environ.pop(contract.BOOT_PID_ENV, None)
    sys.stdout.flush()
    try:
        os.execvp(run[0], run)
    except OSError as e:
        sys.stderr.write(f"repro: cannot start {run[0]} on {os.environ.get('SLURMD_NODENAME', '?')}: {e}\n")
        raise SystemExit(127) from e


if __name__ == "__main__":
    main()
