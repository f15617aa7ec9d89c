"""The embedded runner (OpenClaw's pi-embedded-runner): one call per inbound chat message.

`run_embedded_agent(...)` queues the turn in its session lane, picks a model and auth profile,
runs attempts with rotation, failover, overflow recovery and timeouts, and returns payloads a
user can be shown.
"""

from clawpi.ai.errors import FailoverError
from clawpi.runner.auth_profiles import (
    mark_auth_profile_failure,
    mark_auth_profile_good,
    mark_auth_profile_used,
    resolve_auth_profile_order,
)
from clawpi.runner.client_tools import PendingToolCall
from clawpi.runner.fallback import AllModelsFailedError, run_with_model_fallback
from clawpi.runner.lanes import (
    CommandQueue,
    enqueue_in_lanes,
    resolve_global_lane,
    resolve_session_lane,
)
from clawpi.runner.result import AgentMeta, EmbeddedRunResult, RunError, RunMeta
from clawpi.runner.run import run_embedded_agent
from clawpi.runner.run_queue import RunQueue
from clawpi.runner.runs import (
    abort_embedded_pi_run,
    clear_active_embedded_run,
    is_embedded_pi_run_active,
    queue_embedded_pi_message,
    set_active_embedded_run,
    wait_for_embedded_pi_run_end,
)
from clawpi.runner.system_prompt import build_agent_system_prompt

__all__ = [
    "AgentMeta",
    "AllModelsFailedError",
    "CommandQueue",
    "EmbeddedRunResult",
    "FailoverError",
    "PendingToolCall",
    "RunError",
    "RunMeta",
    "RunQueue",
    "abort_embedded_pi_run",
    "build_agent_system_prompt",
    "clear_active_embedded_run",
    "enqueue_in_lanes",
    "is_embedded_pi_run_active",
    "mark_auth_profile_failure",
    "mark_auth_profile_good",
    "mark_auth_profile_used",
    "queue_embedded_pi_message",
    "resolve_auth_profile_order",
    "resolve_global_lane",
    "resolve_session_lane",
    "run_embedded_agent",
    "run_with_model_fallback",
    "set_active_embedded_run",
    "wait_for_embedded_pi_run_end",
]
