"""Built-in provider APIs; each module registers itself with `clawpi.ai.stream` on import."""
