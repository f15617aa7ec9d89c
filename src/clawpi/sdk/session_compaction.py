"""Compaction inside an `AgentSession`: when to compact (threshold, overflow with one retry),
the extension hook, the summary call with its timeout and retries, and the rebuilt context."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from clawpi.ai.abort import AbortController, AbortSignal
from clawpi.ai.models import Model
from clawpi.ai.overflow import is_context_overflow
from clawpi.sdk.compaction import (
    CompactionError,
    CompactionResult,
    calculate_context_tokens,
    compact,
    estimate_context_tokens,
    prepare_compaction,
    should_compact,
)
from clawpi.sdk.retry import is_retryable_error
from clawpi.session.context import iso_to_ms

if TYPE_CHECKING:
    from clawpi.sdk.agent_session import AgentSession

OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing context or switching to a larger-context model."
)
COMPACTION_ATTEMPT_TIMEOUT_S = 300.0
COMPACTION_MAX_ATTEMPTS = 2


def result_dict(result: CompactionResult) -> dict[str, Any]:
    return {
        "summary": result.summary,
        "firstKeptEntryId": result.first_kept_entry_id,
        "tokensBefore": result.tokens_before,
        "details": result.details,
    }


class SessionCompaction:
    """Owned by one `AgentSession`; all state about compaction lives here."""

    def __init__(self, session: AgentSession, *, enabled: bool) -> None:
        # a proxy: the session owns this object, and a strong reference back would make the
        # pair garbage only the cyclic collector can free, on every turn of an embedding
        self.session: AgentSession = weakref.proxy(session)
        self.enabled = enabled
        self.running = False
        self.overflow_attempted = False
        self._abort: AbortController | None = None

    def abort(self) -> None:
        """Stop a running summary call (the compaction then fails, writing nothing)."""
        if self._abort is not None:
            self._abort.abort("Compaction aborted")

    async def check(self, last: dict[str, Any], *, before_prompt: bool = False) -> bool:
        """Compact if needed; True when the agent should continue the turn afterwards."""
        settings = self.session.settings_manager.settings.compaction
        if not self.enabled or not settings.enabled:
            return False
        if not before_prompt and last.get("stopReason") == "aborted":
            return False
        manager = self.session.session_manager
        leaf = manager.get_leaf_entry()
        if leaf is not None and leaf.get("type") == "compaction":
            return False  # nothing has happened since the last compaction
        latest = manager.latest_on_branch("compaction")
        # Strictly older than the latest compaction: the reply that follows a compaction can
        # share its millisecond.
        if latest is not None and (last.get("timestamp") or 0) < (
            iso_to_ms(latest.get("timestamp")) or 0
        ):
            return False
        model = self.session.model
        same_model = last.get("provider") == model.provider and last.get("model") == model.id
        if same_model and is_context_overflow(cast(Any, last), model.context_window):
            if self.overflow_attempted:
                await self.session.emit(
                    {
                        "type": "auto_compaction_end",
                        "result": None,
                        "aborted": False,
                        "willRetry": False,
                        "errorMessage": OVERFLOW_RECOVERY_FAILED,
                    }
                )
                return False
            self.overflow_attempted = True
            self.session.drop_from_context(last)
            return await self.auto_compact("overflow", will_retry=not before_prompt)
        if last.get("stopReason") == "error":
            has_usage = any(
                m.get("role") == "assistant"
                and m.get("usage")
                and m.get("stopReason") not in ("error", "aborted")
                for m in self.session.messages
            )
            if not has_usage:
                return False
            tokens = estimate_context_tokens(self.session.messages)
        else:
            tokens = calculate_context_tokens(last.get("usage") or {})
        if should_compact(tokens, model.context_window, settings.reserve_tokens):
            done = await self.auto_compact("threshold", will_retry=False)
            return done and not before_prompt and self.session.agent.has_queued_messages()
        return False

    async def auto_compact(self, reason: str, *, will_retry: bool) -> bool:
        await self.session.emit({"type": "auto_compaction_start", "reason": reason})
        try:
            result = await self._compact_now(None)
        except CompactionError as exc:
            prefix = (
                "Context overflow recovery failed"
                if reason == "overflow"
                else "Auto-compaction failed"
            )
            aborted = str(exc) == "Compaction cancelled"
            await self.session.emit(
                {
                    "type": "auto_compaction_end",
                    "result": None,
                    "aborted": aborted,
                    "willRetry": False,
                    "errorMessage": f"{prefix}: {exc}",
                }
            )
            return False
        await self.session.emit(
            {
                "type": "auto_compaction_end",
                "result": result_dict(result) if result else None,
                "aborted": False,
                "willRetry": will_retry and result is not None,
            }
        )
        return result is not None

    async def compact_now(self, custom_instructions: str | None = None) -> CompactionResult | None:
        """Compact now (the running turn is aborted first). None when there is nothing to do."""
        session = self.session
        if session.is_streaming:
            await session.abort()
        leaf = session.session_manager.get_leaf_entry()
        if leaf is not None and leaf.get("type") == "compaction":
            raise CompactionError("Already compacted")
        return await self._compact_now(custom_instructions)

    async def _compact_now(self, custom_instructions: str | None) -> CompactionResult | None:
        settings = self.session.settings_manager.settings.compaction
        branch = self.session.session_manager.get_branch()
        preparation = prepare_compaction(
            branch,
            reserve_tokens=settings.reserve_tokens,
            keep_recent_tokens=settings.keep_recent_tokens,
        )
        if preparation is None or preparation.is_empty:
            return None
        self.running = True
        try:
            hook = await self.session.extensions.emit_before_compact(
                {
                    "type": "session_before_compact",
                    "preparation": preparation,
                    "branchEntries": branch,
                    "customInstructions": custom_instructions,
                },
                self.session.ext_context(),
            )
            from_hook = False
            if hook is not None and hook.get("cancel"):
                raise CompactionError("Compaction cancelled")
            if hook is not None and isinstance(hook.get("compaction"), Mapping):
                given = hook["compaction"]
                result = CompactionResult(
                    summary=str(given.get("summary", "")),
                    first_kept_entry_id=str(
                        given.get("firstKeptEntryId") or preparation.first_kept_entry_id
                    ),
                    tokens_before=int(given.get("tokensBefore") or preparation.tokens_before),
                    details=given.get("details"),
                )
                from_hook = True
            else:
                result = await self._summarise(preparation, custom_instructions)
            entry_id = self.session.session_manager.append_compaction(
                result.summary,
                result.first_kept_entry_id,
                result.tokens_before,
                result.details,
                from_hook,
            )
        finally:
            self.running = False
        rebuilt: list[Any] = self.session.session_manager.build_session_context().agent_messages
        if (
            rebuilt
            and rebuilt[-1].get("role") == "assistant"
            and rebuilt[-1].get("stopReason")
            in (
                "error",
                "aborted",
            )
        ):
            rebuilt.pop()  # the failed reply stays in the file, not in what is sent next
        self.session.agent.state.messages = rebuilt
        if self.session.extensions.has_handlers("session_compact"):
            await self.session.extensions.emit(
                {
                    "type": "session_compact",
                    "compactionEntry": self.session.session_manager.get_entry(entry_id),
                    "fromExtension": from_hook,
                },
                self.session.ext_context(),
            )
        return result

    async def _summarise(
        self, preparation: Any, custom_instructions: str | None
    ) -> CompactionResult:
        model = self.session.model
        api_key = self.session.model_registry.get_api_key(model)
        controller = self._abort = AbortController()
        signal = controller.signal
        try:
            return await self._summarise_attempts(
                preparation, custom_instructions, model, api_key, signal
            )
        finally:
            self._abort = None

    async def _summarise_attempts(
        self,
        preparation: Any,
        custom_instructions: str | None,
        model: Model,
        api_key: str | None,
        signal: AbortSignal,
    ) -> CompactionResult:
        last_error: str | None = None
        for _attempt in range(COMPACTION_MAX_ATTEMPTS):
            if signal.aborted:
                raise CompactionError("Compaction aborted")
            try:
                return await asyncio.wait_for(
                    compact(
                        preparation,
                        model,
                        api_key=api_key,
                        custom_instructions=custom_instructions,
                        signal=signal,
                        headers=self.session.model_registry.request_headers(model, api_key),
                    ),
                    COMPACTION_ATTEMPT_TIMEOUT_S,
                )
            except TimeoutError:
                last_error = f"timed out after {COMPACTION_ATTEMPT_TIMEOUT_S:.0f}s"
            except CompactionError as exc:
                transient = is_retryable_error(
                    {"role": "assistant", "stopReason": "error", "errorMessage": str(exc)}
                )
                if not transient:
                    raise
                last_error = str(exc)
        raise CompactionError(
            f"Summarization failed after {COMPACTION_MAX_ATTEMPTS} attempts: {last_error}"
        )
