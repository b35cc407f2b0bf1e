"""The tools' words: what a model reads about s3memory's tools, each text written once.

Tool names, tool descriptions and parameter descriptions for every face that declares a
tool: the ``memory`` function tool of the framework adapters (for models without Claude's
native tool), the SDK's ``memory_search`` client tool, the MCP server's tools and
instructions, and the description of Strands' memory store. Plain strings and dicts, no
import: every face shares this vocabulary, and loading it costs nothing.

Where a face needs a variant, it is derived here in code from the one text, never written
again: the single ``memory`` function tool carries all six commands, so each parameter's
description there names the commands that take it (``create: the new file's text.``) and
its description lists the commands; MCP has a tool per command and shows the texts as they
are. Claude's native tool (``memory_20250818``) declares no words of ours: Claude knows its
commands, and the API adds the memory protocol to the system prompt.
"""

from __future__ import annotations

#: The tool's name in the memory tool contract (the native tool's and the function tool's).
MEMORY_TOOL_NAME = "memory"
SEARCH_TOOL_NAME = "memory_search"

# -- the memory, and the protocol the API adds for the native tool (its sentences kept as the
# -- API writes them: Claude is trained on them) ------------------------------------------------
_MEMORY = "a directory of text files at /memories (encrypted at rest) that outlives this conversation"
_EVERY_PATH = "every path starts with /memories"
_ALWAYS_VIEW = "IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE"
_ASSUME_INTERRUPTION = (
    "ASSUME INTERRUPTION: Your context window might be reset at any moment, so you risk losing any "
    "progress that is not recorded in your memory directory."
)

# -- the six commands -----------------------------------------------------------------------------
#: Each command's description: an MCP tool's, and its line in the ``memory`` tool's description.
COMMAND_DESCRIPTIONS: dict[str, str] = {
    "view": (
        "Show a directory (its files and directories up to 2 levels deep, with sizes) or a file with "
        "line numbers. Start every task with `view` of /memories."
    ),
    "create": (
        "Create a new file; parent directories come into being. Never overwrites: an existing path is "
        "an error (edit it with `str_replace` or `insert`, or `delete` it first)."
    ),
    "str_replace": "Replace the one occurrence of `old_str` in a file with `new_str`; answers with the changed lines.",
    "insert": "Insert text into a file after line `insert_line`.",
    "delete": "Delete a file, or a directory with everything under it.",
    "rename": "Rename or move a file or a directory (with everything under it). Never overwrites.",
}

