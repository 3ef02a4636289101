"""docs/importing.md's mapping table for `strategy import`, printed from the importers' own rules (`strategy docs --imports`)."""

from __future__ import annotations

import importlib

from .common import Rule, Tool, show
from .facts import FACTS

__all__ = ["markdown"]

_FILES = {"deepspeed": "DeepSpeed JSON (ds_config.json)", "torchtitan": "torchtitan TOML (train_configs/*.toml)",
          "accelerate": "accelerate YAML (accelerate config)", "megatron": "Megatron-LM launcher scripts (--flag value)",
          "paddlenlp": "PaddleNLP trainer arguments (llm/config/*/…_argument.json, launch scripts)",
          "paddleformers": "PaddleFormers 1.x trainer arguments (paddleformers-cli YAML)"}


def markdown() -> str:
    """Every tool's rules as a Markdown table, in the order they are tried (the first whose key matches applies);
    rules without a counterpart that give the same reason share a row."""
    out: list[str] = []
    for kind in _FILES:
        tool: Tool = importlib.import_module(f".{kind}", __package__).TOOL
        rows: dict[tuple[str, str], list[str]] = {}  # (becomes, sources) -> keys, in first-seen order
        for rule in tool.rules:
            rows.setdefault((_becomes(rule), rule.cite) if rule.means or rule.include else (_becomes(rule), ""),
                            []).append(rule.key)
        out += [f"<details><summary>{_FILES[kind]}: {len(tool.rules)} rules</summary>", "",
                "| key | becomes | source |", "|---|---|---|"]
        for (becomes, cite), keys in rows.items():
            cites = cite.split() if cite else sorted({r.cite for r in tool.rules if r.key in keys and not r.means},
                                                     key=list(tool.sources).index)
            links = ", ".join(f"[{_label(tool.sources[c])}]({tool.sources[c]})" for c in cites)
            out.append(f"| {', '.join(f'`{k}`' for k in keys)} | {_escape(becomes)} | {links} |")
        notes = []
        if tool.auto:
            notes.append('A value of "auto" is unresolved, whatever the key: the Trainer or accelerate fills it in at '
                         "launch.")
        if tool.defaults:
            notes.append(f"Keys left out take {tool.name}'s defaults: " +
                         ", ".join(f"`{k} = {show(v)}`" for k, v in tool.defaults) + ".")
        if tool.scaler:
            notes.append("float16 brings the tool's loss scaler: " +
                         ", ".join(f"`{k}: {v:.0f}`" if float(v).is_integer() else f"`{k}: {v}`"
                                   for k, v in tool.scaler.items()) + " (amp_configs).")
        out += [""] + ([" ".join(notes), ""] if notes else []) + ["</details>", ""]
    return "\n".join(out)


def _label(url: str) -> str:
    """A link's text: the anchor of a documentation page, else the file or page name."""
    if "#" in url:
        return url.rsplit("#", 1)[1].rsplit(".", 1)[-1]
    return url.rstrip("/").rsplit("/", 1)[1]


def _becomes(rule: Rule) -> str:
    if rule.include is not None:
        return f"imports the {rule.include} file it names (relative to this one), its keys prefixed by this key"
    if rule.means is None:
        return f"no counterpart: {rule.reason}"
    facts = rule.means if isinstance(rule.means, tuple) else (rule.means,)
    text = "; ".join(FACTS.get(f, f) for f in facts)  # a fact named by its field path sets that field
    describe = rule.read.describe if rule.read is not None else ""
    note = f" ({rule.reason})" if rule.reason else ""
    return f"{text}{f': {describe}' if describe else ''}{note}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")
