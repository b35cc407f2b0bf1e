"""One user per conversation thread, for LangChain agents that serve many users.

With a checkpointer, a LangGraph thread's state outlives the run: its messages (tool results
that quote the user's memory files) and, in a deep agent, the ``AGENTS.md`` that deepagents'
``MemoryMiddleware`` loads once per thread and never again. A later run on that thread that
names another user would hand the first user's memory to the second user's model, and a run
that names no user would never reach a memory call to be refused. So the thread keeps a
digest of the user who started it (in its state, hidden from the graph's input and output;
the user id itself is never stored), and each run is checked against it before any model
call.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Annotated, Any

from langchain.agents.middleware import AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from typing_extensions import NotRequired

from .._errors import ThreadUserError

#: The state key a thread's user digest is kept under.
THREAD_USER_KEY = "s3memory_thread_user"


class ThreadUserState(AgentState[Any]):
    """An agent's state with the digest of its thread's user."""

    s3memory_thread_user: NotRequired[Annotated[str, PrivateStateAttr]]


def _digest(user_id: str) -> str:
    return hashlib.sha256(b"s3memory thread user\x00" + user_id.encode()).hexdigest()


def claim_thread(state: Mapping[str, Any], user_id: str | None) -> dict[str, Any] | None:
    """The state update that gives the thread to ``user_id`` (None if it already has it).
    ``user_id`` None: one user's memory, nothing to check.

    Raises:
        ThreadUserError: the thread was started by another user.
    """
    if user_id is None:
        return None
    mine = _digest(user_id)
    held = state.get(THREAD_USER_KEY)
    if not isinstance(held, str):
        return {THREAD_USER_KEY: mine}
    if not hmac.compare_digest(held, mine):
        raise ThreadUserError(
            "this conversation thread was started by another user, and its state (messages, "
            "tool results, a loaded AGENTS.md) is theirs: give each user's conversations their "
            "own thread_id"
        )
    return None
