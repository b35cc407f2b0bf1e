"""What a command passes before it touches what is stored: the :class:`Gate` of one store.

Every check here is made before the request it guards: the model's path, read below the
mount point; whether the store may be changed at all (a store mounted read-only); the
sensitive-data guard over the text and the names a write brings (``name_screen``); the
instruction policy's verdict (``quarantine``), just before the write; and the user's quota,
from a listing made alongside a command's first requests. The memory's commands, the
management API, the mounted tree and the administrative operations all ask the same gate,
so a check cannot be forgotten by one front end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .._crypto.files import SealedFiles, plaintext_size
from .._errors import InvalidPathError, LimitExceededError, ReadOnlyMountError
from .._paths import ROOT, MemoryPath, parse_path
from .limits import Limits
from .name_screen import refuse_secret_names


class Verdicts(Protocol):
    """The instruction policy's check (``quarantine.InstructionCheck``): None to write as
    asked, the finding to record with the write, or a raised refusal (a held write)."""

    def verdict(
        self, files: SealedFiles, path: MemoryPath, shown: str, before: str | None, after: str
    ) -> str | None: ...

    def rename_verdict(self, new: MemoryPath, shown: str) -> str | None: ...


@dataclass(frozen=True)
class Gate:
    """The checks of one store's commands (see the module docstring).

    Attributes:
        files: the store's sealed files (where its paths are shown, its listing).
        limits: the bounds; the quota among them.
        screen_text: the guard over a text written (returns it, possibly redacted, or raises).
        screen_edit: the guard over a whole edited file against the file before, if it has one.
        instructions: the instruction policy's check, or None (``"allow"``).
        read_only: a store mounted read-only refuses every change.
    """

    files: SealedFiles
    limits: Limits
    screen_text: Callable[[str], str] | None = None
    screen_edit: Callable[[str, str], str] | None = None
    instructions: Verdicts | None = None
    read_only: bool = False

    def with_instructions(self, instructions: Verdicts) -> Gate:
        """This gate with another instruction check (an approval writes with its own)."""
        return dataclasses.replace(self, instructions=instructions)

    # -- paths ---------------------------------------------------------------------------
    def parse(self, path: object) -> MemoryPath:
        """The model's ``path``, checked, as the store's own path (below the mount point)."""
        parsed = parse_path(path, max_path_bytes=self.limits.max_path_bytes)
        shown_root = self.files.shown_root
        if shown_root == ROOT:
            return parsed
        # A mounted store: the model's path is below the mount point; the store's own path
        # is what follows it (the router sends only paths below this mount).
        mount_name = shown_root[len(ROOT) + 1 :]
        if not parsed.parts or parsed.parts[0] != mount_name:
            raise InvalidPathError(f"Error: The path {path} is not in the memory store at {shown_root}")
        return MemoryPath("/".join(parsed.parts[1:]))

    def file_path(self, path: str) -> MemoryPath:
        """:meth:`parse`, refusing the store's root (a directory)."""
        parsed = self.parse(path)
        if parsed.is_root:
            raise InvalidPathError(f"Error: {self.files.shown_root} is a directory, not a file")
        return parsed

    # -- may it change at all ------------------------------------------------------------
    def writable(self, verb: str, shown_paths: str) -> None:
        """Refuse, before any request, a change to a store mounted read-only (defence in
        depth behind the IAM policy of ``s3memory policy --read-only-mount``)."""
        if self.read_only:
            raise ReadOnlyMountError(
                f"Error: Cannot {verb} {shown_paths}: {self.files.shown_root} is mounted read-only"
            )

    # -- the screens ---------------------------------------------------------------------
    def screen(self, text: str) -> str:
        return text if self.screen_text is None else self.screen_text(text)

    def screen_new_file(self, parsed: MemoryPath, text: str) -> str:
        """A new file's text, screened, after its names (``name_screen``): a secret in a
        name is refused whatever the guard would do with one in the text."""
        refuse_secret_names(self.screen_text, parsed)
        return self.screen(text)

    def screen_inserted(self, text: str) -> str:
        """The inserted text, screened on its own unless the whole result will be."""
        return text if self.screen_edit is not None else self.screen(text)

    def screen_replacement(self, before: str, after: str) -> str:
        """A file's whole new text replacing ``before``: as an edit when the guard screens
        edits (a secret the file already held is not refused again), else on its own."""
        return self.screen_edit(before, after) if self.screen_edit is not None else self.screen(after)

    def instruction_verdict(self, parsed: MemoryPath, path: str, before: str | None, after: str) -> str | None:
        """The instruction policy's verdict on a write about to be made (``quarantine``): None,
        or the finding to record with it (``flag``); a held write raises ``WriteHeldError``."""
        return None if self.instructions is None else self.instructions.verdict(self.files, parsed, path, before, after)

    def rename_verdict(self, new: MemoryPath, shown: str) -> str | None:
        """The names a rename brings, screened: a secret refused, the instruction policy's
        finding to record with every copy (or a refusal under ``quarantine``)."""
        refuse_secret_names(self.screen_text, new)
        return None if self.instructions is None else self.instructions.rename_verdict(new, shown)

    # -- the quota -----------------------------------------------------------------------
    def tenant_usage(self) -> tuple[int, int] | None:
        """(files, plaintext bytes) of the user, if a quota is set (one LIST per 1,000 files)."""
        if not self.limits.has_quota:
            return None
        infos = list(self.files.store.list(self.files.layout.memory_prefix))
        return len(infos), sum(plaintext_size(info) for info in infos)

    def check_quota(self, usage: tuple[int, int] | None, shown_path: str, *, files: int, grow: int) -> None:
        """Refuse a write that would take the user over the quota (``usage`` from
        :meth:`tenant_usage`; ``files`` new files, ``grow`` more bytes)."""
        if usage is None:
            return
        count, size = usage
        limit_files, limit_bytes = self.limits.max_tenant_files, self.limits.max_tenant_bytes
        if files and limit_files is not None and count + files > limit_files:
            over = f"{count + files:,} files, over its quota of {limit_files:,}"
        elif grow > 0 and limit_bytes is not None and size + grow > limit_bytes:
            over = f"{size + grow:,} bytes, over its quota of {limit_bytes:,}"
        else:
            return
        raise LimitExceededError(
            f"Error: Writing {shown_path} would make this memory hold {over}. Nothing was written; "
            "delete or condense memories you no longer need first."
        )
