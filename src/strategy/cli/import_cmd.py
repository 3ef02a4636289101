"""`import`: a DeepSpeed, torchtitan, accelerate, Megatron, PaddleNLP or PaddleFormers config as a strategy, with a line
per setting saying why."""

from __future__ import annotations

import argparse
import sys

from ..formats.codec import format_for
from .common import STDIO, positive, subparser, write

__all__ = ["register"]

_KINDS = ("deepspeed", "torchtitan", "accelerate", "megatron", "paddlenlp", "paddleformers")  # strategy.importers.KINDS, not imported at start-up


def register(sub: argparse._SubParsersAction) -> None:
    p = subparser(
        sub, "import", "turn a DeepSpeed, torchtitan, accelerate, Megatron or PaddleNLP config into a strategy",
        "Read another tool's config (DeepSpeed JSON, torchtitan TOML, accelerate YAML, a Megatron-LM launcher\n"
        "script, PaddleNLP JSON or PaddleFormers YAML trainer arguments) and write the strategy it describes:\n"
        "prototxt on standard output, or OUT in the format its\n"
        "extension names (written atomically). Standard error gets one line per setting of the file:\n"
        "`key = value -> fields`, `-> nothing to set: reason`, `-> no counterpart: reason` or\n"
        "`-> unresolved: reason`. What depends on the number of ranks (the data ranks ZeRO or FSDP shards\n"
        "over, the accumulation a global batch sets) needs --world-size, unless the file gives it: accelerate's\n"
        "num_processes, torchrun's --nproc_per_node × --nnodes, DeepSpeed's train_batch_size /\n"
        "(train_micro_batch_size_per_gpu × gradient_accumulation_steps); without either it is exit 1.",
        "strategy import ds_config.json --world-size 8 -o strategy.yaml",
    )
    p.add_argument("input", metavar="FILE", help="the config to import")
    p.add_argument("--from", dest="kind", choices=_KINDS, help="the tool (default: told from the file)")
    p.add_argument("--world-size", type=positive, metavar="N", help="number of ranks (default: the file's own, if any)")
    p.add_argument("--command", type=positive, metavar="K",
                   help="a launch script's K-th training command (default: the first; the report lists them)")
    p.add_argument("-o", "--output", metavar="OUT", default=STDIO, help="output file (default: standard output)")
    p.set_defaults(run=_import)


def _import(args: argparse.Namespace) -> int:
    from ..importers import import_config, report

    if args.output != STDIO:
        format_for(args.output)  # an unknown extension fails before anything is read
    imported = import_config(args.input, kind=args.kind, world_size=args.world_size, command=args.command)
    write(imported.strategy, args.output)
    print("\n".join(report(imported)), file=sys.stderr)
    return 0
