"""Settings shared by the command line and the MCP server: one table of options, each with
its environment variable, and how to open the configured memory.

The table is :class:`Settings` itself: each field carries, as a :class:`Setting`, its
variable, its ``--help`` text (the default shown in brackets, made of the default itself),
how a text given for it is read, and the option of :func:`~s3memory.open_memory` it is, whose
default (:data:`~s3memory._factory.OPTION_DEFAULTS`) it takes. :data:`SETTINGS` and
:data:`ENVIRONMENT` are made of it; the command line's global options are made of
:data:`SETTINGS` (``cli/output.py``).

The embedded default needs no AWS account: a local directory store and a local master key
file, created 0600 on first use (directories 0700). Both are refused, not merely warned
about, when another user owns them or may write to them (or, for the key, read it). A
bucket switches to S3; a KMS key id makes KMS wrap the tenant key (or, with key mode
``kms``, every object's data key). Reading and creating the key file safely is in
``_crypto.keyfile``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ._aws.clients import DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT_SECONDS, check_timeout, region_for
from ._core.memory import EncryptedMemory
from ._core.mounts import Mount, MountedMemory, mounts_from_json
from ._core.quarantine import InstructionPolicy
from ._crypto.keyfile import load_or_create_master_key, private_directory
from ._errors import ConfigurationError
from ._factory import (
    DEFAULT_SENSITIVE_DATA,
    KEY_MODES,
    OPTION_DEFAULTS,
    SENSITIVE_DATA_POLICIES,
    KeyMode,
    SensitiveDataPolicy,
    open_memory,
)

log = logging.getLogger("s3memory")
STORE_DIRECTORY = "store"  # the local store's directory in the data home
MASTER_KEY_FILE = "master.key"  # the local master key's file in the data home
_HOME_VARIABLE = "S3MEMORY_HOME"
#: The instruction policies as people are shown them: the default, the stricter, the one that
#: screens nothing (tests/package/test_options.py checks that they are those of ``InstructionPolicy``).
INSTRUCTION_POLICY_CHOICES: tuple[InstructionPolicy, ...] = ("flag", "quarantine", "allow")


@dataclass(frozen=True)
class Setting:
    """How one setting of :class:`Settings` is given from outside (:data:`SETTINGS`)."""

    variable: str  # its environment variable
    text: str  # what it is, for --help
    shown: str | None = None  # its default as --help shows it; None: the default itself
    metavar: str = ""  # the value's name in --help; "": the setting's name in capitals
    read: Callable[[str, Any], Any] | None = None  # (name, value given) -> value; None: as given
    option: str | None = None  # the keyword option of open_memory this setting is
    choices: tuple[str, ...] = ()  # the values it takes, if only some
    name: str = ""  # the field's name, and its default (filled in by SETTINGS)
    default: Any = None

    @property
    def switch(self) -> bool:
        """On or off: ``--name/--no-name``, and the variable takes 1 or 0."""
        return isinstance(self.default, bool)

    @property
    def flag(self) -> str:
        """The command line's option: ``--key-mode``."""
        return "--" + self.name.replace("_", "-")

    @property
    def help(self) -> str:
        """What it is, and its default in brackets (none shown for None)."""
        shown = self.shown
        if shown is None and self.default is not None:
            if self.switch:
                shown = f"{'on' if self.default else 'off'}; the variable takes 1 or 0"
            elif isinstance(self.default, float):
                shown = f"{self.default:g}"
            else:
                shown = str(self.default) if self.default not in ("", ()) else "none"
        return f"{self.text} [{shown}]" if shown else self.text


def _listed(words: Sequence[str], quote: str = "") -> str:
    """``a, b or c``."""
    quoted = [f"{quote}{word}{quote}" for word in words]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _read_path(name: str, value: Any) -> Path:
    if not str(value):  # Path("") would be the current directory
        raise ConfigurationError(f"{setting_name(name)} is empty: give a path, or leave it unset")
    return Path(value).expanduser()


def _read_choice(choices: tuple[str, ...]) -> Callable[[str, Any], Any]:
    def read(name: str, value: Any) -> Any:
        if value not in choices:
            listed = _listed(choices, quote="'")
            raise ConfigurationError(f"{setting_name(name)} must be {listed}, not {printable_value(value)}")
        return value

    return read


