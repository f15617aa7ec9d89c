"""Built-in runner extensions: compaction safeguard and context pruning."""
