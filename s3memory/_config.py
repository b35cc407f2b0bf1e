"""Settings shared by the command line and the MCP server: one table of options, each with
its environment variable, and how to open the configured memory.

The embedded default needs no AWS account: a local directory store and a local master key
file, created 0600 on first use (directories 0700). Both are refused, not merely warned
about, when another user owns them or may write to them (or, for the key, read it). A
bucket switches to S3; a KMS key id makes KMS wrap the tenant key (or, with key mode
``kms``, every object's data key).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ._errors import ConfigurationError
from ._factory import KeyMode, SensitiveDataPolicy, open_memory
from ._keys import generate_master_key
from ._memory import EncryptedMemory

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
    "track_access": ("S3MEMORY_TRACK_ACCESS", "record reads for expiry, one PUT per file per day: 1 or 0 [0]"),
    "encrypt_names": ("S3MEMORY_ENCRYPT_NAMES", "encrypt file names in object keys (AES-SIV): 1 or 0 [0]"),
}


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
    track_access: bool = False
    encrypt_names: bool = False

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
                values[name] = Path(values[name]).expanduser()
        if values.get("key_mode", "tenant") not in ("tenant", "kms"):
            raise ConfigurationError(f"key mode must be 'tenant' or 'kms', not {values['key_mode']!r}")
        if values.get("sensitive_data", "refuse") not in ("refuse", "redact", "allow"):
            raise ConfigurationError(
                f"sensitive data must be 'refuse', 'redact' or 'allow', not {values['sensitive_data']!r}"
            )
        for name in ("track_access", "encrypt_names"):
            flag = values.get(name, False)
            if isinstance(flag, str):
                if flag.lower() not in ("1", "0", "true", "false", "yes", "no", ""):
                    raise ConfigurationError(f"{ENVIRONMENT[name][0]} must be 1 or 0, not {flag!r}")
                values[name] = flag.lower() in ("1", "true", "yes")
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

    def aws_region(self) -> str:
        """The region of the S3 and KMS clients: see :func:`resolve_region`; with a custom
        endpoint and no region, ``us-east-1``.

        Raises:
            ConfigurationError: no region is set (and no endpoint), the region is not a valid
                name, or the AWS profile does not exist.
        """
        found = resolve_region(self.region)
        if found is not None:
            return found[0]
        if self.endpoint_url:
            # An S3-compatible server (radosgw, MinIO, LocalStack) needs a region only to sign
            # requests, and takes us-east-1: botocore's own default for S3 without a region.
            return CUSTOM_ENDPOINT_REGION
        session = _aws_session()
        raise ConfigurationError(
            "no AWS region for the S3 bucket: set one with --region or S3MEMORY_REGION, AWS_REGION, "
            f"AWS_DEFAULT_REGION, or region = ... in the AWS profile {session.profile or 'default'!r} "
            f"of {session.get_config_variable('config_file')}"
        )

    def open(self) -> EncryptedMemory:
        """The configured user's memory; creates the local store and master key on first use."""
        options: dict[str, Any]
        if self.bucket:
            import boto3
            from botocore.exceptions import ProfileNotFound

            from .stores._s3 import default_s3_client

            region = self.aws_region()
            try:  # the credentials are the AWS profile's too: it may be missing even with a region
                s3 = default_s3_client(endpoint_url=self.endpoint_url, region_name=region)
                options = {"bucket": self.bucket, "s3_client": s3, "prefix": self.prefix}
                if self.kms_key_id:
                    options["kms_key_id"] = self.kms_key_id
                    options["kms_client"] = boto3.client("kms", endpoint_url=self.endpoint_url, region_name=region)
            except ProfileNotFound:
                raise _missing_profile(_aws_session()) from None
        else:
            from .stores import LocalDirStore

            if self.kms_key_id:
                raise ConfigurationError("a KMS key needs a bucket (the local store uses the local master key)")
            if self.store_dir is None:
                _private_directory(self.data_home, what="data directory")
            options = {"store": LocalDirStore(self.store_dir or self.data_home / "store")}
        if self.key_mode == "tenant" and "kms_key_id" not in options:
            if self.master_key_file is None:
                _private_directory(self.data_home, what="data directory")
            options["master_key"] = load_or_create_master_key(self.master_key_file or self.data_home / "master.key")
        return open_memory(
            user_id=self.user,
            key_mode=self.key_mode,
            sensitive_data=self.sensitive_data,
            track_access=self.track_access,
            encrypt_names=self.encrypt_names,
            **options,
        )


#: The signing region for a custom endpoint when none is set (see ``Settings.aws_region``).
CUSTOM_ENDPOINT_REGION = "us-east-1"


def resolve_region(region: str | None = None) -> tuple[str, str] | None:
    """The AWS region and where it was found, the first of: ``region`` (the setting,
    ``--region`` or ``S3MEMORY_REGION``), ``AWS_REGION`` (which botocore ignores; AWS Lambda
    and many shells set it), ``AWS_DEFAULT_REGION``, the region of the AWS profile
    (``AWS_PROFILE``, else ``default``) in the AWS config file. None if none is set; an empty
    value is no value.

    Raises:
        ConfigurationError: the region is not a valid region name, or the AWS profile
            (needed only if no variable gives a region) does not exist or cannot be read.
    """
    from botocore.exceptions import BotoCoreError, InvalidRegionError, ProfileNotFound
    from botocore.utils import validate_region_name

    found: tuple[str, str] | None = None
    if region:
        found = region, "--region or S3MEMORY_REGION"
    else:
        for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
            if os.environ.get(variable):
                found = os.environ[variable], variable
                break
        else:
            session = _aws_session()
            try:
                value = session.get_scoped_config().get("region")
            except ProfileNotFound:
                raise _missing_profile(session) from None
            except BotoCoreError as exc:  # a configuration file that cannot be parsed
                raise ConfigurationError(f"the AWS configuration cannot be read: {exc}") from None
            if isinstance(value, str) and value:
                found = value, f"the AWS profile {session.profile or 'default'!r}"
    if found is not None:
        try:
            validate_region_name(found[0])
        except InvalidRegionError:
            raise ConfigurationError(
                f"the AWS region {found[0]!r} (from {found[1]}) is not a valid region name"
            ) from None
    return found


