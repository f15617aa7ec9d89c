"""clawpi: an embeddable agent runtime (OpenClaw's embedded pi runner, in Python).

The names most users need are re-exported here lazily, so `import clawpi` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Model": "clawpi.ai",
    "get_model": "clawpi.ai",
    "list_models": "clawpi.ai",
    "stream": "clawpi.ai",
    "complete": "clawpi.ai",
    "Context": "clawpi.ai",
    "ThinkingLevel": "clawpi.ai",
    "AbortController": "clawpi.ai",
    "AbortSignal": "clawpi.ai",
    "ClawpiError": "clawpi.errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'clawpi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
