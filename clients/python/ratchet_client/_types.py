"""The API's shapes as typed dicts: what docs/openapi.json describes, as Python sees it."""

from typing import Any, Dict, List, Optional, Union

try:  # Python 3.8+
    from typing import Literal, TypedDict
except ImportError:  # pragma: no cover
    from typing_extensions import Literal, TypedDict  # type: ignore

State = Literal["PENDING", "RUNNING", "REQUIRES_ACTION", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"]
"""A job's canonical state. ``None`` where a record holds one: tracked, nothing observed yet."""

Source = Literal["webhook", "poll", "track", "overdue"]

Provider = str
"""Who runs a job: ``gemini``, ``openai``, ``anthropic``, ``bedrock``, ``azure-openai`` (more may come)."""


class RequestCounts(TypedDict, total=False):
    """A batch's requests by outcome, one shape for every provider; a count past 2**53 is its text."""

    total: Union[int, str]
    succeeded: Union[int, str]
    failed: Union[int, str]
    canceled: Union[int, str]
    expired: Union[int, str]


class Result(TypedDict, total=False):
    """A finished job's outcome: each field only where its provider gave it (more may be added)."""

    outputUri: str
    error: Dict[str, Any]
    """``code``, ``message``, ``status``: the provider's error."""
    filtered: Dict[str, Any]
    batchStats: Dict[str, Union[int, str]]
    """Gemini's batch counts: ``requestCount``, ``successfulRequestCount``, ``failedRequestCount``, ``pendingRequestCount``."""
    usage: Dict[str, Union[int, str]]
    """Tokens: ``inputTokens``, ``outputTokens``, ``totalTokens``…"""
    response: Dict[str, Any]
    tunedModel: Dict[str, str]
    requestCounts: RequestCounts
    """OpenAI's, Anthropic's and Bedrock's batch counts."""
    outputFileId: str
    errorFileId: str
    """OpenAI: the batch's output and error files."""
    fineTunedModel: str
    """OpenAI: the model a fine-tuning job made."""


class PollingStatus(TypedDict):
    nextPollAt: Optional[str]
    failedPolls: int
    notFoundPolls: int
    note: Optional[str]


class _OperationRequired(TypedDict):
    name: str
    kind: str
    provider: Provider
    state: Optional[State]
    providerState: Optional[str]
    updateTime: Optional[str]
    version: int
    previousState: Optional[State]
    stateChanged: bool
    source: Source
    eventId: Optional[str]
    result: Optional[Result]
    createdAt: str
    recordedAt: str


class Operation(_OperationRequired, total=False):
    """An operation's stored record; ``polling`` on reads (not on a track's answer)."""

    userMetadata: Optional[Dict[str, Any]]
    credential: str
    overdue: Dict[str, Any]
    resultPending: Literal[True]
    """Ended, its outcome not known yet (a bare webhook): polled until the provider gives it."""
    resultWrite: Literal[True]
    """This version is the outcome of an ended job, written after its state (``writeKind`` ``result``)."""
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
    provider: Provider
    version: int
    state: Optional[State]
    previousState: Optional[State]
    stateChanged: bool
    writeKind: Literal["track", "state-change", "refresh", "result", "overdue"]
    """``result``: an ended job's outcome learnt after its state (its effect ``operation.result``)."""
    providerState: Optional[str]
    updateTime: Optional[str]
    result: Optional[Result]
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
    provider: Provider
    state: State
    previousState: Optional[State]
    version: int
    updateTime: Optional[str]
    providerState: Optional[str]
    result: Optional[Result]


class EffectData(_EffectDataRequired, total=False):
    userMetadata: Dict[str, Any]
    overdue: Dict[str, Any]


class Effect(TypedDict):
    """An outbound effect Ratchet signed: ``id`` is ``name#version``, the same on every retry.

    ``operation.result``: a finished job's outcome learnt after its state (``data["result"]``), once, after that state's
    ``operation.state_changed``.
    """

    id: str
    type: Literal["operation.state_changed", "operation.overdue", "operation.result"]
    timestamp: str
    data: EffectData
