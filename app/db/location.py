"""Where the checkpoint database is: a SQLite file path or a postgresql:// URL (`--db`, `APP_DB`),
and the local directory for what stays on this machine (REPL history, a Postgres user's corpus)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from app.errors import ConfigError

POSTGRES_SCHEMES = ("postgresql", "postgres")
DEFAULT_LOCAL_DIR = Path("checkpoints")
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
SECRET_PARAMS = frozenset({"password", "sslpassword"})
MASK = "****"


@dataclass(frozen=True)
class DatabaseLocation:
    """A parsed --db value. `label` is safe to print: a URL's password is masked."""

    kind: Literal["sqlite", "postgres"]
    path: Path | None = None
    url: str | None = None

    @property
    def is_postgres(self) -> bool:
        return self.kind == "postgres"

    @property
    def label(self) -> str:
        return mask_url(self.url) if self.url else str(self.path)

    @property
    def local_dir(self) -> Path:
        """The SQLite file's directory, or ./checkpoints for a server database."""
        return self.path.parent if self.path is not None else DEFAULT_LOCAL_DIR

    @property
    def password(self) -> str | None:
        return url_password(self.url) if self.url else None


def parse_location(value: str | Path) -> DatabaseLocation:
    """A file path (SQLite) or a postgresql:// / postgres:// URL; any other URL is refused."""
    text = str(value)
    scheme = SCHEME.match(text)
    if scheme is None:
        return DatabaseLocation("sqlite", path=Path(text))
    if scheme.group(1).lower() in POSTGRES_SCHEMES:
        try:
            urlsplit(text).port  # noqa: B018 — parses the host and port: "[::1" is refused here
        except ValueError as exc:
            raise ConfigError(
                f"the database URL in --db/APP_DB cannot be read ({exc}); give one like "
                "postgresql://user@host:5432/dbname (an IPv6 host in brackets: [::1])"
            ) from None
        return DatabaseLocation("postgres", url=text)
    raise ConfigError(
        f"unsupported database URL scheme {scheme.group(1)!r} in --db/APP_DB: give a SQLite file "
        "path or a postgresql://user@host:5432/dbname URL"
    )


def url_password(url: str) -> str | None:
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        return userinfo.split(":", 1)[1] or None
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in SECRET_PARAMS and value:
            return value
    return None


def mask_url(url: str) -> str:
    """The URL with any password (in the user part or a password= parameter) replaced by ****."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparseable database URL)"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = f"{userinfo.split(':', 1)[0]}:{MASK}"
    netloc = f"{userinfo}@{hosts}" if at else hosts
    query = parse_qsl(parts.query, keep_blank_values=True)
    masked = [(k, MASK if k in SECRET_PARAMS else v) for k, v in query]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(masked, safe="*"), ""))


def scrub(text: str, location: DatabaseLocation) -> str:
    """`text` with the location's password and raw URL replaced by their masked forms."""
    if location.url:
        text = text.replace(location.url, location.label)
    secret = location.password
    for form in {secret, unquote(secret)} if secret else ():
        text = text.replace(form, MASK)
    return text
