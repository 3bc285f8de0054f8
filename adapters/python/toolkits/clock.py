"""Time: the current time in any IANA time zone."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel

from adapters.python import ToolError, Toolkit, tool


class Now(BaseModel):
    iso: str
    timezone: str
    unix: float


@tool(name="Now")
def now(
    timezone: Annotated[str | None, "IANA time zone name such as Europe/Paris; UTC when absent"] = None,
) -> Now:
    """The current date and time."""
    zone_name = timezone or "UTC"
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"Unknown time zone {zone_name!r}",
            developer_message="timezone must be an IANA name from the tz database",
            additional_prompt_content="Use a name such as 'UTC', 'Europe/Paris' or 'America/New_York'.",
        ) from None
    moment = datetime.now(zone)
    return Now(iso=moment.isoformat(), timezone=zone_name, unix=moment.timestamp())


toolkit = Toolkit("Time", [now], description="Clocks and time zones")
