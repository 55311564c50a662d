"""What counts as a secret in a job's environment and argv, and how it is hidden.

The run directory (`run.json`), distrecipe's own log lines and `--dry-run` output
are shared and pasted into issues, so a secret is recognised two ways:

* **by name**: an environment variable or a command-line option whose name contains
  TOKEN, SECRET, KEY, PASS (PASSWORD, PASSWD, PASSPHRASE), CREDENTIAL, AUTH, DSN,
  WEBHOOK, CONNECTION_STRING or COOKIE (any case; `--hf_token`, `--db-password=…`);
* **by value**, whatever the name: a URL with `user:password@` (`DATABASE_URL`,
  `HTTPS_PROXY`), a PEM block (`-----BEGIN … PRIVATE KEY-----`), a bearer or basic
  authorisation, and the shapes of well-known tokens (GitHub `ghp_…`, Hugging Face
  `hf_…`, OpenAI `sk-…`, Slack `xox…-`, AWS `AKIA…`, JSON Web Tokens).

A redacted value is replaced whole by `REDACTED`, never partly kept. Free text (a
comment in a recipe) is a secret when it holds a secret-shaped value or names a secret
and gives it a value (`api_key: x`, `TOKEN=x`, `--hf_token x`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

REDACTED = "<redacted>"

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|KEY|PASS|CREDENTIAL|AUTH|DSN|WEBHOOK|CONNECTION_?STRING|COOKIE", re.IGNORECASE)
"""A name (variable or option) that says its value is a secret."""

SECRET_VALUE = re.compile(
    r"[a-z][a-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"          # URL with user:password@
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"              # PEM private key
    r"|\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"      # Authorization header values
    r"|\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"
    r"|\bhf_[A-Za-z0-9]{20,}"
    r"|\bsk-[A-Za-z0-9_-]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.",  # JSON Web Token
    re.IGNORECASE,
)
"""A value that is a secret whatever it is called."""


def is_secret(name: str, value: str) -> bool:
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.search(value))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment, sorted, with every secret value (by name or by value) replaced."""
    return {name: REDACTED if is_secret(name, value) else value for name, value in sorted(env.items())}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with secrets replaced: `--token X`, `--token=X`, `NAME=X` and secret-looking words.

    An option is a word starting with `-`; its value is the rest after `=`, or the next
    word when that does not itself start with `-`.
    """
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next and not word.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        name, sep, _ = word.partition("=")
        if sep and SECRET_NAME.search(name):
            out.append(f"{name}={REDACTED}")
        elif SECRET_VALUE.search(word):
            out.append(REDACTED)
        else:
            out.append(word)
            hide_next = word.startswith("-") and not sep and bool(SECRET_NAME.search(word))
    return out


def secret_in_text(text: str) -> bool:
    """Free text (a comment) holds a secret: by value anywhere, or a secret name followed
    by its value, as an option, an assignment or a mapping key (`api_key: x`)."""
    words = text.split()
    return bool(SECRET_VALUE.search(text)) or redact_argv(words) != words or any(
        word.endswith(":") and SECRET_NAME.search(word) for word in words[:-1])
