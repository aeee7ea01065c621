"""Reading mybinder.org launch-event archives (``events-YYYY-MM-DD.jsonl[.gz]``).

One JSON object a line: ``timestamp`` (ISO 8601, rounded down to the minute), ``provider``,
``spec`` and more; a file is gzip-compressed or plain, told by its first bytes, not its name.
A line that cannot be read is counted and reported (file and line of the first few), never
fatal.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import reprlib
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeGuard
from urllib.parse import unquote

#: Providers whose ``spec`` is ``<org>/<repo>/<ref>`` with the repo in two path segments.
_TWO_SEGMENT = {"GitHub": "https://github.com/", "Gist": "https://gist.github.com/"}
#: Providers whose spec has no ref.
_NO_REF = {"Zenodo", "Figshare", "Hydroshare", "Dataverse", "CKAN"}
MAX_REPORTED_ERRORS = 5
DAY = 86400.0
#: In a file not named for its day, events this far (seconds) from the file's main run of
#: events are errors: a stray year-9999 timestamp would otherwise make a replay of millennia.
MAX_GAP_S = 2 * DAY
_DAY_IN_NAME = re.compile(r"events-(\d{4}-\d{2}-\d{2})\.jsonl(\.gz)?$")


@dataclass(frozen=True, slots=True)
class Launch:
    """One launch: seconds since the start of the replay, and the repo URL (the key
    BinderHub's sticky builds hash; a ref is not part of it)."""

    t: float
    repo: str


@dataclass(slots=True)
class TraceErrors:
    """Malformed lines: a count and the first few places with their reason."""

    count: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, where: str, why: str) -> None:
        self.count += 1
        if len(self.first) < MAX_REPORTED_ERRORS:
            self.first.append(f"{where}: {why}")


def repo_url(provider: str, spec: str) -> str:
    """The repository URL BinderHub builds for a launch (the ref stripped).

    GitHub and Gist specs are ``org/repo/ref``: the first two segments (a branch name with
    a slash shows as extra segments in the re-saved archive), a GitHub repo's ``.git``
    suffix dropped. Other git providers (Git, GitLab): the URL or namespace, unquoted as
    BinderHub does: the first segment when it holds an escaped slash (``group%2Fproject/ref``),
    else all but the last segment (the re-saved archive decoded ``%2F``). DOI providers: the
    whole spec.
    """
    spec = spec.strip("/")
    if provider in _TWO_SEGMENT:
        parts = spec.split("/")
        if len(parts) < 2:
            raise ValueError(f"{provider} spec needs org/repo: {spec!r}")
        org, repo = parts[0], parts[1]
        if provider == "GitHub" and repo.endswith(".git"):  # BinderHub strips it
            repo = repo[: -len(".git")]
        return f"{_TWO_SEGMENT[provider]}{org}/{repo}"
    if provider in _NO_REF:
        return f"{provider.lower()}:{spec}"
    # escaped as BinderHub gets it, the ref is after the first slash; with the slashes
    # decoded (the re-saved archive), the ref is the last segment
    first = spec.partition("/")[0]
    head = first if "%2f" in first.lower() else spec.rpartition("/")[0] or spec
    return f"{provider.lower()}:{unquote(head)}"


#: The gzip format's first two bytes (RFC 1952): how a trace file is told to be gzip.
GZIP_MAGIC = b"\x1f\x8b"
#: Other compressed formats a trace may come in by mistake, by their first bytes: named in
#: the error, rather than each of their lines reported as malformed.
_FOREIGN_MAGIC = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}


class _NotATrace(ValueError):
    """A file whose first bytes show it holds no JSON lines (another compression format)."""


