"""A Hydra app: composed config, logging through Hydra, the model saved in Hydra's output dir."""

import logging
import time
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf
from torch import nn

log = logging.getLogger(__name__)


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    log.info("config:\n%s", OmegaConf.to_yaml(cfg))
    rows = [line.split(",") for line in Path(to_absolute_path(cfg.data)).read_text().split()]
    x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
    y = torch.tensor([int(c) for _, _, c in rows])
    hidden = cfg.model.hidden
    model = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, 2))
    opt = torch.optim.SGD(model.parameters(), lr=cfg.optim.lr, momentum=cfg.optim.get("momentum", 0.0))
    for epoch in range(cfg.epochs):
        start = time.perf_counter()
        perm = torch.randperm(len(x))
        for i in range(0, len(x), cfg.batch_size):
            idx = perm[i : i + cfg.batch_size]
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        ms = (time.perf_counter() - start) * 1000 / max(1, len(x) // cfg.batch_size)
        log.info("epoch %d loss %.6f | %.2f ms/batch", epoch, loss.item(), ms)
    out = Path(HydraConfig.get().runtime.output_dir)
    torch.save(model.state_dict(), out / cfg.save)


if __name__ == "__main__":
    main()
