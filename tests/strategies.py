"""Hypothesis helpers shared by tests of things fed a text piece by piece."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st


def fragments(draw: st.DrawFn, text: str, max_cuts: int) -> list[str]:
    """`text` cut at up to `max_cuts` drawn places: the non-empty pieces, in order."""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=max_cuts))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