@contextmanager
def _open(path: Path) -> Iterator[Iterable[bytes]]:
    """``path``'s lines as bytes, decompressed when it starts with the gzip magic bytes,
    whatever its name. Peeked, not read twice, so a pipe (``<(zcat ...)``) works too."""
    with path.open("rb") as raw:
        head = raw.peek(6)[:6]
        if head.startswith(GZIP_MAGIC):
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield unzipped
            return
        for magic, name in _FOREIGN_MAGIC.items():
            if head.startswith(magic) and (name != "bzip2" or head[3:4].isdigit()):
                raise _NotATrace(f"{name}-compressed; only gzip and plain text are read")
        yield raw


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories to their trace files, sorted: the archive's ``events-*.jsonl[.gz]``
    files when the directory has any (so an ``index.jsonl`` beside them is not read as
    events), else every ``.jsonl``/``.jsonl.gz`` file. Files named directly are taken as is.
    (Picked by name; each is then read as gzip or text by its content.)"""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
            events = [p for p in found if p.name.startswith("events-")]
            out.extend(events or found)
        elif path.exists():
            out.append(path)
        else:
            raise FileNotFoundError(f"trace not found: {path}")
    if not out:
        raise FileNotFoundError("no .jsonl or .jsonl.gz trace files in: " + ", ".join(map(str, paths)))
    return out


def read_launches(paths: Iterable[str | Path], errors: TraceErrors) -> list[Launch]:
    """All launches of the given files, time-ordered, in seconds from the first day's start.

    Files are replayed one after the other: each file's events keep their time of day and
    its days follow the previous file's (so days from different months make one continuous
    replay without an idle gap between them). Time 0 is midnight UTC of the first event.
    """
    per_file: list[list[tuple[float, str]]] = []
    for path in trace_files(paths):
        # sorted by time only: launches in the same minute keep their order in the file
        run = _main_run(sorted(_read_file(path, errors), key=lambda stamp: stamp[0]), path, errors)
        if run:
            per_file.append([(t, repo) for t, repo, _ in run])
    per_file.sort(key=lambda file_stamps: file_stamps[0][0])
    launches: list[Launch] = []
    offset = 0.0
    for stamps in per_file:
        midnight = stamps[0][0] - stamps[0][0] % DAY
        span_days = math.floor((stamps[-1][0] - midnight) / DAY) + 1
        launches.extend(Launch(offset + t - midnight, repo) for t, repo in stamps)
        offset += span_days * DAY
    return launches


def _main_run(
    stamps: list[tuple[float, str, int]], path: Path, errors: TraceErrors
) -> list[tuple[float, str, int]]:
    """The largest run of time-sorted ``(t, repo, line number)`` events of ``path`` without a
    gap over :data:`MAX_GAP_S`; the events outside it are counted as errors."""
    runs: list[list[tuple[float, str, int]]] = []
    for stamp in stamps:
        if runs and stamp[0] - runs[-1][-1][0] <= MAX_GAP_S:
            runs[-1].append(stamp)
        else:
            runs.append([stamp])
    if len(runs) <= 1:
        return stamps
    main = max(runs, key=len)
    for run in runs:
        if run is not main:
            for t, _, lineno in run:
                days = abs(t - main[0][0]) / DAY
                why = f"timestamp {_iso(t)} is {days:,.0f} days from the file's other events"
                errors.add(f"{path}:{lineno}", why)
    return main


def _iso(t: float) -> str:
    """``t`` as ISO 8601 UTC, or as seconds when the UTC date is outside years 1-9999 (a
    timestamp with a far zone offset can be)."""
    try:
        return datetime.fromtimestamp(t, UTC).isoformat()
    except (ValueError, OverflowError, OSError):
        return f"{t:.0f} s since the epoch"


_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 80
#: ``repr(value)``, cut to a length an error message can carry.
_brief = _BRIEF.repr


def _read_file(path: Path, errors: TraceErrors) -> Iterator[tuple[float, str, int]]:
    """``(t, repo, line number)`` of each readable launch; in an archive file named for its day
    (``events-YYYY-MM-DD``), a launch on another day is an error."""
    named = _DAY_IN_NAME.search(path.name)
    day_name = named.group(1) if named else ""
    day: float | None = None
    if named:
        try:
            day = datetime.fromisoformat(day_name).replace(tzinfo=UTC).timestamp()
        except ValueError:
            why = f"the name's day {day_name} is not a date; its launches are not checked against it"
            errors.add(str(path), why)
    lineno = 0
    blank = 0
    try:
        with _open(path) as lines:
            for lineno, line in enumerate(lines, 1):
                if lineno == 1 and b"\0" in line:  # no text: one error, not one a line
                    why = "binary data, not JSON lines (a NUL byte in line 1)"
                    errors.add(str(path), f"cannot read file: {why}")
                    return
                if not line.strip():
                    blank += 1
                    continue
                where = f"{path}:{lineno}"
                parsed = _parse(line, where, errors)
                if parsed is None:
                    continue
                if day is not None and not day <= parsed[0] < day + DAY:
                    errors.add(where, f"timestamp {_iso(parsed[0])} is not on the file's day {day_name}")
                    continue
                yield parsed[0], parsed[1], lineno
    except _NotATrace as exc:
        errors.add(str(path), f"cannot read file: {exc}")
        return
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt gzip stream
        if lineno == 0 and not isinstance(exc, EOFError):
            errors.add(str(path), f"cannot read file: {exc}")
        else:  # the lines before were read (and replayed): say where reading stopped
            what = "the file ends mid-stream" if isinstance(exc, EOFError) else "cannot read further"
            errors.add(f"{path}:{lineno + 1}", f"{what}, {lineno} lines read: {exc}")
        return
    if blank == lineno:  # 0 bytes (a download that failed: gzip reads it as no data) or blank
        errors.add(str(path), "empty file, no launch events")


def _timestamp(raw: object) -> float:
    """Seconds since the epoch of an ISO 8601 ``timestamp``; without a zone it is UTC (the
    archive's zone), so a replay does not depend on the machine's local time."""
    try:
        when = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"timestamp is not ISO 8601: {_brief(raw)}") from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def _is_text(value: object) -> TypeGuard[str]:
    """``value`` is a string that UTF-8 can encode (JSON's ``"\\ud800"`` is a lone surrogate,
    which the repo's rendezvous hash could not encode)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _parse(line: bytes, where: str, errors: TraceErrors) -> tuple[float, str] | None:
    try:
        event = json.loads(line)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an int over 4300 digits
        errors.add(where, f"not JSON ({exc.msg if hasattr(exc, 'msg') else exc})")
        return None
    except RecursionError:
        errors.add(where, "JSON nested too deeply")
        return None
    if not isinstance(event, dict):
        errors.add(where, "not a JSON object")
        return None
    try:
        ts = _timestamp(event["timestamp"])
        status = event.get("status", "success")
        if not isinstance(status, str):  # a launch's outcome is a word ("success", "failure")
            raise ValueError(f"status is not a word: {_brief(status)}")
        if status != "success":
            return None
        provider, spec = event["provider"], event["spec"]
        if not _is_text(provider) or not provider:
            raise ValueError(f"provider is not a name: {_brief(provider)}")
        if not _is_text(spec) or not spec.strip("/"):
            raise ValueError(f"spec is not a repository spec: {_brief(spec)}")
        return ts, repo_url(provider, spec)
    except KeyError as exc:
        errors.add(where, f"missing field {exc}")
    except ValueError as exc:
        errors.add(where, str(exc))
    return None
