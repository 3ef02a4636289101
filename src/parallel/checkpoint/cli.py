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
        "checkpoint", help="show what a checkpoint holds, or export the full model",
        description="Print a checkpoint's step, the saved strategy and its layout, and each tensor's global shape.\n"
                    "--export writes the full (unparallelised) model as safetensors, loading the shards in this one\n"
                    "process (no ranks), for inference or upload.",
        epilog="example:\n  strategy checkpoint out/demo/checkpoint --export model.safetensors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", metavar="DIR", type=Path)
    p.add_argument("--export", metavar="OUT.safetensors", type=Path, help="write the full model's state dict here")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
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
