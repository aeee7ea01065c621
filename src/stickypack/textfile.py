"""Reading a user's text file (a policy, the simulator's or the extender's configuration).

Outside ``core`` because it does I/O; the callers turn :class:`TextFileError` into their own
error type, so each command reports a file it cannot read in one line, as it does bad YAML.
"""

from __future__ import annotations

from pathlib import Path


class TextFileError(ValueError):
    """A file that cannot be read as UTF-8 text; the message is one line naming the file."""


def read_text_file(path: Path) -> str:
    """The UTF-8 text of ``path``; :class:`TextFileError` if it is missing, unreadable or not
    UTF-8 (a binary file given by mistake)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TextFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        raise TextFileError(f"{path}: not UTF-8 text (byte 0x{byte:02x} at offset {exc.start})") from None
