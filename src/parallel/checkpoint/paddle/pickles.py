"""Paddle's checkpoint pickles (`model_state.pdparams`, `optimizer.pdopt`, their `.tpNN` shards) read without
paddlepaddle and without running what a pickle asks for: they hold dicts of numpy arrays, and an unpickler that can
build nothing else refuses any other object by name before it is made.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from strategy import StrategyError

__all__ = ["load_pickle"]

# What a pickle of numpy arrays names (numpy 1.x spells the module numpy.core, 2.x numpy._core), and nothing else.
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"), ("collections", "OrderedDict")}


class _ArraysOnly(pickle.Unpickler):
    def __init__(self, f: Any, path: str) -> None:
        super().__init__(f)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise StrategyError(f"{self.path}: the pickle asks for {module}.{name}, which a Paddle checkpoint of plain "
                                "tensors never holds; it is refused unrun (a checkpoint from elsewhere, or tampered "
                                "with: re-save it with paddle.save from its state_dict)", source=self.path)
        return super().find_class(module, name)


def load_pickle(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The dict a Paddle `.pdparams` / `.pdopt` file holds (numpy arrays, and the name maps Paddle adds).

    Raises:
        StrategyError: not a pickle, not a dict, or an object other than numpy data (named, with the file).
    """
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            loaded = _ArraysOnly(f, where).load()
    except StrategyError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise StrategyError(f"{where}: not a Paddle checkpoint pickle ({type(e).__name__}: {e})", source=where) from None
    if not isinstance(loaded, dict):
        raise StrategyError(f"{where}: a Paddle checkpoint holds a dict of tensors, not {type(loaded).__name__}",
                            source=where)
    return loaded
