"""Ratchet's Python client: track Gemini, OpenAI and Anthropic long-running jobs, wait for them, watch every change,
verify effects.

    from ratchet_client import RatchetClient
    ratchet = RatchetClient("http://127.0.0.1:3000")      # the token from RATCHET_API_TOKEN
    ratchet.track("batches/123")
    done = ratchet.wait_for("batches/123", timeout=3600)  # never misses a change made before the call

The standard library only; AsyncRatchetClient needs httpx. See docs/python.md.
"""

from ._async import AsyncRatchetClient
from ._client import RatchetClient
from ._effects import verify_effect
from ._errors import EffectVerificationError, RatchetError
from ._anthropic import track_anthropic_jobs
from ._genai import track_jobs
from ._openai import track_openai_jobs
from ._types import (
    Change,
    ChangePage,
    Effect,
    EffectData,
    HistoryEntry,
    Operation,
    OperationPage,
    PollingStatus,
    RequestCounts,
    Result,
    State,
    Tracked,
    WatchedChange,
)

__version__ = "0.1.0"
__all__ = [
    "AsyncRatchetClient",
    "Change",
    "ChangePage",
    "Effect",
    "EffectData",
    "EffectVerificationError",
    "HistoryEntry",
    "Operation",
    "OperationPage",
    "PollingStatus",
    "RatchetClient",
    "RatchetError",
    "RequestCounts",
    "Result",
    "State",
    "Tracked",
    "WatchedChange",
    "track_anthropic_jobs",
    "track_jobs",
    "track_openai_jobs",
    "verify_effect",
]
