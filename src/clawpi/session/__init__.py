"""Session files in pi's v3 JSONL format: the tree, its context, and the layers that keep it
safe on disk (repair, write lock, tool-result guard, open-manager cache)."""

from clawpi.session.background_sync import FsyncMode, background_fsync
from clawpi.session.cache import SessionManagerCache, prewarm_session_file
from clawpi.session.context import SessionContext, build_session_context, convert_to_llm
from clawpi.session.entries import CURRENT_SESSION_VERSION, Entry, SessionHeader
from clawpi.session.guard import ToolResultGuard, cap_tool_result_size, install_tool_result_guard
from clawpi.session.listing import SessionInfo
from clawpi.session.lock import FileSessionLock, SessionLock, SessionLockTimeout
from clawpi.session.migrate import migrate_entries
from clawpi.session.paths import agent_sessions_dir, encode_cwd, pi_sessions_dir
from clawpi.session.repair import RepairReport, repair_session_file
from clawpi.session.store import SessionManager
from clawpi.session.tree import SessionError, SessionTree, TreeNode

__all__ = [
    "CURRENT_SESSION_VERSION",
    "Entry",
    "FileSessionLock",
    "FsyncMode",
    "RepairReport",
    "SessionContext",
    "SessionError",
    "SessionHeader",
    "SessionInfo",
    "SessionLock",
    "SessionLockTimeout",
    "SessionManager",
    "SessionManagerCache",
    "SessionTree",
    "ToolResultGuard",
    "TreeNode",
    "agent_sessions_dir",
    "background_fsync",
    "build_session_context",
    "cap_tool_result_size",
    "convert_to_llm",
    "encode_cwd",
    "install_tool_result_guard",
    "migrate_entries",
    "pi_sessions_dir",
    "prewarm_session_file",
    "repair_session_file",
]
