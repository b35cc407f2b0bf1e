"""What the framework adapters share: the memory they run on, one command's answer for
the model, and the schema of a ``memory`` function tool for models without Claude's native one.

Frameworks that can declare Claude's native ``memory_20250818`` tool send only its name and
type; Claude knows the commands, and the API adds the memory protocol to the system prompt.
A plain function tool (any other model, or a framework that cannot declare the native tool)
must carry that protocol itself: :data:`MEMORY_TOOL_DESCRIPTION`. Its words, and every other
tool's, are ``s3memory._tool_words``; the parameters' JSON types are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.protocol import Memory as Memory
from .._errors import NoUserError, answer_for_model
from .._factory import MemoryOptions, UserMemories, memory_from
from .._tool_words import MEMORY_PARAMETER_DESCRIPTIONS, PARAMETER_TYPES
from .._tool_words import MEMORY_TOOL_DESCRIPTION as MEMORY_TOOL_DESCRIPTION
from .._tool_words import MEMORY_TOOL_NAME as MEMORY_TOOL_NAME

#: The ``memory`` function tool's parameters: every field Claude's memory tool sends, only
#: ``command`` required. Adapters hand frameworks this JSON schema rather than a typed
#: signature, so that no framework validates the input first: s3memory checks each field
#: and answers in the memory tool contract's words.
MEMORY_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {**PARAMETER_TYPES[name], "description": text} for name, text in MEMORY_PARAMETER_DESCRIPTIONS.items()
    },
    "required": ["command"],
    "additionalProperties": False,
}


def run_memory_command(memory: Memory, tool_input: object) -> tuple[str, bool]:
    """One tool call's input run as a memory command: ``(text for the model, is_error)``;
    never raises for anything the model sent. Fields given as ``None`` count as absent (some
    frameworks pass every parameter)."""
    if isinstance(tool_input, Mapping):
        tool_input = {name: value for name, value in tool_input.items() if value is not None}
    return answer_for_model(lambda: memory.execute(tool_input))


def memory_or_users(memory: Memory | UserMemories | None, options: MemoryOptions) -> Memory | UserMemories:
    """What an adapter runs on: one memory (``memory=`` a memory, or options with
    ``user_id``), so one user; or the memory of each run's user (``memory=`` a
    :class:`~s3memory.UserMemories`, or options without ``user_id``)."""
    if isinstance(memory, UserMemories):
        if options:
            raise TypeError("give either memory=... or the options to build one, not both")
        return memory
    if memory is None and "user_id" not in options:
        return UserMemories(**options)
    return memory_from(memory, options)


def user_id_in(holder: object) -> object:
    """The ``user_id`` a framework's per-run value holds: a mapping's ``"user_id"`` key or an
    object's ``user_id`` attribute; ``None`` if it has none (or is ``None``)."""
    if isinstance(holder, Mapping):
        return holder.get("user_id")
    return getattr(holder, "user_id", None)


def memory_of_run(source: Memory | UserMemories, user_id: object, how: str) -> Memory:
    """The memory a run works on: ``source`` if it is one memory; else the memory of
    ``user_id``, which the framework's per-run context gave (never the model).

    Raises:
        NoUserError: ``user_id`` is ``None`` or empty; ``how`` says how a run names its user.
        ConfigurationError: ``user_id`` is not a valid user id.
    """
    if not isinstance(source, UserMemories):
        return source
    if user_id is None or user_id == "":
        raise NoUserError(f"this run names no user, and the memory is per user: {how}")
    return source.open(user_id)  # type: ignore[arg-type]  # validated there
