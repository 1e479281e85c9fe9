"""Lightning's data for a fit: bucketed batches of an encoded corpus, from one sampler that is also rank-aware
under DDP (training pads every rank to the same batches; evaluation strides, so no document counts twice)."""

from __future__ import annotations

import lightning as L
import torch

from docattn.data.batching import batch_sampler
from docattn.data.encoding import EncodedCorpus
from docattn.errors import ConfigError
from docattn.training.config import TrainConfig
from docattn.training.inference import make_batch


class _Indices(torch.utils.data.Dataset):
    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class _Collate:
    """Turns a list of document indices into the model's batch layout (picklable for workers)."""

    def __init__(self, corpus: EncodedCorpus, layout: str, limits: dict):
        self.corpus, self.layout, self.limits = corpus, layout, limits

    def __call__(self, documents: list[int]):
        return make_batch(self.corpus, documents, self.layout, self.limits)


def _loader(
    corpus: EncodedCorpus,
    layout: str,
    limits: dict,
    batch_size: int,
    shuffle: bool,
    seed: int,
    trainer,
    pad: bool,
    workers: int = 0,
):
    world, rank = (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)
    sampler = batch_sampler(
        corpus,
        layout,
        limits,
        batch_size,
        shuffle=shuffle,
        seed=seed,
        num_replicas=world if pad else 1,
        rank=rank if pad else 0,
    )
    if not pad and world > 1:  # evaluation: each rank takes every world-th batch, no document twice
        sampler = _Strided(sampler, world, rank)
    # on a GPU, worker processes build the next batches while kernels run, in page-locked memory so
    # that the copy to the device does not block (the batch types have pin_memory())
    cuda = trainer is not None and trainer.strategy.root_device.type == "cuda"
    return torch.utils.data.DataLoader(
        _Indices(len(corpus)),
        batch_sampler=sampler,
        collate_fn=_Collate(corpus, layout, limits),
        num_workers=workers,
        persistent_workers=workers > 0,
        pin_memory=cuda and workers > 0,
    )


class _Strided(torch.utils.data.Sampler):
    def __init__(self, inner, world: int, rank: int):
        self.inner, self.world, self.rank = inner, world, rank

    def __iter__(self):
        for i, b in enumerate(self.inner):
            if i % self.world == self.rank:
                yield b

    def __len__(self) -> int:
        return len(range(self.rank, len(self.inner), self.world))


class DocumentData(L.LightningDataModule):
    def __init__(self, train: EncodedCorpus, valid: EncodedCorpus, layout: str, limits: dict, cfg: TrainConfig):
        super().__init__()
        self.train, self.valid, self.layout, self.limits, self.cfg = train, valid, layout, limits, cfg

    def train_dataloader(self):
        return _loader(
            self.train,
            self.layout,
            self.limits,
            self.cfg.batch_size,
            True,
            self.cfg.seed,
            self.trainer,
            pad=True,
            workers=self.cfg.loader_workers,
        )

    def val_dataloader(self):
        size, world = max(self.cfg.batch_size, 128), self.trainer.world_size if self.trainer is not None else 1
        if world > 1:  # every rank needs at least one batch of its own (ranks take every world-th one)
            if len(self.valid) < world:
                raise ConfigError(
                    f"{world} processes need at least {world} validation documents, got {len(self.valid)}"
                )
            size = min(size, len(self.valid) // world)
        return _loader(
            self.valid,
            self.layout,
            self.limits,
            size,
            False,
            0,
            self.trainer,
            pad=False,
            workers=self.cfg.loader_workers,
        )
