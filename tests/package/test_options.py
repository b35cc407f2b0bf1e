"""The options of a memory are written once: ``MemoryOptions`` (names and types) and
``OPTION_DEFAULTS`` (defaults) in ``_factory``, the settings' table in ``Settings`` (``_config``).

What is made of them is made at import time: ``open_memory``'s signature, ``SETTINGS`` and
``ENVIRONMENT``, the command line's global options, the defaults shown in --help. What must
still be written twice (a default that refers to an option, choices in the order people read
them) is checked here, and each check has a case showing it catches a drift.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypedDict

import pytest

from s3memory import MemoryOptions, Settings, open_memory
from s3memory._config import SETTINGS, Setting
from s3memory._factory import OPTION_DEFAULTS, REQUIRED_OPTION
from s3memory.cli import cli


def options_without_a_default(options: type, defaults: Mapping[str, object]) -> list[str]:
    """Options that would silently default to None though their type does not admit it, and
    defaults of names that are not options."""
    hints = typing.get_type_hints(options)
    missing = [
        name
        for name, hint in hints.items()
        if name != REQUIRED_OPTION and name not in defaults and type(None) not in typing.get_args(hint)
    ]
    return sorted([*missing, *(name for name in defaults if name not in hints or name == REQUIRED_OPTION)])


def settings_unlike_open_memory(settings: Mapping[str, Setting]) -> list[str]:
    """Settings naming an option open_memory does not take, or whose default is not that
    option's (where open_memory has one other than None)."""
    parameters = inspect.signature(open_memory).parameters
    wrong = []
    for name, setting in settings.items():
        if setting.option is None:
            continue
        if setting.option not in parameters or setting.option == "mounts":
            wrong.append(name)
            continue
        default = parameters[setting.option].default
        if default not in (None, inspect.Parameter.empty) and default != setting.default:
            wrong.append(name)
    return wrong


def choices_unlike_their_type(settings: type) -> list[str]:
    """Settings whose choices are not the values of their field's ``Literal`` type."""
    hints = typing.get_type_hints(settings)
    return [
        item.name
        for item in fields(settings)
        if item.metadata["setting"].choices
        and set(item.metadata["setting"].choices) != set(typing.get_args(hints[item.name]))
    ]


def settings_without_an_option(settings: Mapping[str, Setting]) -> list[str]:
    """Settings the command line's group does not take, from their variable too."""
    options = {param.name: param for param in cli.params}
    return [
        name
        for name, setting in settings.items()
        if name not in options
        or (not setting.switch and options[name].envvar != setting.variable)
        or setting.variable not in (options[name].help or "") + str(options[name].envvar)
    ]


# -- the lists agree -------------------------------------------------------------------------
def test_open_memorys_signature_is_made_of_the_options_and_their_defaults() -> None:
    parameters = inspect.signature(open_memory).parameters
    assert list(parameters) == [*MemoryOptions.__annotations__, "mounts"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert parameters[REQUIRED_OPTION].default is inspect.Parameter.empty
    for name in MemoryOptions.__annotations__:
        if name != REQUIRED_OPTION:
            assert parameters[name].default == OPTION_DEFAULTS.get(name), name
    assert typing.get_type_hints(open_memory)["key_mode"] == typing.get_type_hints(MemoryOptions)["key_mode"]


def test_every_option_has_a_default_or_admits_none() -> None:
    assert options_without_a_default(MemoryOptions, OPTION_DEFAULTS) == []


def test_settings_that_are_options_default_as_open_memory_does() -> None:
    assert settings_unlike_open_memory(SETTINGS) == []
    assert {setting.option for setting in SETTINGS.values()} >= {"user_id", "key_mode", "sensitive_data"}


def test_each_settings_choices_are_its_types_values() -> None:
    assert choices_unlike_their_type(Settings) == []
    assert [name for name, setting in SETTINGS.items() if setting.choices] == [
        "key_mode",
        "sensitive_data",
        "instruction_policy",
    ]


def test_every_setting_is_a_global_option_of_the_command_line() -> None:
    assert settings_without_an_option(SETTINGS) == []
    assert list(SETTINGS) == [item.name for item in fields(Settings)]


def test_settings_defaults_are_shown_in_help_from_the_defaults_themselves() -> None:
    assert SETTINGS["sensitive_data"].help.endswith(f"[{Settings().sensitive_data}]")
    assert SETTINGS["key_mode"].help.endswith(f"[{OPTION_DEFAULTS['key_mode']}]")
    assert SETTINGS["track_access"].help.endswith("[off; the variable takes 1 or 0]")
    assert SETTINGS["prefix"].help.endswith("[none]")
    assert "[" not in SETTINGS["bucket"].help


# -- each check catches a drift --------------------------------------------------------------
class _DriftedOptions(TypedDict, total=False):
    user_id: str
    bucket: str | None
    strict: bool  # a new option, and no default for it


def test_the_defaults_check_catches_an_option_without_a_default() -> None:
    assert options_without_a_default(_DriftedOptions, {}) == ["strict"]
    assert options_without_a_default(_DriftedOptions, {"strict": True}) == []
    assert options_without_a_default(_DriftedOptions, {"strict": True, "stict": False}) == ["stict"]


@pytest.mark.parametrize(
    "drift",
    [
        {"default": "kms"},  # a default written again, and wrong
        {"option": "keymode"},  # an option open_memory does not take
    ],
)
def test_the_settings_check_catches_a_setting_unlike_its_option(drift: dict[str, Any]) -> None:
    drifted = {**SETTINGS, "key_mode": replace(SETTINGS["key_mode"], **drift)}
    assert settings_unlike_open_memory(drifted) == ["key_mode"]


def test_the_choices_check_catches_a_value_the_type_has_and_the_choices_lack() -> None:
    @dataclass(frozen=True)
    class Drifted:
        mode: Literal["a", "b", "c"] = field(default="a", metadata={"setting": Setting("X", "x", choices=("a", "b"))})
        kept: Literal["a", "b"] = field(default="a", metadata={"setting": Setting("Y", "y", choices=("b", "a"))})

    assert choices_unlike_their_type(Drifted) == ["mode"]


def test_the_command_line_check_catches_a_setting_without_an_option() -> None:
    added = replace(SETTINGS["bucket"], name="bucket_region", variable="S3MEMORY_BUCKET_REGION")
    assert settings_without_an_option({**SETTINGS, "bucket_region": added}) == ["bucket_region"]
    moved = replace(SETTINGS["bucket"], variable="S3MEMORY_S3_BUCKET")
    assert settings_without_an_option({**SETTINGS, "bucket": moved}) == ["bucket"]


def test_the_policy_documents_know_every_key_mode() -> None:
    """``_admin.policy`` writes the key modes again (importing ``_factory`` would make it heavy)."""
    from s3memory._admin import policy
    from s3memory._factory import KEY_MODES

    assert policy.KEY_MODES == KEY_MODES
