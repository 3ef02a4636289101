"""Text folded to a terminal's width for `explain`: lines that continue indented, and a table whose last cells
continue under their column (or, where that column is narrow, below the row)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["WIDTH", "fill", "fold", "table"]

WIDTH = 100  # an ordinary terminal's columns

# The last column narrower than this continues below the row at HANG instead: a few words a line under a long
# path would take more lines than the rest of the table.
MIN_LAST = 40
HANG = 4
# A middle column (the values) gives up columns to the last one down to MIN_MIDDLE, its cells continuing under it;
# where that is not enough, it is at most MAX_MIDDLE wide.
MIN_MIDDLE = 16
MAX_MIDDLE = 30


def fill(words: Sequence[str], first: str = "", rest: str = "", *, width: int = WIDTH) -> list[str]:
    """`words` joined by spaces into lines of at most `width` (a word longer than a line stands alone on one), the
    first line after `first`, the others after `rest`."""
    lines: list[str] = []
    line, empty = first, True
    for word in words:
        if not empty and len(line) + 1 + len(word) > width:
            lines.append(line)
            line, empty = rest, True
        line += word if empty else " " + word
        empty = False
    return lines + [line]


def fold(line: str, *, width: int = WIDTH) -> list[str]:
    """A line of prose in lines of at most `width`, each after the first indented HANG more than it: deeper than the
    lines a section nests under it (two more), so that they read apart."""
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = " " * (len(line) - len(body))
    return fill(body.split(" "), indent, indent + " " * HANG, width=width)


def table(rows: Sequence[Sequence[str]], *, width: int = WIDTH) -> list[str]:
    """Rows of cells in columns two spaces apart, within `width`: the first column as wide as its widest cell, the
    last one what is left, at least MIN_LAST where the widest middle column can narrow for it (its cells continuing
    under it) down to MIN_MIDDLE and its longest word. A last cell too long for its column continues under it;
    where the column is narrower than MIN_LAST, the cell goes below the row at HANG instead (all but the words
    before its first ": ", which say what kind of effect it is), and no middle column is wider than MAX_MIDDLE."""
    n = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(n - 1)]
    widest = max(range(1, n - 1), key=lambda i: widths[i])
    over = sum(widths) + 2 * (n - 1) + MIN_LAST - width  # what the last column lacks of MIN_LAST
    word = max(len(w) for r in rows for w in r[widest].split(" "))  # cut no word that could stay whole
    if 0 < over <= widths[widest] - max(MIN_MIDDLE, min(word, MAX_MIDDLE)):
        widths[widest] -= over
    elif over > 0:
        widths[1:] = [min(w, MAX_MIDDLE) for w in widths[1:]]
    start = sum(widths) + 2 * (n - 1)  # where the last column begins
    under = width - start >= MIN_LAST
    lines = []
    for row in rows:
        cells = [_wrap(cell, w) for cell, w in zip(row, widths)]
        last, tail = row[-1], []
        if last and not under and start + len(last) > width:  # its kind ("no effect:") on the row, the rest below it
            kind, colon, why = last.partition(": ")
            last = kind + ":" if colon and start + len(kind) < width else ""
            tail = fill((why if last else row[-1]).split(" "), " " * HANG, " " * HANG, width=width)
        cells.append(fill(last.split(" "), width=width - start))
        for k in range(max(len(c) for c in cells)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths + [0])]
            lines.append("  ".join(parts).rstrip())
        lines += tail
    return lines


def _wrap(cell: str, width: int) -> list[str]:
    """A cell in lines of at most `width`: at spaces where it has them, else cut."""
    if len(cell) <= width:
        return [cell]
    return [line[i:i + width] for line in fill(cell.split(" "), width=width) for i in range(0, len(line), width)]
