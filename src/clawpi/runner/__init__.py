"""The embedded runner (OpenClaw's pi-embedded-runner): one call per inbound chat message."""
