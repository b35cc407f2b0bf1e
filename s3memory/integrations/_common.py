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
from .._errors import answer_for_model
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
