"""Text deltas in, finished visible blocks out: thinking tags stripped, then chunked.

Most deltas cannot finish a block: until the buffered text plus the new deltas reach the
chunker's `min_chars`, no break may be taken. Those deltas are only collected, and stripped and
chunked together once they could matter, so a stream costs little more per delta than
concatenating it. Both steps give the same text however the input is cut, so deferring the work
never changes what the user reads, and it adds no delay: a block is cut as soon as it could be.
"""

from __future__ import annotations

from collections.abc import Sequence

from clawpi.reply.chunker import BlockChunker
from clawpi.reply.tags import BlockTagState, finish_block_tags, strip_block_tags

_NONE: tuple[str, ...] = ()
_STOPS = frozenset(".!?")


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
        self._threshold = self._compute_threshold()

    def _compute_threshold(self) -> int:
        chunker = self.chunker
        if not self.stream or chunker is None:
            self._hard_threshold = 1 << 62
            return 1 << 62
        self._hard_threshold = max(1, chunker.max_chars - chunker.size)
        if chunker.flush_on_paragraph:
            return 1
        return max(1, chunker.min_chars - chunker.size)

    def push(self, delta: str) -> Sequence[str]:
        """Take one raw delta; the blocks that became ready (usually none)."""
        self._raw.append(delta)
        self._raw_len += len(delta)
        if self._raw_len < self._threshold:
            return _NONE
        # Past min_chars a block ends only at a newline or a sentence end (or at max_chars):
        # a delta with neither cannot finish one, so it waits with the others.
        after_stop = self._after_stop
        self._after_stop = delta[-1:] in _STOPS
        if (
            self._raw_len < self._hard_threshold
            and "\n" not in delta
            and not (after_stop and delta[:1].isspace())
            and "." not in delta
            and "!" not in delta
            and "?" not in delta
        ):
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
