"""Who is calling: named API keys, read from a key file or an environment variable.

A key file holds one key a line, `name: key`, with `admin` after the key for a key that may
read every served run; blank lines and lines starting with `#` are skipped. An environment
variable holds the same entries separated by newlines or commas, or one bare key (the caller
`default`). Keys are bearer tokens (letters, digits and `-._~+/=`, 16 to 512 characters);
names are letters, digits and `_.-`. Only a digest of each key is kept, and a presented key is
compared with every one of them in constant time, so neither the answer nor its timing says
which key came close. Without keys the server is one user's, on loopback: every request is
the caller `local`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentbench.errors import UsageError

LOCAL = "local"  # the one caller of a server without keys (no key may take the name)
DEFAULT = "default"  # the caller of a bare key in an environment variable
MAX_KEYS = 1000
MAX_KEY_FILE_BYTES = 64 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_KEY = re.compile(r"[A-Za-z0-9\-._~+/=]{16,512}")
_ENTRY = re.compile(r"(?P<name>[^:\s]*)\s*:\s*(?P<key>\S*)(?:\s+(?P<role>\S+))?\s*")


@dataclass(frozen=True)
class Caller:
    """The holder of one key (by its name), or the keyless server's one user."""

    name: str
    admin: bool = False

    def may_see(self, owner: str | None) -> bool:
        """Whether this caller may read a served run started by `owner` (None: not served)."""
        return owner is not None and (self.admin or owner == self.name)


@dataclass(frozen=True)
class _Key:
    caller: Caller
    digest: bytes = field(repr=False)


class Keyring:
    """The named keys a server accepts; empty: no keys (loopback, one user)."""

    def __init__(self, entries: Iterable[tuple[Caller, str]] = ()) -> None:
        entries = list(entries)
        self._keys = [_Key(caller, _digest(key)) for caller, key in entries]
        # The keys themselves, only to mask them wherever they appear (a key pasted into a
        # message): the store and every answer treat them as secrets.
        self.secrets = tuple(key for _, key in entries)

    def __repr__(self) -> str:
        return f"Keyring({', '.join(c.name for c in self.callers)})"

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def callers(self) -> list[Caller]:
        return [key.caller for key in self._keys]

    def identify(self, presented: str) -> Caller | None:
        """The caller whose key this is, or None. Every key is compared, each in constant
        time, whichever matches."""
        digest = _digest(presented)
        found: Caller | None = None
        for key in self._keys:
            if hmac.compare_digest(digest, key.digest):
                found = key.caller
        return found


def is_loopback(name: str) -> bool:
    """Whether a host name or address is this machine's loopback (`localhost`, 127.0.0.0/8,
    `::1`): where a server without keys may listen, and the only names it answers to."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


@dataclass
class KeyEntries:
    """Keys read so far, by name, checked as a whole when all sources are read."""

    entries: list[tuple[Caller, str]] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)  # name → where it was given

    def add(self, caller: Caller, key: str, where: str) -> None:
        if caller.name in self.where:
            raise UsageError(
                f"{where}: key name {caller.name!r} is given twice (also at "
                f"{self.where[caller.name]}); each caller needs a name of its own"
            )
        for other, known in self.entries:
            if hmac.compare_digest(_digest(known), _digest(key)):
                raise UsageError(
                    f"{where}: the key of {caller.name!r} is also the key of {other.name!r}: "
                    "give each caller its own key"
                )
        if len(self.entries) >= MAX_KEYS:
            raise UsageError(f"{where}: more than {MAX_KEYS:,} keys")
        self.entries.append((caller, key))
        self.where[caller.name] = where

    def keyring(self) -> Keyring:
        return Keyring(self.entries)


def read_key_file(path: Path, into: KeyEntries) -> None:
    """Add the keys of a key file, or UsageError naming the file, line and what is wrong."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"--keys {path}: cannot read it: {exc.strerror}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise UsageError(
            f"--keys {path}: over {MAX_KEY_FILE_BYTES // 1024} KiB; a key file holds at most "
            f"{MAX_KEYS:,} 'name: key' lines"
        )
    try:
        # A byte order mark is how some editors (Notepad) start UTF-8: not part of a name.
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--keys {path}: not UTF-8 text (byte {exc.start})") from None
    before = len(into.entries)
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            _add_entry(stripped, f"{path}:{number}", into)
    if len(into.entries) == before:
        raise UsageError(f"--keys {path}: holds no key (expected lines 'name: key')")


def read_key_variable(variable: str, value: str | None, into: KeyEntries) -> None:
    """Add the keys of an environment variable: entries separated by newlines or commas, or
    one bare key (the caller `default`)."""
    where = f"--api-key-env {variable}"
    if value is None:
        raise UsageError(f"{where}: that environment variable is not set")
    value = value.strip().removeprefix("\ufeff").strip()
    if not value:
        raise UsageError(
            f"{where}: that environment variable is set but empty (expected 'name: key' "
            "entries, or one key)"
        )
    if ":" not in value:
        _check_key(value, where)
        into.add(Caller(DEFAULT), value, where)
        return
    for number, entry in enumerate(re.split(r"[\n,]", value), start=1):
        if entry.strip():
            _add_entry(entry.strip(), f"{where} (entry {number})", into)


def _add_entry(text: str, where: str, into: KeyEntries) -> None:
    match = _ENTRY.fullmatch(text)
    if match is None:
        raise UsageError(f"{where}: expected 'name: key' (or 'name: key admin')")
    name, key, role = match.group("name"), match.group("key"), match.group("role")
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"{where}: key name {name!r}: expected 1 to 64 letters, digits, '_', '.' or '-'"
        )
    if name == LOCAL:
        raise UsageError(f"{where}: the name {LOCAL!r} is the keyless server's; choose another")
    if role not in (None, "admin"):
        raise UsageError(f"{where}: after the key, only 'admin' may follow (got {role!r})")
    _check_key(key, where)
    into.add(Caller(name, admin=role == "admin"), key, where)


def _check_key(key: str, where: str) -> None:
    if not _KEY.fullmatch(key):
        what = f"{len(key)} characters" if len(key) < 16 or len(key) > 512 else "other characters"
        raise UsageError(
            f"{where}: a key is 16 to 512 letters, digits or '-._~+/=' (this one has {what}); "
            "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
