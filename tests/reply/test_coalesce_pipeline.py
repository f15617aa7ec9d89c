"""BlockCoalescer (merging small blocks) and BlockReplyPipeline (deltas to blocks)."""

from __future__ import annotations

import asyncio

from clawpi.reply import BlockChunker, BlockCoalescer, ReplyPayload
from clawpi.reply.pipeline import BlockReplyPipeline


def test_small_blocks_merge_until_min_chars() -> None:
    sent: list[ReplyPayload] = []
    coalescer = BlockCoalescer(sent.append, min_chars=25, max_chars=100)
    coalescer.enqueue(ReplyPayload(text="Hello."))
    coalescer.enqueue(ReplyPayload(text="How are you?"))
    assert sent == []
    coalescer.enqueue(ReplyPayload(text="Fine."))
    assert [p.text for p in sent] == ["Hello.\n\nHow are you?\n\nFine."]
    assert not coalescer.has_held()


def test_merge_never_exceeds_max_chars() -> None:
    sent: list[ReplyPayload] = []
    coalescer = BlockCoalescer(sent.append, min_chars=50, max_chars=30)
    coalescer.enqueue(ReplyPayload(text="a" * 20))
    coalescer.enqueue(ReplyPayload(text="b" * 20))
    coalescer.flush()
    assert [p.text for p in sent] == ["a" * 20, "b" * 20]


def test_media_blocks_are_never_merged_and_keep_order() -> None:
    sent: list[ReplyPayload] = []
    coalescer = BlockCoalescer(sent.append, min_chars=100, max_chars=500)
    coalescer.enqueue(ReplyPayload(text="Before"))
    coalescer.enqueue(ReplyPayload(text="Chart", media_urls=["https://x.example/c.png"]))
    coalescer.enqueue(ReplyPayload(text="After"))
    coalescer.flush()
    assert [(p.text, p.media_urls) for p in sent] == [
        ("Before", []),
        ("Chart", ["https://x.example/c.png"]),
        ("After", []),
    ]


def test_idle_clamped_and_blank_blocks_ignored() -> None:
    sent: list[ReplyPayload] = []
    coalescer = BlockCoalescer(sent.append, idle_ms=60_000)
    assert coalescer.idle_ms == 5000
    coalescer.enqueue(ReplyPayload(text="   "))
    coalescer.flush()
    assert sent == []


async def test_idle_timer_flushes_held_blocks() -> None:
    sent: list[ReplyPayload] = []
    coalescer = BlockCoalescer(sent.append, min_chars=1000, max_chars=2000, idle_ms=5)
    coalescer.enqueue(ReplyPayload(text="Only this."))
    for _ in range(200):
        if sent:
            break
        await asyncio.sleep(0.01)
    assert [p.text for p in sent] == ["Only this."]


async def test_async_delivery_is_awaited_in_order() -> None:
    sent: list[str] = []

    async def deliver(payload: ReplyPayload) -> None:
        await asyncio.sleep(0.01 if payload.text == "one" else 0)
        sent.append(payload.text or "")

    coalescer = BlockCoalescer(deliver, min_chars=1, max_chars=100)
    coalescer.enqueue(ReplyPayload(text="one"))
    coalescer.enqueue(ReplyPayload(text="two"))
    await coalescer.wait_for_deliveries()
    assert sent == ["one", "two"]


def test_pipeline_gives_the_same_blocks_for_any_delta_size() -> None:
    text = (
        "Intro <think>hidden</think>paragraph one is here.\n\n"
        "```python\nprint('<think>kept</think>')\n```\n\n" + "More words follow here. " * 60
    )
    results = []
    for step in (1, 3, 64, len(text)):
        pipeline = BlockReplyPipeline(BlockChunker(min_chars=50, max_chars=200))
        blocks: list[str] = []
        for i in range(0, len(text), step):
            blocks += pipeline.push(text[i : i + step])
        blocks += pipeline.flush()
        assert not pipeline.has_buffered()
        assert all(len(b) <= 200 for b in blocks)
        assert "hidden" not in "".join(blocks)
        assert "print('<think>kept</think>')" in "".join(blocks)
        results.append(" ".join(blocks).split())
    assert all(r == results[0] for r in results)


def test_pipeline_without_chunker_flushes_whole_text() -> None:
    pipeline = BlockReplyPipeline(None)
    assert list(pipeline.push("Hello <thi")) == []
    assert list(pipeline.push("nk>x</think> world")) == []
    assert pipeline.flush() == ["Hello  world"]
    assert pipeline.flush() == []


def test_pipeline_message_end_mode_only_emits_on_flush() -> None:
    pipeline = BlockReplyPipeline(BlockChunker(min_chars=5, max_chars=20), stream=False)
    for word in ["one", "two", "three", "four", "five", "six", "seven"]:
        assert list(pipeline.push(word + " ")) == []
    assert pipeline.flush() == ["one two three four", "five six seven"]


def test_pipeline_enforces_final_tag_and_resets() -> None:
    pipeline = BlockReplyPipeline(BlockChunker(min_chars=5, max_chars=100), enforce_final_tag=True)
    pipeline.push("draft <final>Answer.</final>")
    assert pipeline.flush() == ["Answer."]
    pipeline.push("<think>open")
    pipeline.reset()
    pipeline.push("<final>Fresh.</final>")
    assert pipeline.flush() == ["Fresh."]
