"""Credentials come from the environment, never from a config file: a config is recorded whole
(`logs/slurm/config.json`, the pickled pipeline, datatrove's `executor.json`, the config hash), so a
value in it would be in every one of those. Here: reading a secret from a named environment variable
as a `SecretStr`, refusing credentials in a config, and URLs with their userinfo and query removed
for any record or message."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

from configs.base import ConfigError

# what an environment variable's name may be (POSIX)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# fsspec/s3fs/gcsfs/adlfs/huggingface_hub option names that carry a credential; s3fs and botocore read
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (or AWS_PROFILE) from the environment,
# huggingface_hub HF_TOKEN
CREDENTIAL_OPTIONS = frozenset({
    "key", "secret", "token", "password", "passwd", "session_token", "access_key", "secret_key",
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "account_key", "sas_token",
    "client_secret", "connection_string", "hf_token", "api_key", "headers", "auth",
})


def secret_from_env(variable: str, key: str) -> SecretStr:
    """The value of environment variable `variable` as a SecretStr (its `str()` and `repr()` are
    '**********'); `key` is the config key that named it, for the message."""
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"{key}: the environment variable {variable} is not set (or empty): export it in the "
                          "shell (or the job's environment) that runs the suite")
    return SecretStr(value)


def check_env_name(value: str | None, key: str) -> str | None:
    if value is not None and not ENV_NAME.fullmatch(value):
        raise ValueError(f"{key} names an environment variable: letters, digits and '_' (e.g. DRIPPER_API_KEY); "
                         "the value itself goes in that variable, never in the config")
    return value


def redact_url(url: str) -> str:
    """`url` without userinfo (user:password@) and without its query and fragment (a presigned URL's
    signature): what a record or a message may show. A path that is not a URL is returned as given."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    redacted = urlunsplit((parts.scheme, host, parts.path, "", ""))
    return redacted + ("?<redacted>" if parts.query or parts.fragment else "")


def refuse_credentials_in_url(url: str, key: str) -> str:
    """A URL given in a config must carry no credential (userinfo, a query string such as a presigned
    URL's signature): the config is recorded whole. The message shows the URL redacted."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise ValueError(
                f"{key}: {redact_url(url)} carries userinfo or a query string, which the suite would record in "
                "the output root (config.json, the manifest, every document's metadata): give the URL without "
                "them and the credentials in the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/"
                "AWS_SESSION_TOKEN or AWS_PROFILE for s3://, HF_TOKEN for hf://, ~/.netrc for https://)")
    return url


def refuse_credential_options(options: dict, key: str) -> dict:
    """fsspec storage options must carry no credential, at any depth (the message names the option, not its value)."""
    def walk(value, where: str) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                if str(name).lower() in CREDENTIAL_OPTIONS:
                    raise ValueError(
                        f"{where}.{name}: credentials in a config would be recorded in the output root "
                        "(config.json, the pickled pipeline, the config hash): remove it and export them instead "
                        "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN or AWS_PROFILE for s3://, "
                        "HF_TOKEN for hf://), or use storage_options.profile: NAME")
                walk(inner, f"{where}.{name}")
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                walk(inner, f"{where}[{i}]")
    walk(options, key)
    return options