def _read_seconds(name: str, value: Any) -> float:
    return check_timeout(value, name=setting_name(name))


def _read_switch(name: str, value: Any) -> Any:
    """A variable's text: 1 or 0 (true/false, yes/no); a bool given as it is."""
    if isinstance(value, str):
        if value.lower() not in ("1", "0", "true", "false", "yes", "no", ""):
            raise ConfigurationError(f"{SETTINGS[name].variable} must be 1 or 0, not {printable_value(value)}")
        return value.lower() in ("1", "true", "yes")
    return value


def _read_mounts(name: str, value: Any) -> Any:
    """``--mounts``: JSON, or ``@FILE`` holding it (mounts given as such are taken as they are)."""
    if not isinstance(value, str):
        return value
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigurationError(
                f"{setting_name(name)}: cannot read {printable_value(value[1:])} ({error})"
            ) from None
    try:
        return mounts_from_json(text)
    except ConfigurationError as error:
        raise ConfigurationError(f"{setting_name(name)}: {error}") from None


def _path(variable: str, text: str, shown: str) -> Setting:
    """A path setting: ``~`` expanded, an empty one refused."""
    return Setting(variable, text, shown=shown, metavar="PATH", read=_read_path)


@dataclass(frozen=True)
class Settings:
    """Where one user's memory lives and how it is keyed."""

    home: Path | None = field(
        default=None,
        metadata={
            "setting": _path(_HOME_VARIABLE, "data directory of the embedded default", "~/.local/share/s3memory")
        },
    )
    store_dir: Path | None = field(
        default=None,
        metadata={
            "setting": _path("S3MEMORY_STORE_DIR", "local store directory", f"${_HOME_VARIABLE}/{STORE_DIRECTORY}")
        },
    )
    master_key_file: Path | None = field(
        default=None,
        metadata={
            "setting": _path(
                "S3MEMORY_MASTER_KEY_FILE", "local master key file", f"${_HOME_VARIABLE}/{MASTER_KEY_FILE}"
            )
        },
    )
    user: str = field(
        default="local", metadata={"setting": Setting("S3MEMORY_USER", "user id, the tenant", option="user_id")}
    )
    bucket: str | None = field(
        default=None,
        metadata={"setting": Setting("S3MEMORY_BUCKET", "S3 bucket; unset: the local store", option="bucket")},
    )
    prefix: str = field(
        default=OPTION_DEFAULTS["prefix"],
        metadata={"setting": Setting("S3MEMORY_PREFIX", "key prefix in the bucket, ending in /", option="prefix")},
    )
    kms_key_id: str | None = field(
        default=None,
        metadata={
            "setting": Setting(
                "S3MEMORY_KMS_KEY_ID",
                "KMS key (id, ARN or alias) wrapping the tenant key",
                option="kms_key_id",
                metavar="KEY",
            )
        },
    )
    key_mode: KeyMode = field(
        default=OPTION_DEFAULTS["key_mode"],
        metadata={
            "setting": Setting(
                "S3MEMORY_KEY_MODE",
                "tenant (one key per user) or kms (one KMS data key per object)",
                option="key_mode",
                choices=KEY_MODES,
            )
        },
    )
    endpoint_url: str | None = field(
        default=None,
        metadata={
            "setting": Setting(
                "S3MEMORY_ENDPOINT_URL", "S3 and KMS endpoint, e.g. an S3-compatible server", metavar="URL"
            )
        },
    )
    region: str | None = field(
        default=None,
        metadata={
            "setting": Setting(
                "S3MEMORY_REGION",
                "AWS region",
                shown="AWS_REGION, then AWS_DEFAULT_REGION, then the AWS profile's; us-east-1 with --endpoint-url",
            )
        },
    )
    sensitive_data: SensitiveDataPolicy = field(
        default=DEFAULT_SENSITIVE_DATA,
        metadata={
            "setting": Setting(
                "S3MEMORY_SENSITIVE_DATA",
                f"secrets in written text: {_listed(SENSITIVE_DATA_POLICIES)}",
                option="sensitive_data",
                choices=SENSITIVE_DATA_POLICIES,
            )
        },
    )
    instruction_policy: InstructionPolicy = field(
        default=OPTION_DEFAULTS["instruction_policy"],
        metadata={
            "setting": Setting(
                "S3MEMORY_INSTRUCTION_POLICY",
                f"written text that reads like instructions to a future session: {_listed(INSTRUCTION_POLICY_CHOICES)}",
                option="instruction_policy",
                choices=INSTRUCTION_POLICY_CHOICES,
            )
        },
    )
    timeout: float = field(
        default=DEFAULT_TIMEOUT_SECONDS,  # open_memory's None means the same 5 s: here it is said
        metadata={
            "setting": Setting(
                "S3MEMORY_TIMEOUT",
                "seconds to connect and per read of each S3 or KMS request attempt "
                f"({DEFAULT_MAX_ATTEMPTS} attempts unless AWS_MAX_ATTEMPTS)",
                option="timeout",
                metavar="SECONDS",
                read=_read_seconds,
            )
        },
    )
    track_access: bool = field(
        default=OPTION_DEFAULTS["track_access"],
        metadata={
            "setting": Setting(
                "S3MEMORY_TRACK_ACCESS", "record reads for expiry, one PUT per file per day", option="track_access"
            )
        },
    )
    encrypt_names: bool = field(
        default=OPTION_DEFAULTS["encrypt_names"],
        metadata={
            "setting": Setting(
                "S3MEMORY_ENCRYPT_NAMES", "encrypt file names in object keys (AES-SIV)", option="encrypt_names"
            )
        },
    )
    mounts: tuple[Mount, ...] = field(
        default=(),
        metadata={
            "setting": Setting(
                "S3MEMORY_MOUNTS",
                'other users\' stores shown under /memories/NAME/: a JSON list of {"name", "user_id", "access", '
                '"description", "instructions"}, or @FILE holding one',
                metavar="JSON|@FILE",
                read=_read_mounts,
            )
        },
    )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``S3MEMORY_*`` variables; ``overrides`` (not None) take precedence."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, setting in SETTINGS.items():
            value = overrides.get(name)
            if value is None:
                value = environ.get(setting.variable) or None
            if value is not None:
                values[name] = value if setting.read is None else setting.read(name, value)
        settings = cls(**values)
        _check_tenant(str(settings.user), str(settings.prefix))
        if settings.bucket is not None:
            _check_bucket(settings.bucket)
        elif settings.prefix:
            raise ConfigurationError(
                f"{setting_name('prefix')} is a key prefix in a bucket: give {setting_name('bucket')} too "
                f"(the local store keeps each user under {setting_name('store_dir')})"
            )
        elif settings.kms_key_id:
            raise ConfigurationError(
                f"{setting_name('kms_key_id')} needs {setting_name('bucket')} "
                "(the local store uses the local master key)"
            )
        return settings

    @property
    def data_home(self) -> Path:
        return self.home or default_home()

    @property
    def location(self) -> str:
        """Where the memory is, for people (no secrets)."""
        if self.bucket:
            endpoint = f" at {self.endpoint_url}" if self.endpoint_url else ""
            return f"s3://{self.bucket}/{self.prefix}{endpoint}"
        return str(self._store_path)

    @property
    def _store_path(self) -> Path:
        """The local store's directory: the one given, else ``store`` in the data home."""
        return self.store_dir or self.data_home / STORE_DIRECTORY

    def create_master_key(self) -> bool:
        """Create the local master key where the settings put it (``s3memory init``): see
        :func:`create_master_key`; at the default place, the data home is created (0700)
        as on first use. True if it was created."""
        if self.master_key_file is None:
            private_directory(self.data_home, what=f"data directory ({setting_name('home')})")
        return create_master_key(self.master_key_path)

    @property
    def master_key_path(self) -> Path:
        """The local master key file: the one given, else ``master.key`` in the data home."""
        return self.master_key_file or self.data_home / MASTER_KEY_FILE

    def aws_region(self) -> str:
        """The region of the S3 and KMS clients: see :func:`s3memory._aws.clients.resolve_region`; with a custom
        endpoint and no region, ``us-east-1``.

        Raises:
            ConfigurationError: no region is set (and no endpoint), the region is not a valid
                name, or the AWS profile does not exist.
        """
        return region_for(self.region, endpoint_url=self.endpoint_url)

    def open(self, *, actor: str = "cli") -> EncryptedMemory:
        """The configured user's own memory (without the mounts: history, review and the
        governance commands act on the user's own store). On the embedded default, creates the data home, the
        local store and the master key at its default location on first use; a master key
        file given explicitly must exist (``s3memory init`` creates one). ``actor`` is who
        its history says made the changes (``"cli"``; the MCP server says ``"mcp"``).

        Raises:
            ConfigurationError: a setting is wrong (the message names its flag and variable).
        """
        memory: EncryptedMemory = self._open(actor, None)
        return memory

    def open_tree(self, *, actor: str = "cli") -> EncryptedMemory | MountedMemory:
        """The tree the model sees: the user's memory with the ``mounts`` below it, if any
        (else the same as :meth:`open`).

        Raises:
            ConfigurationError: a setting is wrong (the message names its flag and variable).
        """
        tree: EncryptedMemory | MountedMemory = self._open(actor, self.mounts or None)
        return tree

    def _open(self, actor: str, mounts: tuple[Mount, ...] | None) -> Any:
        options = self.memory_options()
        try:
            return open_memory(**options, user_id=self.user, actor=actor, mounts=mounts)
        except ConfigurationError as error:
            raise ConfigurationError(in_setting_names(str(error))) from error

    def memory_options(self) -> dict[str, Any]:
        """The options of ``open_memory`` these settings give, without ``user_id``, ``actor``
        and ``mounts`` (for a server opening many users' memories: ``UserMemories``). Makes the
        S3 client (and KMS client), the local store or the master key as ``open`` does.

        Raises:
            ConfigurationError: a setting is wrong (the message names its flag and variable).
        """
        options: dict[str, Any]
        if self.key_mode == "kms" and not self.kms_key_id:
            raise ConfigurationError(f"--key-mode kms needs {setting_name('kms_key_id')}")
        if self.bucket:
            from ._aws.clients import new_client
            from ._aws.crt import fast_client
            from ._aws.shared import describe_s3_client

            region = self.aws_region()
            # A client of its own (one command, one memory), not the process's shared one:
            # an MCP server or a test opening memories one after another starts afresh.
            s3 = fast_client(new_client("s3", region_name=region, endpoint_url=self.endpoint_url, timeout=self.timeout))
            log.debug("S3 client: %s (%s)", *describe_s3_client(s3))
            options = {"bucket": self.bucket, "s3_client": s3, "prefix": self.prefix}
            if self.kms_key_id:
                options["kms_key_id"] = self.kms_key_id
                options["kms_client"] = new_client(
                    "kms", region_name=region, endpoint_url=self.endpoint_url, timeout=self.timeout
                )
        else:
            from .stores import LocalDirStore

            if self.kms_key_id:
                raise ConfigurationError(
                    f"{setting_name('kms_key_id')} needs {setting_name('bucket')} "
                    "(the local store uses the local master key)"
                )
            if self.store_dir is None or self.master_key_file is None:
                private_directory(self.data_home, what=f"data directory ({setting_name('home')})")
            options = {"store": LocalDirStore(self._store_path)}
        if self.key_mode == "tenant" and "kms_key_id" not in options:
            if self.master_key_file is None:
                options["master_key"] = load_or_create_master_key(self.master_key_path)
            else:
                options["master_key"] = load_master_key(self.master_key_file)
        given = {
            setting.option: getattr(self, name)
            for name, setting in SETTINGS.items()
            if setting.option and setting.option not in _WHERE and setting.option != "user_id"
        }
        return {**given, **options}


