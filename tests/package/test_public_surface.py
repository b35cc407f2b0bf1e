"""The public surface, frozen: the names ``s3memory`` exports and the exception tree.

A refactor that moves code between private modules must change neither. Adding a public name
is a decision: add it to ``EXPORTED`` here in the same commit. Removing one breaks users.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest

import s3memory
from s3memory import _errors

EXPORTED = frozenset(
    {
        "AccessLog",
        "AsyncS3MemoryTool",
        "BucketNotFoundError",
        "ConfigurationError",
        "Detector",
        "EditError",
        "EncryptedMemory",
        "ErasureReport",
        "ExpiryReport",
        "FileEntry",
        "Finding",
        "ForeignObjectError",
        "HistoryKey",
        "InMemoryStore",
        "IntegrityError",
        "InvalidCommandError",
        "InvalidPathError",
        "KeptKey",
        "KeyCache",
        "Keyring",
        "KmsMasterKey",
        "LimitExceededError",
        "NoUserError",
        "ThreadUserError",
        "Limits",
        "LocalDirStore",
        "LocalMasterKey",
        "MasterKey",
        "MasterRewrapReport",
        "Memory",
        "MemoryAdmin",
        "MemoryInfo",
        "MemoryOptions",
        "MemoryPath",
        "MemoryVersion",
        "Mount",
        "MountedMemory",
        "NameSealing",
        "NotADirectoryConflict",
        "NotExists",
        "ObjectStore",
        "ObjectTooLargeError",
        "PathExistsError",
        "PathNotFoundError",
        "PendingWrite",
        "PreconditionFailedError",
        "ReadOnlyMountError",
        "RotationReport",
        "S3MemoryError",
        "S3MemoryTool",
        "S3Store",
        "SearchResult",
        "SecretGuard",
        "SensitiveDataError",
        "Sha256",
        "Settings",
        "StaleMemory",
        "StorageAccessDeniedError",
        "StorageError",
        "StorageUnavailableError",
        "TenantKeyError",
        "TenantLayout",
        "UserMemories",
        "VersionExpiryReport",
        "VersionNotFoundError",
        "WriteHeldError",
        "assume_role_request",
        "binding_context",
        "deployment_documents",
        "describe_s3_client",
        "erase_tenant",
        "expire_memories",
        "expire_noncurrent_versions",
        "format_size",
        "generate_master_key",
        "iam_policy",
        "kms_client",
        "kms_key_policy",
        "lifecycle_configuration",
        "memory_stores_prompt",
        "open_memory",
        "parse_path",
        "rewrap_tenant_key",
        "rotate_tenant_key",
        "s3_client",
        "tune_session",
        "user_id_for_subject",
        "validate_tenant",
        "WrappedKey",
    }
)


def test_the_exported_names_are_exactly_these() -> None:
    assert set(s3memory.__all__) == EXPORTED
    assert len(s3memory.__all__) == len(EXPORTED)  # no name listed twice


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_each_exported_name_resolves_and_says_what_it_is(name: str) -> None:
    value = getattr(s3memory, name)
    assert value is not None
    if inspect.isclass(value) or inspect.isfunction(value):
        assert inspect.getdoc(value), f"{name} has no docstring"


def test_star_import_gives_the_exported_names() -> None:
    namespace: dict[str, object] = {}
    exec("from s3memory import *", namespace)
    assert set(namespace) - {"__builtins__"} == EXPORTED


@pytest.mark.slow  # a subprocess
def test_importing_the_package_loads_neither_the_sdk_nor_boto3() -> None:
    """The lazily exported names stay lazy (a Lambda cold start pays for every import)."""
    code = (
        "import sys, s3memory; s3memory.__all__; "
        "print(sorted(m for m in ('anthropic', 'boto3', 'botocore', 'click', 'rich', 'mcp', "
        "'s3memory._admin', 's3memory._search.index', 's3memory.stores._localdir') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


FRAMEWORKS = ("deepagents", "langchain", "langchain_core", "langchain_anthropic", "langgraph", "pydantic_ai", "strands")


@pytest.mark.slow  # a subprocess
def test_importing_the_package_loads_no_agent_framework() -> None:
    """Each framework costs 0.3-0.7 s to import; only its own s3memory.integrations module may."""
    code = f"import sys, s3memory; s3memory.__all__; print(sorted(m for m in {FRAMEWORKS} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # The check can fail: an integration module does load its framework.
    code = "import sys, s3memory.integrations.strands; print('strands' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


# -- the exception tree ---------------------------------------------------------------------
_TREE_LINE = re.compile(r"^\s*(?:[│ ]*[├└]── )?(?P<name>[A-Z]\w*(?:Error|Conflict))\b")


def drawn_tree() -> dict[str, str | None]:
    """Each error class of the tree drawn in ``s3memory._errors``' docstring, with its parent
    (the nearest class drawn above it with less indentation)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in (inspect.getdoc(_errors) or "").splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        name = match.group("name")
        depth = line.index(name)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def test_the_drawn_tree_is_the_class_tree() -> None:
    tree = drawn_tree()
    assert tree["S3MemoryError"] is None and len(tree) >= 18
    for name, parent in tree.items():
        cls = getattr(s3memory, name)
        assert name in EXPORTED, f"{name} is in the tree but not exported"
        if parent is not None:
            assert cls.__bases__[0] is getattr(s3memory, parent), f"{name} should derive from {parent}"


