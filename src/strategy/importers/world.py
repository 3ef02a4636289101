"""The world size and the degrees it sizes: --world-size, else what the file states or implies, else none.

accelerate's num_processes and a Megatron script's torchrun --nproc_per_node × --nnodes state it, and give way to
--world-size (the same file launched on more machines); DeepSpeed's data_parallel_size and its three batch sizes imply
the data ranks (train_batch_size = micro × accumulation × data ranks, which DeepSpeed asserts), so --world-size must
agree with them. Where a setting depends on the world size and nothing gives it, `needs_world` is the error.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import StrategyError
from .common import Leaf, Tool
from .facts import Occurrence
from .ledger import Ledger

__all__ = ["World"]


class Source(NamedTuple):
    """A world size the file states or implies."""

    facts: tuple[str, ...]  # the facts it is read from, which own the degrees it sizes
    size: int
    said: str  # where it comes from, as the file spells it (for the report and messages)
    binding: bool  # --world-size must agree (the batch sizes, the data ranks); else it gives way (a launcher's count)


class World(Ledger):
    """The ledger with the world size: `world` (None when nothing gives it), `data` (the data ranks), the degrees."""

    def __init__(self, occurrences: list[Occurrence], leaves: list[Leaf], tool: Tool, world_size: int | None) -> None:
        super().__init__(occurrences, leaves, tool, world_size)
        # What `degrees` works out, the planner's first step:
        self.tp = self.pp = self.sep = self.cp = 1  # the degrees each model copy spans
        self.sized: tuple[str, ...] = ()  # the facts the world size was read from: they own the degrees it sizes
        self.world_from = "--world-size"  # where the world size comes from, as messages name it
        self.data: int | None = None  # the data ranks: world / (tp · pp · sep · cp)

    def degrees(self) -> None:
        """The world size (the argument, else the one the file states or implies) and the degrees it sizes."""
        self.tp, self.pp, self.sep, self.cp = (int(self.get(f, 1)) for f in ("tp", "pp", "sep", "cp"))
        model = self.tp * self.pp * self.sep * self.cp
        implied = self.implied()
        stated = self.stated(model, implied)
        self.sized = ()
        self.world_from = "--world-size"
        if self.world is None and stated:
            self.sized, self.world, self.world_from = stated[0].facts, stated[0].size, stated[0].said
            if self.sized == ("global",):
                self.mark("global", "mapped", f"world size {self.world} from {self.world_from}")
        for source in stated:
            if source.binding:
                continue  # checked against the data ranks below
            if source.size == self.world:
                self.sized = tuple(dict.fromkeys(self.sized + source.facts))
            else:
                for fact in source.facts:
                    self.mark(fact, "no counterpart", f"{self.world_text()} is used instead")
        if self.has("node_procs") and not self.has("num_machines"):
            self.mark("node_procs", "unresolved" if self.world is None else "no counterpart",
                      "the world size is this × the machines, which the file does not give")
        for fact, name in (("tp", "mp_degree"), ("pp", "pp_degree"), ("sep", "sep_degree"), ("cp", "cp_degree")):
            if self.has(fact) or self.world is not None:
                self.set(f"hybrid_configs.{name}", int(self.get(fact, 1)), fact, *self.sized)
        self.data = None
        if self.world is not None:
            if self.world % model:
                named = [f"{self.said(f)}" for f in ("tp", "pp", "sep", "cp") if self.has(f)]
                blame = next(f for f in ("tp", "pp", "sep", "cp") if self.has(f))
                raise self.error(blame, f"{' × '.join(named)} = {model} ranks for each model copy do not divide "
                                 f"{self.world_text()}")
            self.data = self.world // model
            if self.has("data_ranks") and self.get("data_ranks") != self.data:
                raise self.error("data_ranks", f"{self.data} data ranks are left at {self.world_text()}, "
                                 f"not {self.get('data_ranks')}")
            if implied is not None and implied != self.data:
                fix = f"; pass --world-size {implied * model} or leave it out" if self.world_arg is not None else ""
                raise self.error("global", f"{self.batch_text(said=True)} = {implied} data ranks, so the world size is "
                                 f"{implied * model}, not {self.world} ({self.world_from}): the global batch is "
                                 f"micro-batch × accumulation × data ranks{fix}")

    def stated(self, model: int, implied: int | None) -> list[Source]:
        """The world sizes the file states or implies; the first is used when --world-size is not given."""
        out = []
        if self.has("world_size"):  # accelerate's num_processes
            out.append(Source(("world_size",), int(self.get("world_size")),
                              f"{self.key('world_size')}; --world-size overrides it", binding=False))
        if self.has("node_procs") and self.has("num_machines"):  # torchrun's nproc_per_node × nnodes
            out.append(Source(("node_procs", "num_machines"), int(self.get("node_procs")) * int(self.get("num_machines")),
                              f"{self.key('node_procs')} × {self.key('num_machines')}; --world-size overrides it",
                              binding=False))
        per_copy = f" × {model} ranks per model copy" if model > 1 else ""
        if self.has("data_ranks"):  # DeepSpeed's data_parallel_size
            out.append(Source(("data_ranks",), int(self.get("data_ranks")) * model, self.key("data_ranks") + per_copy,
                              binding=True))
        if implied is not None:
            out.append(Source(("global",), implied * model, self.batch_text() + per_copy, binding=True))
        return out

    def implied(self) -> int | None:
        """The data ranks the batch sizes imply when the file gives all three: the global batch is micro-batch ×
        accumulation × data ranks (DeepSpeed asserts it: deepspeed/runtime/config.py's _batch_assertion)."""
        if not all(self.has(f) for f in ("global", "micro", "accum")) or self.get("global") == -1:
            return None
        glob, step = int(self.get("global")), int(self.get("micro")) * int(self.get("accum"))
        if glob % step:
            raise self.error("global", f"{self.batch_text(said=True)} is not a whole number of data ranks: the global "
                             "batch is micro-batch × accumulation × data ranks")
        return glob // step

    def batch_text(self, *, said: bool = False) -> str:
        """`global / (micro × accum)` as the file spells the keys (with their values when `said`)."""
        name = self.said if said else self.key
        return f"{name('global')} / ({name('micro')} × {name('accum')})"

    def needs_world(self, fact: str, what: str) -> StrategyError:
        """The error for a setting that depends on the world size when neither --world-size nor the file gives it,
        naming where the tool's files would state it (from its rules)."""
        keys = {f: next((r.key.replace("?", "_") for r in self.tool.rules if r.means == f), "") for f in (
            "world_size", "node_procs", "num_machines", "data_ranks", "global", "micro", "accum")}
        ways = [keys[f] for f in ("world_size", "data_ranks") if keys[f]]
        if keys["node_procs"] and keys["num_machines"]:
            ways.append(f"{keys['node_procs']} × {keys['num_machines']}")
        if keys["global"] and keys["micro"] and keys["accum"]:
            ways.append(f"{keys['global']} / ({keys['micro']} × {keys['accum']})")
        where = f", or {self.tool.world_hint}" if self.tool.world_hint else \
            f", or state it in the file ({'; '.join(ways)})" if ways else ""
        return self.error(fact, f"{what} needs the world size, which the file does not give: pass --world-size{where}")

    def world_text(self) -> str:
        return f"the world size {self.world} ({self.world_from})"