def _aws_session() -> Any:
    """A botocore session on the current environment and AWS configuration files."""
    import botocore.session

    return botocore.session.Session()


def _missing_profile(session: Any) -> ConfigurationError:
    return ConfigurationError(
        f"the AWS profile {session.profile!r} is in neither {session.get_config_variable('config_file')} "
        f"nor {session.get_config_variable('credentials_file')}"
    )


def _private_directory(path: Path, *, what: str) -> None:
    """Create ``path`` and its missing parents (0700); refuse it (``ConfigurationError``) if
    another user owns it or group or others may write to it, who could plant or swap files."""
    missing = []
    ancestor = path
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        missing.append(ancestor)
        ancestor = ancestor.parent
    try:
        for directory in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory, 0o700)
        st = os.stat(path)
    except OSError as exc:
        raise ConfigurationError(f"the {what} {path} cannot be created: {exc.strerror or exc}") from exc
    _check_directory(st, path, what=what)


def _check_directory(st: os.stat_result, path: Path, *, what: str, root_may_own: bool = False) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigurationError(f"the {what} {path} is not a directory")
    if st.st_uid != os.geteuid() and not (root_may_own and st.st_uid == 0):
        raise ConfigurationError(
            f"the {what} {path} is owned by another user (uid {st.st_uid}); use a directory you own"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigurationError(f"the {what} {path} is writable by other users; run: chmod go-w {path}")


_KEY_FILE_MAX_BYTES = 4096  # 44 characters of base64 and a newline; more is not a key


def load_or_create_master_key(path: Path) -> bytes:
    """Read the base64 master key at ``path``, creating it (mode 0600) if it is missing.

    The file is trusted only as the current user's private file in a directory no one else
    may write to: ``ConfigurationError`` (with the fix) if the file is a symbolic link or not
    a regular file, is owned by another user, or is readable or writable by group or others,
    or if its directory is writable by them or owned by another user (root excepted).
    Creation is atomic: the key is written to a new file (``O_EXCL|O_NOFOLLOW``, 0600) and
    linked into place only if no key is there yet, so concurrent first uses agree on one key.
    """
    path = Path(path)
    directory = path.parent
    if not os.path.lexists(directory):
        _private_directory(directory, what="directory of the master key file")
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigurationError(f"the master key's directory {directory} cannot be opened: {exc.strerror}") from exc
    try:
        _check_directory(os.fstat(dir_fd), directory, what="directory of the master key file", root_may_own=True)
        fd = _open_key_file(dir_fd, path)
        if fd is None:
            _create_key_file(dir_fd, path)
            fd = _open_key_file(dir_fd, path)
        if fd is None:
            raise ConfigurationError(f"the master key file {path} vanished while it was created")
        try:
            text = _read_key_file(fd, path)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"the master key file {path} is not base64") from None
    if len(key) != 32:
        raise ConfigurationError(f"the master key file {path} must hold 32 bytes (base64)")
    return key


def _open_key_file(dir_fd: int, path: Path) -> int | None:
    """The key file opened for reading without following a link; None if it is missing."""
    try:
        return os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigurationError(
                f"the master key file {path} is a symbolic link; s3memory reads only a regular file: "
                "replace the link with the key file itself"
            ) from None
        raise ConfigurationError(f"the master key file {path} cannot be read: {exc.strerror}") from exc


def _read_key_file(fd: int, path: Path) -> str:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ConfigurationError(f"the master key file {path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise ConfigurationError(
            f"the master key file {path} is owned by another user (uid {st.st_uid}); "
            "use a key file you own (chown it, or remove it to create a new key)"
        )
    if st.st_mode & 0o077:
        raise ConfigurationError(
            f"the master key file {path} is readable or writable by other users; run: chmod 600 {path}"
        )
    try:
        data = os.read(fd, _KEY_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"the master key file {path} cannot be read: {exc.strerror}") from exc
    if len(data) > _KEY_FILE_MAX_BYTES:
        raise ConfigurationError(f"the master key file {path} must hold 32 bytes (base64)")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigurationError(f"the master key file {path} is not base64") from None


def _create_key_file(dir_fd: int, path: Path) -> None:
    tmp = f".{path.name}.{uuid.uuid4().hex}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(base64.b64encode(generate_master_key()).decode() + "\n")
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileExistsError:
                pass  # another process created it first: its key is the key
            except OSError:  # no hard links on this file system: create in place
                with contextlib.suppress(FileExistsError):
                    fd = os.open(path.name, flags, 0o600, dir_fd=dir_fd)
                    with os.fdopen(fd, "w") as f:
                        f.write(base64.b64encode(generate_master_key()).decode() + "\n")
        finally:
            os.unlink(tmp, dir_fd=dir_fd)
    except OSError as exc:
        raise ConfigurationError(f"the master key file {path} cannot be created: {exc.strerror}") from exc
