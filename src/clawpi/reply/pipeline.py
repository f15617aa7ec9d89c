"""Text deltas in, finished visible blocks out: thinking tags stripped, then chunked.

Most deltas cannot finish a block: none before the text reaches the chunker's `min_chars`, none
without a newline or a sentence end past that point, none inside fenced code until a closing
line may have arrived (short of `max_chars`). Those deltas are only collected, and stripped and
chunked together once they could matter, so a stream costs little more per delta than
concatenating it. The tests are upper bounds on the visible text (stripping only removes text;
held-back tag text counts), so every block comes out after the very delta that stripping and
chunking each delta on its own would give it: deferring never changes what the user reads or when.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clawpi.reply.chunker import BlockChunker
from clawpi.reply.tags import BlockTagState, finish_block_tags, strip_block_tags

_NONE: tuple[str, ...] = ()
_STOPS = frozenset(".!?")
_WHITESPACE = re.compile(r"\s")


class BlockReplyPipeline:
    """One message's block replies.

        pipeline = BlockReplyPipeline(BlockChunker(800, 1200))
        for delta in deltas:
            for block in pipeline.push(delta): send(block)
        for block in pipeline.flush(): send(block)   # end of the text block or before a tool

    Without a chunker every `flush()` gives the visible text so far as one block. With
    `stream=False` blocks only come out of `flush()` (the `message_end` break).
    """

    def __init__(
        self,
        chunker: BlockChunker | None = None,
        enforce_final_tag: bool = False,
        stream: bool = True,
    ) -> None:
        self.chunker = chunker
        self.enforce_final_tag = enforce_final_tag
        self.stream = stream and chunker is not None
        self.tags = BlockTagState()
        self._raw: list[str] = []
        self._raw_len = 0
        self._visible: list[str] = []
        self._after_stop = False
        self._hard_threshold = 1 << 62
        self._min_threshold = 1 << 62
        self._base = 0
        self._min_chars = 0
        self._fence_char = ""
        self._maybe_hidden = False
        self._threshold = self._compute_threshold()

    def _compute_threshold(self) -> int:
        """Raw characters to collect before a block could end (from what is buffered now)."""
        chunker = self.chunker
        self._base = 0
        self._min_chars = 0
        self._fence_char = ""
        if not self.stream or chunker is None:
            self._hard_threshold = self._min_threshold = 1 << 62
            return 1 << 62
        # Visible text still to come is at most the held-back tag text plus the raw deltas:
        # these bounds depend only on what is buffered, never on when it was last looked at.
        tags = self.tags
        pending = tags.pending
        self._maybe_hidden = (
            tags.thinking or bool(pending) or (self.enforce_final_tag and not tags.final)
        )
        # Only a stop the reader will see can become a break: hidden text after it does not.
        self._after_stop = chunker.ends_with_stop()
        base = chunker.size + len(pending)
        self._hard_threshold = max(1, chunker.max_chars - base)
        if chunker.flush_on_paragraph:
            self._min_threshold = 1
        else:
            self._base = base
            self._min_chars = chunker.min_chars
            self._min_threshold = max(1, chunker.min_chars - base)
        if pending:
            # Held-back text (a partial tag, a run of backticks) may be released as text by
            # any next delta, and it may hold a break: look at the next delta whatever it is.
            self._hard_threshold = 0
            return 0
        fence_char = chunker.open_fence_marker()
        if fence_char:
            # Inside fenced code only its closing line (or max_chars) lets a block end, and
            # that line needs the fence's character: until one arrives, only size matters.
            self._fence_char = fence_char
            return self._hard_threshold
        return self._min_threshold

    def push(self, delta: str) -> Sequence[str]:
        """Take one raw delta; the blocks that became ready (usually none)."""
        self._raw.append(delta)
        before = self._raw_len
        self._raw_len = raw_len = before + len(delta)
        if raw_len < self._threshold:
            if not self._fence_char or self._fence_char not in delta:
                return _NONE
            # Text that may close the fence: back to the usual bounds.
            self._fence_char = ""
            self._threshold = self._min_threshold
            self._after_stop = False
            if raw_len < self._threshold:
                return _NONE
        # Past min_chars a block ends only at a newline or a sentence end (or at max_chars):
        # a delta with neither cannot finish one, so it waits with the others. Nor can one
        # whose last break lies before min_chars: stripping only removes text, so a break's
        # place in the block is at most where it sits in the raw text after what is buffered.
        # A stop is a break once whitespace follows it in the visible text; tags (or reasoning)
        # between them vanish, so after a "<" the stop stays open until something is looked at.
        after_stop = self._after_stop
        if "<" in delta:
            self._maybe_hidden = True
        hidden = self._maybe_hidden
        if delta[-1:] in _STOPS:
            self._after_stop = True
        elif not hidden:
            self._after_stop = False
        elif not after_stop:
            self._after_stop = "." in delta or "!" in delta or "?" in delta
        if raw_len < self._hard_threshold:
            if "\n" in delta or "." in delta or "!" in delta or "?" in delta:
                last = max(delta.rfind("\n"), delta.rfind("."), delta.rfind("!"), delta.rfind("?"))
            elif after_stop and (_WHITESPACE.search(delta) if hidden else delta[:1].isspace()):
                last = -1  # the break is the stop just before this delta
            else:
                return _NONE
            if self._base + before + last + 1 < self._min_chars:
                return _NONE
        return self._process(False)

    def flush(self) -> list[str]:
        """Everything buffered, as blocks (held-back partial tags are released as text)."""
        return list(self._process(True))

    def has_buffered(self) -> bool:
        if self._raw_len or self._visible or self.tags.pending:
            return True
        return self.chunker is not None and self.chunker.has_buffered()

    def reset(self) -> None:
        self._raw.clear()
        self._raw_len = 0
        self._visible.clear()
        self.tags.reset()
        if self.chunker is not None:
            self.chunker.reset()
        self._after_stop = False
        self._threshold = self._compute_threshold()

    def _process(self, force: bool) -> Sequence[str]:
        text = "".join(self._raw) if len(self._raw) != 1 else self._raw[0]
        self._raw.clear()
        self._raw_len = 0
        visible = strip_block_tags(text, self.tags, self.enforce_final_tag) if text else ""
        if force:
            visible += finish_block_tags(self.tags, self.enforce_final_tag)
        chunker = self.chunker
        if chunker is None:
            if visible:
                self._visible.append(visible)
            if not force:
                return _NONE
            whole = "".join(self._visible).strip()
            self._visible.clear()
            return [whole] if whole else []
        if visible:
            chunker.append(visible)
        blocks = chunker.drain(force=True) if force else chunker.drain() if self.stream else _NONE
        self._threshold = self._compute_threshold()
        return blocks
