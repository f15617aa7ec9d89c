"""Text matching and diffs for `edit`: exact first, then pi's normalised fallback."""

from __future__ import annotations

import difflib
import unicodedata

DIFF_CONTEXT_LINES = 4

_QUOTES = {
    **dict.fromkeys(range(0x2018, 0x201C), "'"),
    **dict.fromkeys(range(0x201C, 0x2020), '"'),
    **dict.fromkeys([*range(0x2010, 0x2016), 0x2212], "-"),
    **dict.fromkeys([0x00A0, *range(0x2002, 0x200B), 0x202F, 0x205F, 0x3000], " "),
}


def detect_line_ending(text: str) -> str:
    """CRLF when the first newline of the file is preceded by a CR."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def restore_line_endings(text: str, ending: str) -> str:
    return text.replace("\n", ending) if ending == "\r\n" else text


def fuzzy_normalize(text: str) -> str:
    """NFKC, trailing whitespace stripped per line, smart quotes, dashes and spaces made plain."""
    text = unicodedata.normalize("NFKC", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text.translate(_QUOTES)


def render_diff(old: str, new: str) -> tuple[str, int | None]:
    """pi's numbered line diff and the first changed line of the new text.

    Changed lines are `-<old n>` / `+<new n>`; unchanged lines ` <old n>`, at most 4 before and
    after each change (all of them between two nearby changes), gaps shown as ` <pad> ...`.
    """
    old_lines = old.split("\n")
    new_lines = new.split("\n")
    width = len(str(max(len(old_lines), len(new_lines))))
    gap = f" {' ' * width} ..."
    out: list[str] = []
    first_changed: int | None = None
    opcodes = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes()
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag != "equal":
            if first_changed is None:
                first_changed = j1 + 1
            out.extend(f"-{str(k + 1).rjust(width)} {old_lines[k]}" for k in range(i1, i2))
            out.extend(f"+{str(k + 1).rjust(width)} {new_lines[k]}" for k in range(j1, j2))
            continue
        after_change = index > 0
        before_change = index < len(opcodes) - 1
        start, end = i1, i2
        if not after_change and end - start > DIFF_CONTEXT_LINES:
            start = end - DIFF_CONTEXT_LINES
        trimmed_end = end
        if not before_change and trimmed_end - start > DIFF_CONTEXT_LINES:
            trimmed_end = start + DIFF_CONTEXT_LINES
        if start > i1:
            out.append(gap)
        out.extend(f" {str(k + 1).rjust(width)} {old_lines[k]}" for k in range(start, trimmed_end))
        if trimmed_end < end:
            out.append(gap)
    return "\n".join(out), first_changed