def _described(item: Field[Any]) -> Setting:
    """The field's :class:`Setting`, with its name and default, its value's name in --help, and
    how a switch or a choice is read."""
    setting: Setting = item.metadata["setting"]
    setting = replace(setting, name=item.name, default=item.default)
    if setting.choices:
        return replace(setting, metavar="[" + "|".join(setting.choices) + "]", read=_read_choice(setting.choices))
    if setting.switch:
        return replace(setting, read=_read_switch)
    return replace(setting, metavar=setting.metavar or item.name.upper())


#: Each setting, by its field's name: its variable, help, flag, how it is read, its option.
SETTINGS: dict[str, Setting] = {item.name: _described(item) for item in fields(Settings)}
#: setting name -> (environment variable, help). The README's configuration table mirrors it
#: (tests/package/test_docs.py checks that every variable is documented).
ENVIRONMENT: dict[str, tuple[str, str]] = {name: (setting.variable, setting.help) for name, setting in SETTINGS.items()}


def setting_name(name: str) -> str:
    """What a setting is called in messages: its flag and its variable."""
    return f"{SETTINGS[name].flag} ({SETTINGS[name].variable})"


# What the library calls a setting (its keyword argument) and what the settings call it.
_PYTHON_NAMES = [
    (re.compile(r'key_mode="kms" needs kms_key_id=\.\.\. and no master_key'), "--key-mode kms needs --kms-key-id"),
    (re.compile(r"^master_key must be\b"), "the master key file (--master-key-file) must hold"),
    *(
        (re.compile(rf"^{setting.option}\b(?!=)"), setting_name(name))
        for name, setting in SETTINGS.items()
        if setting.option
    ),
]
#: The options that say where the memory is: :meth:`Settings._open` gives them itself (the
#: bucket's, with the clients it builds); every other setting that is an option is given as it is.
_WHERE = ("bucket", "prefix", "kms_key_id", "timeout")


