"""The memory tool's input: which commands there are, what each requires, and the dispatch
of one tool-use input to the memory that runs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .. import _render as render
from .._errors import InvalidCommandError
from .._tool_words import COMMAND_PARAMETERS, OPTIONAL_PARAMETERS

#: The six commands, in the contract's order, and the parameters each requires: from the
#: tools' words (``_tool_words``), which describe the same commands to the model.
COMMANDS = tuple(COMMAND_PARAMETERS)
REQUIRED_PARAMETERS: dict[str, tuple[str, ...]] = {
    command: tuple(name for name in parameters if name not in OPTIONAL_PARAMETERS)
    for command, parameters in COMMAND_PARAMETERS.items()
}


class MemoryCommands(Protocol):
    """The six commands, as ``EncryptedMemory`` and ``MountedMemory`` both offer them."""

    def view(self, path: str, view_range: object = None) -> str: ...
    def create(self, path: str, file_text: object) -> str: ...
    def str_replace(self, path: str, old_str: object, new_str: object) -> str: ...
    def insert(self, path: str, insert_line: object, insert_text: object) -> str: ...
    def delete(self, path: str) -> str: ...
    def rename(self, old_path: str, new_path: str) -> str: ...


def run_command(memory: MemoryCommands, command: object) -> str:
    """Check one tool-use input (``{"command": "view", "path": ...}``) and run it on ``memory``."""
    if not isinstance(command, Mapping):
        raise InvalidCommandError("Error: The tool input must be an object with a `command` field.")
    name = command.get("command")
    if not isinstance(name, str) or name not in REQUIRED_PARAMETERS:
        raise InvalidCommandError(
            f"Error: Unknown command {render.short_repr(name)}. Use one of: {', '.join(COMMANDS)}."
        )
    for parameter in REQUIRED_PARAMETERS[name]:
        if command.get(parameter) is None:
            raise InvalidCommandError(f"Error: Missing required parameter `{parameter}` for command `{name}`.")
    if name == "view":
        return memory.view(command["path"], command.get("view_range"))
    if name == "create":
        return memory.create(command["path"], command["file_text"])
    if name == "str_replace":
        return memory.str_replace(command["path"], command["old_str"], command["new_str"])
    if name == "insert":
        return memory.insert(command["path"], command["insert_line"], command["insert_text"])
    if name == "delete":
        return memory.delete(command["path"])
    return memory.rename(command["old_path"], command["new_path"])
