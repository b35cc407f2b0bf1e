"""What the framework adapters share: the memory they run on, one command's answer for
the model, and the words of a ``memory`` function tool for models without Claude's native one.

Frameworks that can declare Claude's native ``memory_20250818`` tool send only its name and
type; Claude knows the commands, and the API adds the memory protocol to the system prompt.
A plain function tool (any other model, or a framework that cannot declare the native tool)
must carry that protocol itself: :data:`MEMORY_TOOL_DESCRIPTION`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.protocol import Memory as Memory
from .._errors import answer_for_model

MEMORY_TOOL_NAME = "memory"

# The protocol the API adds to the system prompt when the native tool is present (seed 000,
# "Prompting guidance"), and the commands the native tool's definition would have told.
MEMORY_TOOL_DESCRIPTION = """\
Your persistent memory: a directory of text files at /memories that outlives this conversation.
IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.
MEMORY PROTOCOL:
1. Use the `view` command of your `memory` tool to check for earlier progress.
2. ... (work on the task) ...
   - As you make progress, record status / progress / thoughts etc in your memory.
ASSUME INTERRUPTION: Your context window might be reset at any moment, so you risk losing any \
progress that is not recorded in your memory directory.
Commands (every path starts with /memories):
- view: path; optional view_range [start, end] (1-based lines, end -1 = to the end). A directory \
lists its files with sizes; a file shows numbered lines.
- create: path, file_text. Creates a new file; never overwrites.
- str_replace: path, old_str (must occur exactly once), new_str.
- insert: path, insert_line (0 = at the top), insert_text.
- delete: path (a file, or a directory with everything in it).
- rename: old_path, new_path (a file or a directory; never overwrites)."""

_PARAMETER_DESCRIPTIONS: dict[str, str] = {
    "command": "One of: view, create, str_replace, insert, delete, rename.",
    "path": "The file or directory, under /memories (all commands but rename).",
    "view_range": "view: [first line, last line], 1-based; -1 as the last means to the end.",
    "file_text": "create: the new file's text.",
    "old_str": "str_replace: the text to replace; it must occur exactly once.",
    "new_str": "str_replace: the replacement text.",
    "insert_line": "insert: the line after which to insert (0 = at the top).",
    "insert_text": "insert: the text to insert.",
    "old_path": "rename: the file or directory to move.",
    "new_path": "rename: where to move it (must not exist).",
}


_PARAMETER_TYPES: dict[str, dict[str, Any]] = {
    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
    "path": {"type": "string"},
    "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
    "file_text": {"type": "string"},
    "old_str": {"type": "string"},
    "new_str": {"type": "string"},
    "insert_line": {"type": "integer"},
    "insert_text": {"type": "string"},
    "old_path": {"type": "string"},
    "new_path": {"type": "string"},
}

#: The ``memory`` function tool's parameters: every field Claude's memory tool sends, only
#: ``command`` required. Adapters hand frameworks this JSON schema rather than a typed
#: signature, so that no framework validates the input first: s3memory checks each field
#: and answers in the memory tool contract's words.
MEMORY_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {**_PARAMETER_TYPES[name], "description": text} for name, text in _PARAMETER_DESCRIPTIONS.items()
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