#: The parameters each command takes, in the order of its MCP tool's signature.
COMMAND_PARAMETERS: dict[str, tuple[str, ...]] = {
    "view": ("path", "view_range"),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
OPTIONAL_PARAMETERS = frozenset({"view_range"})

#: Each parameter's JSON schema type, as every front end declares it (the descriptions below).
PARAMETER_TYPES: dict[str, dict[str, object]] = {
    "command": {"type": "string", "enum": list(COMMAND_DESCRIPTIONS)},
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

#: Each parameter's description, as a tool per command (MCP) shows it.
PARAMETER_DESCRIPTIONS: dict[str, str] = {
    "path": "A file or directory under /memories, e.g. /memories/notes.md or /memories/projects.",
    "view_range": "The lines of a file to show, [start, end], 1-based; an end of -1 shows to the end.",
    "file_text": "The new file's text.",
    "old_str": "The text to replace; it must occur exactly once in the file.",
    "new_str": "The replacement text (may be empty).",
    "insert_line": "The line after which to insert; 0 inserts at the top.",
    "insert_text": "The text to insert (one or more lines).",
    "old_path": "The file or directory to move, under /memories.",
    "new_path": "Its new path under /memories; must not exist yet.",
}


def _for_commands(parameter: str, text: str) -> str:
    """``text`` as the ``memory`` function tool shows it: after the commands that take
    ``parameter`` (``create: the new file's text.``), or as it is if every command does."""
    takers = [command for command, parameters in COMMAND_PARAMETERS.items() if parameter in parameters]
    others = [command for command in COMMAND_PARAMETERS if command not in takers]
    if not others:
        return text
    scope = f"all commands but {', '.join(others)}" if len(others) < len(takers) else ", ".join(takers)
    return f"{scope}: {text[:1].lower()}{text[1:]}"


def _command_line(command: str) -> str:
    parameters = COMMAND_PARAMETERS[command]
    names = ", ".join(f"{name} (optional)" if name in OPTIONAL_PARAMETERS else name for name in parameters)
    return f"- {command}: {names}. {COMMAND_DESCRIPTIONS[command]}"


# -- the ``memory`` function tool, for models without the native tool -------------------------------
#: Its description carries what the native tool gets from the API: the memory protocol (the
#: API's "Prompting guidance"), and the commands its definition would have told.
MEMORY_TOOL_DESCRIPTION = "\n".join(
    [
        f"Your persistent memory: {_MEMORY}.",
        f"{_ALWAYS_VIEW}.",
        "MEMORY PROTOCOL:",
        "1. Use the `view` command of your `memory` tool to check for earlier progress.",
        "2. ... (work on the task) ...",
        "   - As you make progress, record status / progress / thoughts etc in your memory.",
        _ASSUME_INTERRUPTION,
        f"Commands ({_EVERY_PATH}):",
        *map(_command_line, COMMAND_DESCRIPTIONS),
    ]
)

#: Its parameters' descriptions: ``command``, and each command's parameters with their commands.
MEMORY_PARAMETER_DESCRIPTIONS: dict[str, str] = {
    "command": f"One of: {', '.join(COMMAND_DESCRIPTIONS)}.",
    **{name: _for_commands(name, text) for name, text in PARAMETER_DESCRIPTIONS.items()},
}

# -- the MCP server's instructions (its tools are the commands, one each) ---------------------------
INSTRUCTIONS = f"""\
These tools are your persistent memory: {_MEMORY}. {_EVERY_PATH.capitalize()}.

{_ALWAYS_VIEW}: call `view` with path "/memories" to check for earlier progress, then read the \
files that are relevant.

As you work, record status, progress and what you learned in memory files. {_ASSUME_INTERRUPTION} \
Keep the directory organized: update and delete files rather than piling up new ones, and do not \
create files that nobody will read."""

# -- search ---------------------------------------------------------------------------------------
SEARCH_TOOL_DESCRIPTION = (
    "Search the memory directory /memories (the user's memory and any stores mounted in it) for files "
    'containing every given word, case-insensitively; a "quoted phrase" must occur as written. Answers '
    "each matching file's path and up to three matching lines with their line numbers, best matches first; "
    "view a file for the rest. Use it to find what is already remembered before writing more."
)


def search_parameter_descriptions(default_limit: int, max_limit: int) -> dict[str, str]:
    """The ``memory_search`` tool's parameters, ``limit``'s with the search's own bounds."""
    return {
        "query": 'Words, or a "quoted phrase"; every one must occur in a file (case-insensitive).',
        "path_prefix": "Only files in this directory, e.g. /memories/standards/ (default: all of /memories).",
        "limit": f"At most this many files, the best (1 to {max_limit}; default {default_limit}).",
    }


# -- history (the MCP server's tools) ---------------------------------------------------------------
_OPERATIONS = "created, modified, renamed, restored, deleted or redacted"
_WHEN = "ISO-8601 time (2026-05-01 is its midnight UTC; a time without a zone is UTC)"

HISTORY_TOOL_DESCRIPTIONS: dict[str, str] = {
    "memory_history": (
        "Every version of a memory file, newest first (across renames, also after a delete), one line "
        f"each: when (UTC), what was done ({_OPERATIONS}), by whom, its size, its version id, and whether "
        "that record is verified."
    ),
    "memory_show_version": "The text of one earlier version of a memory file, as it was (no line numbers).",
    "memory_log": (
        "The changes to memory files under a directory, newest first, one line each: when (UTC), what was "
        "done, to which file, by whom, its size, its version id, and whether verified."
    ),
    "memory_restore": (
        "Write an earlier version of a memory file back as its newest version (a deleted file comes back). "
        "The versions after it are kept, so a restore can itself be undone."
    ),
}

FILE_HELP = "A file under /memories, e.g. /memories/notes.md (also one since deleted or renamed)."
VERSION_HELP = "A version id, as `memory_history` or `memory_log` lists it."


def log_parameter_descriptions(max_limit: int) -> dict[str, str]:
    """``memory_log``'s parameters, ``limit``'s with the log's own bound."""
    return {
        "path_prefix": "Only changes under this directory.",
        "operation": f"Only this operation: {_OPERATIONS}.",
        "actor": "Only changes made by this actor (e.g. mcp, cli, session:abc).",
        "since": f"Only changes at or after this {_WHEN}.",
        "until": f"Only changes at or before this {_WHEN}.",
        "limit": f"At most this many changes, the newest (1 to {max_limit}).",
    }
