"""The configurations this process has run: a generation number per applied one, and the reloads refused.

The console shows it (`gateway.console`): which configuration is live, since when, and why the last reloads
failed. Bounded: the newest `KEEP` events, each message cut to `MESSAGE_CHARS`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from gateway.redaction import redact_text
from gateway.timestamps import utc_iso

KEEP = 20
MESSAGE_CHARS = 2000


def _now() -> str:
    return utc_iso()


def _shown(message: str) -> str:
    """A message as an answer may carry it: no known secret (a problem may quote a value), bounded."""
    return redact_text(message[:MESSAGE_CHARS])


@dataclass(frozen=True)
class ConfigEvent:
    at: str
    ok: bool
    generation: int  # the generation live after the event (a refused reload leaves the old one)
    source: str
    message: str


class ConfigHistory:
    def __init__(self, source: str) -> None:
        self.generation = 1
        self.source = source
        self.loaded_at = _now()
        self._events: deque[ConfigEvent] = deque(maxlen=KEEP)

    def applied(self, source: str, message: str = "") -> None:
        self.generation += 1
        self.source, self.loaded_at = source, _now()
        self._events.appendleft(ConfigEvent(self.loaded_at, True, self.generation, source, _shown(message)))

    def refused(self, source: str, message: str) -> None:
        self._events.appendleft(ConfigEvent(_now(), False, self.generation, source, _shown(message)))

    def public(self) -> dict[str, Any]:
        """Newest first."""
        return {
            "generation": self.generation,
            "source": self.source,
            "loaded_at": self.loaded_at,
            "reloads": [asdict(event) for event in self._events],
        }
