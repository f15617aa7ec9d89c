"""Chat replies from an agent's event stream: blocks, tags, directives, payloads."""

from clawpi.reply.chunker import BlockChunker, BreakPreference
from clawpi.reply.coalesce import BlockCoalescer
from clawpi.reply.directives import (
    SILENT_REPLY_TOKEN,
    ReplyDirectives,
    StreamingDirectiveParser,
    is_silent_reply_text,
    parse_reply_directives,
    split_media_from_output,
)
from clawpi.reply.payloads import (
    ReplyPayload,
    ToolErrorInfo,
    ToolMeta,
    build_embedded_run_payloads,
    reply_dedupe_key,
)
from clawpi.reply.pipeline import BlockReplyPipeline
from clawpi.reply.subscribe import (
    BlockReplyChunking,
    EmbeddedSubscription,
    EventSource,
    PartialReply,
    UsageTotals,
    subscribe_embedded_session,
)
from clawpi.reply.tags import (
    BlockTagState,
    extract_thinking_from_tagged_text,
    finish_block_tags,
    strip_block_tags,
    strip_thinking_tags,
)
from clawpi.reply.text import (
    extract_assistant_text,
    extract_assistant_thinking,
    extract_thinking_from_tagged_stream,
    format_reasoning_message,
    infer_tool_meta_from_args,
    promote_thinking_tags_to_blocks,
    strip_downgraded_tool_call_text,
)
from clawpi.reply.user_text import format_assistant_error_text, sanitize_user_facing_text

__all__ = [
    "SILENT_REPLY_TOKEN",
    "BlockChunker",
    "BlockCoalescer",
    "BlockReplyChunking",
    "BlockReplyPipeline",
    "BlockTagState",
    "BreakPreference",
    "EmbeddedSubscription",
    "EventSource",
    "PartialReply",
    "ReplyDirectives",
    "ReplyPayload",
    "StreamingDirectiveParser",
    "ToolErrorInfo",
    "ToolMeta",
    "UsageTotals",
    "build_embedded_run_payloads",
    "extract_assistant_text",
    "extract_assistant_thinking",
    "extract_thinking_from_tagged_stream",
    "extract_thinking_from_tagged_text",
    "finish_block_tags",
    "format_assistant_error_text",
    "format_reasoning_message",
    "infer_tool_meta_from_args",
    "is_silent_reply_text",
    "parse_reply_directives",
    "promote_thinking_tags_to_blocks",
    "reply_dedupe_key",
    "sanitize_user_facing_text",
    "split_media_from_output",
    "strip_block_tags",
    "strip_downgraded_tool_call_text",
    "strip_thinking_tags",
    "subscribe_embedded_session",
]
