"""Settings shared by the command line and the MCP server: one table of options, each with
its environment variable, and how to open the configured memory.

The embedded default needs no AWS account: a local directory store and a local master key
file, created 0600 on first use (directories 0700). Both are refused, not merely warned
about, when another user owns them or may write to them (or, for the key, read it). A
bucket switches to S3; a KMS key id makes KMS wrap the tenant key (or, with key mode
``kms``, every object's data key). Reading and creating the key file safely is in
``_keyfile``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ._aws.clients import DEFAULT_TIMEOUT_SECONDS, check_timeout, region_for
from ._core.memory import EncryptedMemory
from ._core.mounts import Mount, MountedMemory, mounts_from_json
from ._core.quarantine import DEFAULT_INSTRUCTION_POLICY, INSTRUCTION_POLICIES, InstructionPolicy
from ._crypto.keyfile import _private_directory, load_or_create_master_key
from ._errors import ConfigurationError
from ._factory import KeyMode, SensitiveDataPolicy, open_memory

#: option name -> (environment variable, help). The README's configuration table mirrors it
#: (tests/test_docs.py checks that every variable is documented).
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "home": ("S3MEMORY_HOME", "data directory of the embedded default [~/.local/share/s3memory]"),
    "store_dir": ("S3MEMORY_STORE_DIR", "local store directory [$S3MEMORY_HOME/store]"),
    "master_key_file": ("S3MEMORY_MASTER_KEY_FILE", "local master key file [$S3MEMORY_HOME/master.key]"),
    "user": ("S3MEMORY_USER", "user id, the tenant [local]"),
    "bucket": ("S3MEMORY_BUCKET", "S3 bucket; unset: the local store"),
    "prefix": ("S3MEMORY_PREFIX", "key prefix in the bucket, ending in / [none]"),
    "kms_key_id": ("S3MEMORY_KMS_KEY_ID", "KMS key (id, ARN or alias) wrapping the tenant key"),
    "key_mode": ("S3MEMORY_KEY_MODE", "tenant (one key per user) or kms (one KMS data key per object) [tenant]"),
    "endpoint_url": ("S3MEMORY_ENDPOINT_URL", "S3 and KMS endpoint, e.g. an S3-compatible server"),
    "region": (
        "S3MEMORY_REGION",
        "AWS region [AWS_REGION, then AWS_DEFAULT_REGION, then the AWS profile's; us-east-1 with --endpoint-url]",
    ),
    "sensitive_data": ("S3MEMORY_SENSITIVE_DATA", "secrets in written text: refuse, redact or allow [refuse]"),
    "instruction_policy": (
        "S3MEMORY_INSTRUCTION_POLICY",
        "written text that reads like instructions to a future session: flag, quarantine or allow [flag]",
    ),
    "timeout": (
        "S3MEMORY_TIMEOUT",
        "seconds to connect and per read of each S3 or KMS request attempt (3 attempts unless AWS_MAX_ATTEMPTS) [5]",
    ),
    "track_access": (
        "S3MEMORY_TRACK_ACCESS",
        "record reads for expiry, one PUT per file per day [off; the variable takes 1 or 0]",
    ),
    "encrypt_names": (
        "S3MEMORY_ENCRYPT_NAMES",
        "encrypt file names in object keys (AES-SIV) [off; the variable takes 1 or 0]",
    ),
    "mounts": (
        "S3MEMORY_MOUNTS",
        'other users\' stores shown under /memories/NAME/: a JSON list of {"name", "user_id", "access", '
        '"description", "instructions"}, or @FILE holding one [none]',
    ),
}


def setting_name(name: str) -> str:
    """What a setting is called in messages: its flag and its variable."""
    return f"--{name.replace('_', '-')} ({ENVIRONMENT[name][0]})"


# What the library calls a setting (its keyword argument) and what the settings call it.
_PYTHON_NAMES = [
    (re.compile(r'key_mode="kms" needs kms_key_id=\.\.\. and no master_key'), "--key-mode kms needs --kms-key-id"),
    (re.compile(r"^master_key must be\b"), "the master key file (--master-key-file) must hold"),
    *(
        (re.compile(rf"^{python}\b(?!=)"), setting_name(setting))
        for python, setting in (
            ("user_id", "user"),
            ("prefix", "prefix"),
            ("kms_key_id", "kms_key_id"),
            ("bucket", "bucket"),
        )
    ),
]


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


@dataclass(frozen=True)
class Settings:
    """Where one user's memory lives and how it is keyed."""

    home: Path | None = None
    store_dir: Path | None = None
    master_key_file: Path | None = None
    user: str = "local"
    bucket: str | None = None
    prefix: str = ""
    kms_key_id: str | None = None
    key_mode: KeyMode = "tenant"
    endpoint_url: str | None = None
    region: str | None = None
    sensitive_data: SensitiveDataPolicy = "refuse"
    instruction_policy: InstructionPolicy = DEFAULT_INSTRUCTION_POLICY
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    track_access: bool = False
    encrypt_names: bool = False
    mounts: tuple[Mount, ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``S3MEMORY_*`` variables; ``overrides`` (not None) take precedence."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            value = overrides.get(field.name)
            if value is None:
                value = environ.get(ENVIRONMENT[field.name][0]) or None
            if value is not None:
                values[field.name] = value
        for name in ("home", "store_dir", "master_key_file"):
            if name in values:
                if not str(values[name]):  # Path("") would be the current directory
                    raise ConfigurationError(f"{setting_name(name)} is empty: give a path, or leave it unset")
                values[name] = Path(values[name]).expanduser()
        if values.get("key_mode", "tenant") not in ("tenant", "kms"):
            raise ConfigurationError(
                f"{setting_name('key_mode')} must be 'tenant' or 'kms', not {printable_value(values['key_mode'])}"
            )
        if values.get("sensitive_data", "refuse") not in ("refuse", "redact", "allow"):
            raise ConfigurationError(
                f"{setting_name('sensitive_data')} must be 'refuse', 'redact' or 'allow', "
                f"not {printable_value(values['sensitive_data'])}"
            )
        if values.get("instruction_policy", DEFAULT_INSTRUCTION_POLICY) not in INSTRUCTION_POLICIES:
            raise ConfigurationError(
                f"{setting_name('instruction_policy')} must be 'flag', 'quarantine' or 'allow', "
                f"not {printable_value(values['instruction_policy'])}"
            )
        if "timeout" in values:
            values["timeout"] = check_timeout(values["timeout"], name=setting_name("timeout"))
        for name in ("track_access", "encrypt_names"):
            flag = values.get(name, False)
            if isinstance(flag, str):
                if flag.lower() not in ("1", "0", "true", "false", "yes", "no", ""):
                    raise ConfigurationError(f"{ENVIRONMENT[name][0]} must be 1 or 0, not {printable_value(flag)}")
                values[name] = flag.lower() in ("1", "true", "yes")
        if isinstance(values.get("mounts"), str):
            values["mounts"] = _read_mounts(values["mounts"])
        _check_tenant(str(values.get("user", "local")), str(values.get("prefix", "")))
        if "bucket" in values:
            _check_bucket(values["bucket"])
        elif values.get("prefix"):
            raise ConfigurationError(
                f"{setting_name('prefix')} is a key prefix in a bucket: give {setting_name('bucket')} too "
                f"(the local store keeps each user under {setting_name('store_dir')})"
            )
        elif values.get("kms_key_id"):
            raise ConfigurationError(
                f"{setting_name('kms_key_id')} needs {setting_name('bucket')} "
                "(the local store uses the local master key)"
            )
        return cls(**values)

    @property
    def data_home(self) -> Path:
        return self.home or default_home()

    @property
    def location(self) -> str:
        """Where the memory is, for people (no secrets)."""
        if self.bucket:
            endpoint = f" at {self.endpoint_url}" if self.endpoint_url else ""
            return f"s3://{self.bucket}/{self.prefix}{endpoint}"
        return str(self.store_dir or self.data_home / "store")

    def create_master_key(self) -> bool:
        """Create the local master key where the settings put it (``s3memory init``): see
        :func:`create_master_key`; at the default place, the data home is created (0700)
        as on first use. True if it was created."""
        if self.master_key_file is None:
            _private_directory(self.data_home, what=f"data directory ({setting_name('home')})")
        return create_master_key(self.master_key_path)

    @property
    def master_key_path(self) -> Path:
        """The local master key file: the one given, else ``master.key`` in the data home."""
        return self.master_key_file or self.data_home / "master.key"

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
        options: dict[str, Any]
        if self.key_mode == "kms" and not self.kms_key_id:
            raise ConfigurationError(f"--key-mode kms needs {setting_name('kms_key_id')}")
        if self.bucket:
            from ._aws.clients import new_client

            region = self.aws_region()
            s3 = new_client("s3", region_name=region, endpoint_url=self.endpoint_url, timeout=self.timeout)
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
                _private_directory(self.data_home, what=f"data directory ({setting_name('home')})")
            options = {"store": LocalDirStore(self.store_dir or self.data_home / "store")}
        if self.key_mode == "tenant" and "kms_key_id" not in options:
            if self.master_key_file is None:
                options["master_key"] = load_or_create_master_key(self.master_key_path)
            else:
                options["master_key"] = load_master_key(self.master_key_file)
        try:
            return open_memory(
                user_id=self.user,
                key_mode=self.key_mode,
                sensitive_data=self.sensitive_data,
                instruction_policy=self.instruction_policy,
                track_access=self.track_access,
                encrypt_names=self.encrypt_names,
                actor=actor,
                mounts=mounts,
                **options,
            )
        except ConfigurationError as error:
            raise ConfigurationError(in_setting_names(str(error))) from error


def _read_mounts(value: str) -> tuple[Mount, ...]:
    """``--mounts``: JSON, or ``@FILE`` holding it."""
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigurationError(
                f"{setting_name('mounts')}: cannot read {printable_value(value[1:])} ({error})"
            ) from None
    try:
        return mounts_from_json(text)
    except ConfigurationError as error:
        raise ConfigurationError(f"{setting_name('mounts')}: {error}") from None


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
        _private_directory(path.parent, what="data directory")
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
