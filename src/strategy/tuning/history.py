"""The tune's history: one JSON line per event, appended as it happens, so a tune that dies (killed, a node lost) loses
nothing it finished and a rerun goes on from it.

Each trial writes a "start" line when it is launched and an "end" line with its result. A trial's `key` is a hash of
its strategy text and its context (the model's config, sequence length, global batch, world size, device, torch
version): a rerun skips every key that ended, retries once a key that started but never ended (the tune was killed
during it), and leaves out, saying why, the entries of another context (a changed torch version or model config
voids them). The lines follow `history.schema.json` (beside this module; docs/tune.md shows it).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["History", "context_key", "trial_key", "SCHEMA_PATH"]

SCHEMA_PATH = Path(__file__).with_name("history.schema.json")
VERSION = 1


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def context_key(context: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(context).encode()).hexdigest()


def trial_key(strategy_text: str, context: Mapping[str, Any]) -> str:
    """The hash that names a trial: its strategy text and everything its measurement depends on. Comment lines are
    left out: the plan writes its predictions there, which move with each probe of the device."""
    settings = "\n".join(line for line in strategy_text.splitlines() if not line.lstrip().startswith("#"))
    return hashlib.sha256((settings + "\0" + _canonical(context)).encode()).hexdigest()


@dataclass
class _Entry:
    starts: int = 0
    ends: list[dict[str, Any]] = field(default_factory=list)  # a trial measured again (a close contender) ends twice
    trial: int = 0  # its first number


@dataclass
class History:
    """The history file of one tune directory, read at start; `append` adds a line (flushed and synced)."""

    path: Path
    context: dict[str, Any]
    entries: dict[str, _Entry] = field(default_factory=dict)
    voided: dict[str, str] = field(default_factory=dict)  # key -> why it does not count here
    damaged: list[int] = field(default_factory=list)  # lines that are not JSON (a write cut by a crash), by number

    @classmethod
    def open(cls, path: str | os.PathLike[str], context: Mapping[str, Any]) -> History:
        h = cls(Path(path), dict(context))
        if not h.path.exists():
            return h
        text = h.path.read_text()
        if text and not text.endswith("\n"):  # a write cut by a crash: the next line starts on a line of its own
            with open(h.path, "a") as f:
                f.write("\n")
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                h.damaged.append(number)
                continue
            if record.get("event") not in ("start", "end"):
                continue
            key = record["key"]
            if record.get("context") != h.context:
                h.voided[key] = _difference(record.get("context") or {}, h.context)
                continue
            entry = h.entries.setdefault(key, _Entry())
            entry.trial = entry.trial or record.get("trial", 0)
            if record["event"] == "start":
                entry.starts += 1
            else:
                entry.ends.append(record)
        for key in h.entries:
            h.voided.pop(key, None)  # (measured again here since)
        return h

    def finished(self, key: str) -> dict[str, Any] | None:
        """The first "end" record of `key` in this context, if it has one."""
        entry = self.entries.get(key)
        return entry.ends[0] if entry and entry.ends else None

    def results(self, key: str) -> list[dict[str, Any]]:
        """Every result of `key` in this context, in the order they ended."""
        entry = self.entries.get(key)
        return [end["result"] for end in entry.ends] if entry else []

    def interrupted(self, key: str) -> int:
        """How many times `key` started without ending (the tune was killed during it)."""
        entry = self.entries.get(key)
        return entry.starts - len(entry.ends) if entry else 0

    @property
    def runs(self) -> int:
        """The trials that ended in this context, repeats included."""
        return sum(len(e.ends) for e in self.entries.values())

    @property
    def trials(self) -> int:
        """The highest trial number recorded in this context."""
        return max((e.trial for e in self.entries.values()), default=0)

    def start(self, key: str, trial: int, strategy_text: str, layout: Mapping[str, Any],
              predicted: Mapping[str, Any], *, repeat: int | None = None) -> None:
        """`repeat`: the how-manieth run of a layout measured again (2, 3: a close contender of the best)."""
        record = {"event": "start", "key": key, "trial": trial, "strategy": strategy_text, "layout": dict(layout),
                  "predicted": dict(predicted)}
        self._append(record if repeat is None else record | {"repeat": repeat})
        entry = self.entries.setdefault(key, _Entry())
        entry.starts += 1
        entry.trial = entry.trial or trial

    def end(self, key: str, trial: int, result: Mapping[str, Any]) -> dict[str, Any]:
        record = self._append({"event": "end", "key": key, "trial": trial, "result": dict(result)})
        self.entries.setdefault(key, _Entry()).ends.append(record)
        return record

    def _append(self, record: dict[str, Any]) -> dict[str, Any]:
        """One line, written with a single write to a file opened for appending (whole, or not at all on a local
        disk), then synced: a kill between lines loses no line."""
        full = {"version": VERSION, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record, "context": self.context}
        data = (json.dumps(full, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return full


def _difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Why an entry of context `old` does not count in `new`: the fields that changed."""
    changed = [f"{name} {old.get(name)!r} -> {new.get(name)!r}" for name in sorted(set(old) | set(new))
               if old.get(name) != new.get(name)]
    return ", ".join(changed) or "another context"
