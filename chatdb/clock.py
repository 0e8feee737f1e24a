"""Timestamps as ISO 8601 UTC text: readable, and they sort as text."""

from datetime import datetime, timezone


def now() -> str:
    return to_iso(datetime.now(timezone.utc))


def to_iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def from_unix(seconds: float) -> str:
    return to_iso(datetime.fromtimestamp(seconds, timezone.utc))
