"""Dates and times of the search filters: ISO 8601, UTC unless they say otherwise."""

from datetime import date, datetime, timedelta, timezone

from ..clock import to_iso
from ..errors import SearchError


def instant(value: str, name: str) -> str:
    """An ISO 8601 time or date as created_at text; as `until`, the end of it."""
    moment, length = parse_time(value.strip())
    if moment is None:
        raise SearchError(f"{name}: {value!r} is not an ISO 8601 date or time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return to_iso(moment + length if name == "until" else moment)
    except OverflowError:
        raise SearchError(f"{name}: {value!r} is out of range") from None


def parse_time(text: str) -> tuple["datetime | None", timedelta]:
    """A date (the whole day) or a time (its millisecond: created_at's unit)."""
    try:
        day = date.fromisoformat(text)
        return datetime(day.year, day.month, day.day), timedelta(days=1)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        return moment, timedelta(milliseconds=1)
    except ValueError:
        return None, timedelta(0)
