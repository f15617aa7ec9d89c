"""The LLM layer: messages, models, providers and one streaming event protocol for all of them."""

from clawpi.ai.abort import AbortController, AbortSignal, any_signal
from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.env_keys import get_env_api_key
from clawpi.ai.event_stream import AssistantMessageEventStream
from clawpi.ai.models import (
    Model,
    ModelCost,
    OpenAICompletionsCompat,
    calculate_cost,
    get_model,
    list_models,
    list_providers,
    models_are_equal,
    supports_xhigh,
)
from clawpi.ai.overflow import is_context_overflow
from clawpi.ai.partial_json import parse_streaming_json
from clawpi.ai.stream import (
    ApiProvider,
    StreamOptions,
    complete,
    get_api_provider,
    register_api_provider,
    stream,
)
from clawpi.ai.text import sanitize_surrogates
from clawpi.ai.transform import transform_messages
from clawpi.ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "AbortController",
    "AbortSignal",
    "ApiProvider",
    "AssistantMessage",
    "AssistantMessageBuilder",
    "AssistantMessageEvent",
    "AssistantMessageEventStream",
    "Context",
    "ImageContent",
    "Message",
    "Model",
    "ModelCost",
    "OpenAICompletionsCompat",
    "StopReason",
    "StreamOptions",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "Tool",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "any_signal",
    "calculate_cost",
    "complete",
    "get_api_provider",
    "get_env_api_key",
    "get_model",
    "is_context_overflow",
    "list_models",
    "list_providers",
    "models_are_equal",
    "parse_streaming_json",
    "register_api_provider",
    "sanitize_surrogates",
    "stream",
    "supports_xhigh",
    "transform_messages",
]
