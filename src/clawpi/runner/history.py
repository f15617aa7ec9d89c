"""How much history a chat keeps: the last N user turns, per channel and per DM.

A long-running Telegram DM or a busy group channel would otherwise grow until every turn pays
for (or overflows on) months of messages. The limit comes from the channel config:
`channels.<channel>.dmHistoryLimit` for direct messages (a per-peer
`channels.<channel>.dms.<peerId>.historyLimit` wins) and `channels.<channel>.historyLimit`
for groups and channels; account-scoped keys read `channels.<channel>.accounts.<id>` first.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from clawpi.runner.config_fields import finite_int
from clawpi.runner.sanitize import is_compaction_summary, tool_calls_of, tool_result_id
from clawpi.session.store import SessionManager

Msg = dict[str, Any]

DM_KINDS: Final = frozenset({"dm", "direct"})
GROUP_KINDS: Final = frozenset({"group", "channel"})
_THREAD_SUFFIX_RE: Final = re.compile(r"^(.*?)(?::(?:thread|topic):[^:]+)+$", re.I)
_PREAMBLE_ROLES: Final = frozenset({"compactionSummary", "branchSummary"})


def _is_preamble(message: Mapping[str, Any]) -> bool:
    return message.get("role") in _PREAMBLE_ROLES or is_compaction_summary(message)


def limit_history_turns(messages: Sequence[Msg], limit: int | None) -> list[Msg]:
    """Keep the last `limit` user turns (each with the replies and tool traffic after it).

    `None` or a limit <= 0 keeps everything (the same list comes back). A compaction summary at
    the head of the history is kept in front. The cut is always at the start of a user turn, and
    it moves one turn earlier rather than separate a tool result from the call it answers.
    """
    history = list(messages) if not isinstance(messages, list) else messages
    if not limit or limit <= 0 or not history:
        return history
    start = 0
    while start < len(history) and _is_preamble(history[start]):
        start += 1
    # From the end, so a turn reads only what it keeps (a capped chat's history keeps growing).
    users = (i for i in range(len(history) - 1, start - 1, -1) if history[i].get("role") == "user")
    cut = next(itertools.islice(users, limit - 1, None), None)  # the limit-th from the end
    if cut is None:
        return history
    for earlier in users:
        if not _orphans_a_result(history, start, cut):
            return [*history[:start], *history[cut:]]
        cut = earlier
    return history  # only the first user turn would keep every result with its call


def _orphans_a_result(history: list[Msg], start: int, cut: int) -> bool:
    """Whether cutting at `cut` keeps a tool result whose call is cut off."""
    kept_calls: set[str] = set()
    results: list[str] = []
    for message in itertools.islice(history, cut, None):
        kept_calls.update(call_id for call_id, _ in tool_calls_of(message))
        if message.get("role") == "toolResult" and (result_id := tool_result_id(message)):
            results.append(result_id)
    unanswered = {result_id for result_id in results if result_id not in kept_calls}
    if not unanswered:  # the usual case: nothing before the cut needs reading
        return False
    return any(
        call_id in unanswered
        for message in itertools.islice(history, start, cut)
        for call_id, _ in tool_calls_of(message)
    )


def branch_past_orphaned_user_message(session: SessionManager) -> Msg | None:
    """If the session ends with an unanswered user message, move the leaf before it.

    A run that died before replying leaves its user message as the leaf; prompting on top of
    it would send two user turns in a row. The old message stays in the file (on the abandoned
    branch); it is returned so the caller can decide whether to carry its text forward.
    """
    leaf = session.get_leaf_entry()
    message = leaf.get("message") if leaf is not None and leaf.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    parent = leaf.get("parentId") if leaf is not None else None
    if isinstance(parent, str) and session.get_entry(parent) is not None:
        session.branch(parent)
    else:  # a root, or its parent lost to damage (repair kept it as a root)
        session.reset_leaf()
    return message


@dataclass(frozen=True, slots=True)
class SessionKeyParts:
    channel: str
    kind: str
    peer_id: str
    account_id: str | None = None


def _strip_thread_suffix(peer: str) -> str:
    match = _THREAD_SUFFIX_RE.match(peer)
    return match.group(1) if match else peer


def parse_session_key(session_key: str | None) -> SessionKeyParts | None:
    """`agent:<agentId>:<channel>[:<account>]:<kind>:<peer>` or `<channel>:<kind>:<peer>`.

    Thread and topic suffixes (`:thread:<n>`, `:topic:<n>`) are removed from the peer id.
    """
    if not session_key:
        return None
    parts = [p for p in session_key.split(":") if p]
    if len(parts) >= 3 and parts[0].lower() == "agent":
        parts = parts[2:]
    if len(parts) < 2:
        return None
    channel = parts[0].lower()
    known = DM_KINDS | GROUP_KINDS
    if parts[1].lower() in known:
        return SessionKeyParts(channel, parts[1].lower(), _strip_thread_suffix(":".join(parts[2:])))
    if len(parts) >= 3 and parts[2].lower() in known:
        return SessionKeyParts(
            channel, parts[2].lower(), _strip_thread_suffix(":".join(parts[3:])), parts[1]
        )
    return None


def _lookup(section: Mapping[str, Any], parts: SessionKeyParts) -> int | None:
    if parts.kind in DM_KINDS:
        dms = section.get("dms")
        if parts.peer_id and isinstance(dms, Mapping):
            peer = dms.get(parts.peer_id)
            limit = finite_int(peer.get("historyLimit")) if isinstance(peer, Mapping) else None
            if limit is not None:
                return limit
        return finite_int(section.get("dmHistoryLimit"))
    return finite_int(section.get("historyLimit"))


def get_history_limit_from_session_key(
    session_key: str | None, config: Mapping[str, Any] | None
) -> int | None:
    """The history limit configured for this session's channel and peer, or None.

    Direct messages: `dms.<peer>.historyLimit`, else `dmHistoryLimit`. Groups and channels:
    `historyLimit`. Keys that name no channel kind, or channels without config, give None.
    """
    parts = parse_session_key(session_key)
    channels = config.get("channels") if isinstance(config, Mapping) else None
    if parts is None or not isinstance(channels, Mapping):
        return None
    section = next(
        (v for k, v in channels.items() if isinstance(k, str) and k.lower() == parts.channel),
        None,
    )
    if not isinstance(section, Mapping):
        return None
    if parts.account_id is not None:
        accounts = section.get("accounts")
        account = accounts.get(parts.account_id) if isinstance(accounts, Mapping) else None
        if isinstance(account, Mapping):
            scoped = _lookup(account, parts)
            if scoped is not None:
                return scoped
    return _lookup(section, parts)
