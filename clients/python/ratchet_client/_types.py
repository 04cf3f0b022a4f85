"""The API's shapes as typed dicts: what docs/openapi.json describes, as Python sees it."""

from typing import Any, Dict, List, Optional

try:  # Python 3.8+
    from typing import Literal, TypedDict
except ImportError:  # pragma: no cover
    from typing_extensions import Literal, TypedDict  # type: ignore

State = Literal["PENDING", "RUNNING", "REQUIRES_ACTION", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"]
"""A job's canonical state. ``None`` where a record holds one: tracked, nothing observed yet."""

Source = Literal["webhook", "poll", "track", "overdue"]


class PollingStatus(TypedDict):
    nextPollAt: Optional[str]
    failedPolls: int
    notFoundPolls: int
    note: Optional[str]


class _OperationRequired(TypedDict):
    name: str
    kind: str
    state: Optional[State]
    providerState: Optional[str]
    updateTime: Optional[str]
    version: int
    previousState: Optional[State]
    stateChanged: bool
    source: Source
    eventId: Optional[str]
    result: Optional[Dict[str, Any]]
    createdAt: str
    recordedAt: str


class Operation(_OperationRequired, total=False):
    """An operation's stored record; ``polling`` on reads (not on a track's answer)."""

    userMetadata: Optional[Dict[str, Any]]
    credential: str
    overdue: Dict[str, Any]
    polling: PollingStatus


class Tracked(TypedDict):
    operation: Operation
    created: bool
    """False when Ratchet already knew the job."""


class _PageRequired(TypedDict):
    operations: List[Operation]


class OperationPage(_PageRequired, total=False):
    nextCursor: str
    """Absent on the last page."""


class HistoryEntry(TypedDict):
    version: int
    state: Optional[State]
    previousState: Optional[State]
    stateChanged: bool
    source: Source
    eventId: Optional[str]
    updateTime: Optional[str]
    recordedAt: str


class _ChangeRequired(TypedDict):
    cursor: str
    name: str
    kind: str
    version: int
    state: Optional[State]
    previousState: Optional[State]
    stateChanged: bool
    writeKind: Literal["track", "state-change", "refresh", "overdue"]
    providerState: Optional[str]
    updateTime: Optional[str]
    result: Optional[Dict[str, Any]]
    source: Source
    createdAt: str
    recordedAt: str
    committedAt: str


class Change(_ChangeRequired, total=False):
    """One applied write, as the change feed carries it."""

    userMetadata: Dict[str, Any]
    overdue: Dict[str, Any]


class WatchedChange(Change, total=False):
    snapshot: bool
    """True for an operation as it stood when watching began (or began again), False for a change after."""


class ChangePage(TypedDict):
    changes: List[Change]
    cursor: str
    """Pass it back as ``after``: past every change returned and everything scanned."""


class _EffectDataRequired(TypedDict):
    name: str
    kind: str
    state: State
    previousState: Optional[State]
    version: int
    updateTime: Optional[str]
    providerState: Optional[str]
    result: Optional[Dict[str, Any]]


class EffectData(_EffectDataRequired, total=False):
    userMetadata: Dict[str, Any]
    overdue: Dict[str, Any]


class Effect(TypedDict):
    """An outbound effect Ratchet signed: ``id`` is ``name#version``, the same on every retry."""

    id: str
    type: Literal["operation.state_changed", "operation.overdue"]
    timestamp: str
    data: EffectData
