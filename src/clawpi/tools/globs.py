"""Glob and .gitignore matching for grep and find (no ripgrep/fd binary needed)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterator

SKIPPED_DIRS = frozenset({".git"})


def glob_to_regex(pattern: str) -> str:
    """Translate a glob (`*`, `**`, `?`, `[...]`, `{a,b}`) to a regex over `/`-separated paths."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith(("[!", "[^"), i) else i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        elif c == "{":
            end = pattern.find("}", i)
            if end < 0:
                out.append(re.escape(c))
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(glob_to_regex(o) for o in options) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher for a path relative to the search root: basename unless the glob has a `/`."""
    anchored = "/" in pattern.strip("/")
    regex = re.compile(glob_to_regex(pattern.lstrip("/") if anchored else pattern) + r"\Z")
    if anchored:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rsplit("/", 1)[-1]) is not None


@dataclasses.dataclass(frozen=True, slots=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    base: str


def _parse_gitignore(text: str, base: str) -> list[_Rule]:
    rules = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        if line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        body = glob_to_regex(line.lstrip("/"))
        regex = re.compile(body if anchored else f"(?:.*/)?{body}")
        rules.append(_Rule(regex, negated, dir_only, base))
    return rules


class IgnoreRules:
    """.gitignore rules collected while walking down the tree (later rules win)."""

    def __init__(self, rules: list[_Rule] | None = None) -> None:
        self._rules = rules or []

    def extended(self, directory: str, rel_dir: str) -> IgnoreRules:
        path = os.path.join(directory, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            return self
        return IgnoreRules(self._rules + _parse_gitignore(text, rel_dir))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        result = False
        for rule in self._rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                if not rel.startswith(rule.base + "/"):
                    continue
                local = rel[len(rule.base) + 1 :]
            else:
                local = rel
            if rule.regex.fullmatch(local):
                result = not rule.negated
        return result


def walk(root: str, *, check: Callable[[], None] | None = None) -> Iterator[tuple[str, str, bool]]:
    """Yield `(absolute, relative, is_dir)` under `root`, sorted, hidden files included,
    .gitignore respected, symlinks not followed, `.git` skipped."""
    stack: list[tuple[str, str, IgnoreRules]] = [(root, "", IgnoreRules().extended(root, ""))]
    while stack:
        directory, rel_dir, rules = stack.pop()
        if check is not None:
            check()
        try:
            with os.scandir(directory) as iterator:
                entries = sorted(iterator, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and entry.name in SKIPPED_DIRS:
                continue
            if rules.ignored(rel, is_dir):
                continue
            yield entry.path, rel, is_dir
            if is_dir:
                subdirs.append((entry.path, rel, rules.extended(entry.path, rel)))
        stack.extend(reversed(subdirs))
