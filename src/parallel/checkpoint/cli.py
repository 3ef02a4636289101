"""`strategy checkpoint DIR [--export OUT.safetensors]`: what a checkpoint holds, and the full model out of it.

Registered with the `strategy` command through the `strategy.commands` entry point, so the `strategy`
package itself never imports torch. Runs in one process: no ranks are started.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "checkpoint", help="show what a checkpoint holds, export the full model, or import a Paddle run's",
        description="Print a checkpoint's step, the saved strategy and its layout, and each tensor's global shape.\n"
                    "--export writes the full (unparallelised) model as safetensors, loading the shards in this one\n"
                    "process (no ranks), for inference or upload.\n"
                    "`checkpoint import --from paddle SRC -o OUT` makes a PaddleFormers run's checkpoint (weights,\n"
                    "AdamW state, tensor-parallel shards) this project's, resumed by parallel.load at any layout.",
        epilog="example:\n  strategy checkpoint out/demo/checkpoint --export model.safetensors\n"
               "  strategy checkpoint import --from paddle run/checkpoint-2000 -o ckpt/step_2000 --lr 3e-4",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", metavar="DIR", type=Path, help="a checkpoint, or `import` (then see its --help)")
    p.add_argument("--export", metavar="OUT.safetensors", type=Path, help="write the full model's state dict here")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(run=_run)


def _import_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strategy checkpoint import",
        description="A Paddle run's checkpoint as this project's: SRC holds model_state.pdparams (or its shards\n"
                    "model_state.tp00.pdparams, ...) and config.json; the AdamW state comes from optimizer.pdopt (or\n"
                    "its shards) there, or --optimizer. One line per Paddle key says what it became.",
        epilog="example:\n  strategy checkpoint import --from paddle run/checkpoint-2000 -o ckpt/step_2000 --lr 3e-4 "
               "--hf hf_model/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source_kind", required=True, choices=["paddle"], help="the framework that wrote SRC")
    p.add_argument("src", metavar="SRC", type=Path)
    p.add_argument("-o", "--output", required=True, type=Path, metavar="OUT", help="the checkpoint directory to write")
    p.add_argument("--config", type=Path, help="the model's config.json (default SRC/config.json)")
    p.add_argument("--optimizer", type=Path, help="optimizer.pdopt, or the directory of its shards")
    p.add_argument("--lr", type=float, default=1e-3, help="the run's learning rate (default Paddle AdamW's 1e-3)")
    p.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.999), metavar=("BETA1", "BETA2"))
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--hf", type=Path, metavar="DIR", help="also write a Hugging Face directory (safetensors, config)")
    return p


def _import(argv: list[str]) -> int:
    from strategy import StrategyError

    from .paddle.convert import import_paddle

    args = _import_parser().parse_args(argv)
    try:
        ckpt = import_paddle(args.src, args.output, config=args.config, optimizer=args.optimizer, lr=args.lr,
                             betas=tuple(args.betas), eps=args.eps, weight_decay=args.weight_decay, hf=args.hf)
    except StrategyError as e:
        print(f"strategy checkpoint import: {e}", file=sys.stderr)
        return 1
    for line in ckpt.lines:
        print(line)
    print(f"wrote {args.output} (step {ckpt.step})" + (f" and {args.hf}" if args.hf else ""))
    return 0


def _run(args: argparse.Namespace) -> int:
    if str(args.directory) == "import":
        return _import(args.rest)
    if args.rest:  # (what follows DIR: its options)
        after = argparse.ArgumentParser(prog=f"strategy checkpoint {args.directory}")
        after.add_argument("--export", metavar="OUT.safetensors", type=Path)
        args.export = after.parse_args(args.rest).export or args.export
    from torch.distributed.checkpoint import FileSystemReader

    from .save_load import describe_layout, read_marker

    try:
        meta = read_marker(args.directory.absolute())
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    tensors = FileSystemReader(str(args.directory)).read_metadata().state_dict_metadata
    if args.export:
        return _export(args.directory, args.export)
    layout = meta["layout"]
    print(f"checkpoint: {args.directory}")
    print(f"step: {meta['step']}")
    print(f"layout: {describe_layout(layout)}")
    if meta["extra"] is not None:
        print(f"extra: {json.dumps(meta['extra'])}")
    print("strategy:")
    print("  " + meta["strategy"].rstrip().replace("\n", "\n  "))
    print("tensors (global shapes):")
    width = max((len(k) for k in tensors), default=0)
    for key, value in sorted(tensors.items()):
        size, properties = getattr(value, "size", None), getattr(value, "properties", None)
        dtype = str(getattr(properties, "dtype", "")).removeprefix("torch.")
        shown = f"{list(size)} {dtype}" if size is not None else "(object)"
        print(f"  {key.ljust(width)}  {shown}")
    return 0


def _export(directory: Path, out: Path) -> int:
    """The model's full tensors, read in one process (DCP's no_dist load), written atomically as safetensors."""
    import os
    import tempfile

    from safetensors.torch import save_file
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    state: dict = {}
    _load_state_dict(state, storage_reader=FileSystemReader(str(directory)), planner=_EmptyStateDictLoadPlanner(), no_dist=True)
    model = {k: v.contiguous() for k, v in state.get("model", {}).items()}
    out = out.absolute()
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        save_file(model, tmp, metadata={"format": "pt", "source": str(directory)})
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {out}: {len(model)} tensors, {sum(t.numel() for t in model.values()):,} parameters")
    return 0
