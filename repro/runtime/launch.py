"""The command line that starts a run's processes: the command itself, or torchrun around it.

Standard library only: the backends build it on the host, and `repro.runtime.node` on each node of a
multi-node run.
"""

from __future__ import annotations

from pathlib import Path


def launch_argv(
    argv: list[str],
    nproc_per_node: int,
    python: str = "python",
    log_dir: str | None = None,
    torchrun: bool = False,
    nodes: int = 1,
    node_rank: int = 0,
    master: tuple[str, int] | None = None,
) -> list[str]:
    """The argv to execute: the command itself, or torchrun around it for N>1 processes.

    ``argv`` starts with a python interpreter (the runner normalises `train.py` to
    `python train.py`); under torchrun the interpreter is dropped and the script and
    its arguments follow torchrun's options. On one node the ranks meet on the
    loopback address (``--local-addr``): a single node needs no name lookup, and a
    container without a network cannot resolve its own hostname. Across ``nodes``
    (with ``master``, the first node's address and port) every node runs one torchrun
    with its ``node_rank``: a static rendezvous on the first node's store, so node k
    always holds ranks k*N … k*N+N-1 (c10d's dynamic rendezvous orders nodes by host
    name and pid, which would move per-rank seeds and data shards between nodes).
    With ``log_dir`` (a path as the process sees it) every rank's stdout and stderr
    also go to their own files there (``<log_dir>/<run>/attempt_<n>/<local rank>/std{out,err}.log``)
    while the combined, rank-prefixed stream still reaches the terminal.
    """
    if nproc_per_node * nodes <= 1 and not torchrun:
        return list(argv)
    rest = argv[1:] if argv and Path(argv[0]).name.startswith("python") else argv
    launcher = [python, "-m", "torch.distributed.run"]
    if nodes > 1:
        if master is None:
            raise ValueError("a multi-node launch needs the first node's address and port")
        launcher += [
            f"--nproc-per-node={nproc_per_node}", f"--nnodes={nodes}", f"--node-rank={node_rank}",
            f"--master-addr={master[0]}", f"--master-port={master[1]}",
        ]  # fmt: skip
    else:
        launcher += ["--standalone", f"--nproc-per-node={nproc_per_node}", "--local-addr=127.0.0.1"]
    if log_dir:
        launcher += [f"--log-dir={log_dir}", "--redirects=3", "--tee=3"]
    return [*launcher, *rest]