def in_setting_names(message: str) -> str:
    """A configuration message of the library in the words of the settings: ``user_id ...``
    becomes ``--user (S3MEMORY_USER) ...``. Settings' own messages already name them."""
    text = message[len("Error: ") :] if message.startswith("Error: ") else message
    for pattern, replacement in _PYTHON_NAMES:
        text = pattern.sub(replacement, text)
    return text


def default_home() -> Path:
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "s3memory"


def create_master_key(path: Path) -> bool:
    """Create a master key file at ``path`` (mode 0600) unless one is there; True if it was
    created. The directory must exist, except the default data home, created 0700.

    Raises:
        ConfigurationError: the directory is missing or unsafe, or an existing file at
            ``path`` is not a usable key (see :func:`load_master_key`).
    """
    path = Path(path).expanduser()
    if os.path.lexists(path):
        load_master_key(path)  # an unusable file is reported, never replaced
        return False
    if path.parent == default_home():
        private_directory(path.parent, what="data directory")
    elif not path.parent.is_dir():
        raise ConfigurationError(
            f"the directory of the master key file {path} does not exist; create it first (mode 0700)"
        )
    load_or_create_master_key(path)
    return True


def load_master_key(path: Path) -> bytes:
    """Read the master key at ``path``; unlike :func:`load_or_create_master_key`, a missing
    file is an error: a mistyped path must not silently start a new, empty memory."""
    path = Path(path)
    if not os.path.lexists(path):
        raise ConfigurationError(
            f"the master key file {path} ({setting_name('master_key_file')}) does not exist; "
            f"to create a new key there: s3memory init --master-key-file {path}"
        )
    return load_or_create_master_key(path)