def test_every_exported_error_is_in_the_drawn_tree() -> None:
    errors = {name for name in EXPORTED if inspect.isclass(getattr(s3memory, name))}
    errors = {name for name in errors if issubclass(getattr(s3memory, name), BaseException)}
    assert errors == set(drawn_tree())


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        ("ConfigurationError", ValueError),
        ("InvalidCommandError", ValueError),
        ("LimitExceededError", ValueError),
        ("PathNotFoundError", FileNotFoundError),
        ("PathExistsError", FileExistsError),
        ("NotADirectoryConflict", NotADirectoryError),
        ("StorageError", OSError),
        ("StorageAccessDeniedError", PermissionError),
    ],
)
def test_errors_are_the_builtins_a_caller_would_catch(error: str, builtin: type[BaseException]) -> None:
    assert issubclass(getattr(s3memory, error), builtin)
    assert issubclass(getattr(s3memory, error), s3memory.S3MemoryError)


def _s3memory_classes_in(annotation: object) -> set[type]:
    """The classes of s3memory that an annotation names, however nested (X | None, list[X])."""
    found: set[type] = set()
    if isinstance(annotation, type) and annotation.__module__.startswith("s3memory"):
        found.add(annotation)
    for argument in getattr(annotation, "__args__", ()) or ():
        found |= _s3memory_classes_in(argument)
    return found


def test_public_signatures_name_only_exported_types() -> None:
    """A user can name every type a public function takes or returns (a private module's
    class in a public signature sends users into private modules)."""
    import typing

    import s3memory.stores

    exported = {getattr(s3memory, name) for name in EXPORTED}
    exported |= {getattr(s3memory.stores, name) for name in s3memory.stores.__all__}  # the public subpackage
    callables: list[object] = []
    for name in sorted(EXPORTED):
        value = getattr(s3memory, name)
        if inspect.isfunction(value):
            callables.append(value)
        elif inspect.isclass(value) and not issubclass(value, BaseException):
            callables.append(value.__init__)
            public = [m for n, m in vars(value).items() if inspect.isfunction(m) and not n.startswith("_")]
            callables.extend(public)
    missing: dict[str, set[str]] = {}
    for function in callables:
        try:
            hints = typing.get_type_hints(function)
        except NameError:  # an annotation under TYPE_CHECKING only: nothing a user could name either
            continue
        for hint in hints.values():
            for cls in _s3memory_classes_in(hint) - exported:
                missing.setdefault(cls.__qualname__, set()).add(getattr(function, "__qualname__", "?"))
    assert not missing, missing
