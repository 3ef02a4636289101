"""A Paddle run's checkpoint as this project's checkpoint (`parallel.save`'s directory: DCP, resumed by
`parallel.load` and the Checkpointer at any layout) and, if asked, as a Hugging Face directory.

The import runs in one process: the model is built from the checkpoint's config.json, its weights and torch AdamW's
state (moments and step) put in, and `parallel.save` writes them from a process group of one rank (made here unless
the caller runs one). Paddle's optimizer file keeps no hyperparameters: the run's are given (Paddle's AdamW defaults
are torch's), and `parallel.load` restores them with the state.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .reader import PaddleCheckpoint, read_paddle

__all__ = ["import_paddle"]


def import_paddle(src: str | os.PathLike[str], out: str | os.PathLike[str], *,
                  config: str | os.PathLike[str] | None = None, optimizer: str | os.PathLike[str] | None = None,
                  lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                  weight_decay: float = 0.01, hf: str | os.PathLike[str] | None = None) -> PaddleCheckpoint:
    """Write the Paddle checkpoint in `src` (see `read_paddle`) as this project's checkpoint `out`, with the AdamW
    state (`lr`, `betas`, `eps`, `weight_decay`: the run's; Paddle's defaults otherwise) and the step Paddle's beta
    powers give; with `hf`, a Hugging Face directory too (safetensors and config.json). Both are written beside and
    moved into place, so a killed import leaves no half directory. Returns what was read, its report lines included.

    Example::

        parallel.import_paddle("paddle_run/checkpoint-2000", "ckpt/step_2000", lr=3e-4)
        step = parallel.load("ckpt/step_2000", model, opt).step   # at any layout
    """
    import transformers

    import parallel

    ckpt = read_paddle(src, config=config, optimizer=optimizer, betas=betas)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**ckpt.config))
    model.load_state_dict(ckpt.weights, strict=not ckpt.config.get("tie_word_embeddings"))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    for name, p in model.named_parameters():
        if name in ckpt.optimizer:
            opt.state[p] = {k: v.clone() for k, v in ckpt.optimizer[name].items()}
    with _one_rank() as hcg:
        parallel.save(out, model, opt if ckpt.optimizer else None, step=ckpt.step,
                      extra={"imported_from": str(Path(src).absolute()), "paddle_model_type": ckpt.model_type}, hcg=hcg)
    if hf is not None:  # written beside, then moved into place: a killed import leaves no half directory
        from strategy.atomic import replace_directory

        target = Path(hf).absolute()
        partial = target.parent / f".{target.name}.partial-{os.getpid()}"
        model.save_pretrained(partial, safe_serialization=True)
        replace_directory(partial, target)
    return ckpt


@contextlib.contextmanager
def _one_rank() -> Iterator[Any]:
    """The caller's HybridGroup, or a one-rank one made here (a gloo group over a file store) and released after."""
    import torch.distributed as dist

    import parallel
    import strategy

    if dist.is_initialized():
        yield parallel.current()
        return
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", store=dist.FileStore(os.path.join(tmp, "store"), 1), rank=0, world_size=1)
        try:
            yield parallel.init(strategy.DistributedStrategy())
        finally:
            parallel.destroy()
            if dist.is_initialized():
                dist.destroy_process_group()
