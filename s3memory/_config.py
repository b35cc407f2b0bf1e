"""Settings shared by the command line and the MCP server: one table of options, each with
its environment variable, and how to open the configured memory.

The embedded default needs no AWS account: a local directory store and a local master key
file, created 0600 on first use. A bucket switches to S3; a KMS key id makes KMS wrap the
tenant key (or, with key mode ``kms``, every object's data key).
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
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
    "region": ("S3MEMORY_REGION", "AWS region [boto3's: AWS_REGION, ~/.aws/config]"),
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

    def open(self) -> EncryptedMemory:
        """The configured user's memory; creates the local store and master key on first use."""
        options: dict[str, Any]
        if self.bucket:
            import boto3

            from .stores._s3 import default_s3_client

            s3 = default_s3_client(endpoint_url=self.endpoint_url, region_name=self.region)
            options = {"bucket": self.bucket, "s3_client": s3, "prefix": self.prefix}
            if self.kms_key_id:
                options["kms_key_id"] = self.kms_key_id
                options["kms_client"] = boto3.client("kms", endpoint_url=self.endpoint_url, region_name=self.region)
        else:
            from .stores import LocalDirStore

            if self.kms_key_id:
                raise ConfigurationError("a KMS key needs a bucket (the local store uses the local master key)")
            self.data_home.mkdir(parents=True, exist_ok=True, mode=0o700)
            options = {"store": LocalDirStore(self.store_dir or self.data_home / "store")}
        if self.key_mode == "tenant" and "kms_key_id" not in options:
            options["master_key"] = load_or_create_master_key(self.master_key_file or self.data_home / "master.key")
        return open_memory(
            user_id=self.user,
            key_mode=self.key_mode,
            sensitive_data=self.sensitive_data,
            track_access=self.track_access,
            encrypt_names=self.encrypt_names,
            **options,
        )


def load_or_create_master_key(path: Path) -> bytes:
    """Read the base64 master key at ``path``, creating it (mode 0600) if it is missing."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(base64.b64encode(generate_master_key()).decode() + "\n")
    if path.stat().st_mode & 0o077:
        print(f"s3memory: warning: {path} is readable by other users; chmod 600 it", file=sys.stderr)
    try:
        key = base64.b64decode(path.read_text().strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"the master key file {path} is not base64") from None
    if len(key) != 32:
        raise ConfigurationError(f"the master key file {path} must hold 32 bytes (base64)")
    return key