def _check_tenant(user: str, prefix: str) -> None:
    """The user id and prefix rules (``TenantLayout``), in the settings' words."""
    from ._layout import TenantLayout

    try:
        TenantLayout(user, prefix)
    except ConfigurationError as error:
        raise ConfigurationError(in_setting_names(str(error))) from None


def _check_bucket(bucket: object) -> None:
    """Refuse what is not a bucket name (or an access point ARN), with the fix."""
    text = str(bucket)
    if text.lower().startswith("s3://"):
        name = text[5:].split("/", 1)
        hint = f"--bucket {name[0]}" + (f" --prefix {name[1]}" if len(name) > 1 and name[1] else "")
        raise ConfigurationError(
            f"{setting_name('bucket')} takes the bucket's name, not a URL: {printable_value(text)}; try {hint}"
        )
    if not (text.startswith("arn:") or _BUCKET_NAME.fullmatch(text)):
        raise ConfigurationError(
            f"{setting_name('bucket')} {printable_value(text)} is not a bucket name "
            "(letters, digits, dots, hyphens and underscores, starting and ending with a letter or digit)"
        )


_BUCKET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")


def printable_value(value: object) -> str:
    """A setting's value quoted for a message, bounded (it may come from anywhere)."""
    text = repr(str(value) if isinstance(value, Path) else value)
    return text if len(text) <= 80 else text[:77] + "..."
