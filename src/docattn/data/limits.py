"""The limits that bound memory by settings, never by the input's size (docs/reliability.md lists them).

Each is an environment variable read whenever it is needed (the same for the CLI, Python code and tests),
else the default here.
"""

from __future__ import annotations

import os

from docattn.errors import ConfigError

MAX_DOCUMENT_CHARS = 1_000_000  # $DOCATTN_MAX_DOCUMENT_CHARS: the longest document kept whole
MAX_MEMBER_BYTES = 256 << 20  # $DOCATTN_MAX_MEMBER_BYTES: the largest archive member read into memory
MAX_COMPRESSION_RATIO = 100  # $DOCATTN_MAX_COMPRESSION_RATIO: unpacked : compressed bytes
RATIO_FLOOR = 8 << 20  # smaller members may compress well (a file of blanks) without being a bomb


def setting(variable: str, default: int) -> int:
    """A limit: ``$variable`` when set (a positive whole number, "_" allowed: 2_000_000), else ``default``."""
    value = os.environ.get(variable, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"${variable} must be a positive whole number, not {value!r} (unset, it is {default:,})")
    return number


def max_document_chars() -> int:
    return setting("DOCATTN_MAX_DOCUMENT_CHARS", MAX_DOCUMENT_CHARS)
