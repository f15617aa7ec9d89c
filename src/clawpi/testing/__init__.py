"""Test doubles shipped with clawpi: scripted and function-driven model providers."""

from clawpi.testing.faux import (
    FauxProvider,
    FauxResponse,
    FunctionProvider,
    faux_text,
    faux_thinking,
    faux_tool_call,
)

__all__ = [
    "FauxProvider",
    "FauxResponse",
    "FunctionProvider",
    "faux_text",
    "faux_thinking",
    "faux_tool_call",
]
