"""What both clients decide without the network: paths, answers as errors,
what a wait has reached, and a watch's snapshot. Pure."""

import json
import os
import random
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from ._errors import RatchetError

STATES = ("PENDING", "RUNNING", "REQUIRES_ACTION", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
_RANKS = {"PENDING": 0, "RUNNING": 1, "REQUIRES_ACTION": 1, "SUCCEEDED": 2, "FAILED": 2, "CANCELLED": 2, "EXPIRED": 2}
TERMINAL_RANK = 2

#: Answers that pass: 503 (the store briefly away, or the server busy), and a proxy's 429, 502 and 504.
RETRIED = frozenset({429, 502, 503, 504})
#: Seconds one long poll waits on the server (below the 30 s many proxies allow a quiet answer).
LONG_POLL_SECONDS = 25.0
#: wait_for's reads where the server offers no long poll: 1 s, doubling to a minute.
WAIT_FIRST_SECONDS = 1.0
WAIT_MAX_SECONDS = 60.0
#: watch reconnects after a failure with backoff up to this, for as long as it is iterated.
RECONNECT_MAX_SECONDS = 5.0
#: Set on a long poll's answer by a server that waited.
LONG_POLL_HEADER = "ratchet-long-poll"
#: Why reconcile stops polling an open job for good (besides not-found).
_STOPPED_NOTES = frozenset({"invalid-name", "other-project", "expired-unseen"})

Until = Union[str, Sequence[str]]


def base_url(url: Any) -> str:
    """The API's base URL without a trailing slash, or ``invalid-url``."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise RatchetError("invalid-url", f"RatchetClient: url must be an http:// or https:// URL, got {url!r}")
    return url.rstrip("/")


def token_of(token: Optional[str]) -> Optional[str]:
    """The token given, else RATCHET_API_TOKEN's first (it may hold several)."""
    if token:
        return token
    tokens = [t for t in os.environ.get("RATCHET_API_TOKEN", "").replace(",", " ").split() if t]
    return tokens[0] if tokens else None


def headers_of(token: Optional[str], has_body: bool) -> Dict[str, str]:
    headers = {"accept": "application/json", "user-agent": "ratchet-client-python/0.1.0"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    if has_body:
        headers["content-type"] = "application/json"
    return headers


def encode_name(name: str) -> str:
    """Names keep their slashes (``batches/123``); each segment is escaped."""
    if not isinstance(name, str) or not name:
        raise RatchetError("invalid-argument", f"an operation's name must be a non-empty string, not {name!r}")
    return "/".join(quote(segment, safe="") for segment in name.split("/"))


def with_query(path: str, parameters: Mapping[str, Any]) -> str:
    query = {key: _text(value) for key, value in parameters.items() if value is not None}
    return f"{path}?{urlencode(query)}" if query else path


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def backoff(attempt: int) -> float:
    """Seconds before retry ``attempt`` (0, 1, …): 0.2, 0.4, 0.8 … with jitter."""
    return 0.2 * 2**attempt * (0.75 + random.random() / 2)


def answer_of(method: str, path: str, status: int, text: str) -> Any:
    """The answer's JSON, or the RatchetError it says, raised."""
    try:
        body = json.loads(text) if text else None
    except ValueError:
        raise RatchetError("unexpected-response", f"{method} {path}: HTTP {status}, not JSON: {text[:200]}", status) from None
    if 200 <= status < 300:
        return body
    fields = body if isinstance(body, dict) else {}
    code = fields.get("error") or ("invalid-signature" if status == 403 else "unexpected-response")
    error = RatchetError(code, f"{method} {path}: HTTP {status}: {fields.get('message') or text[:200]}", status)
    error.oldest_cursor = fields.get("oldestCursor")
    raise error


def check_wait(until: Until, timeout: Optional[float]) -> Until:
    """``until`` as wait_for takes it, or ``invalid-argument`` at once: a wait for a state that cannot come never ends."""
    states: Iterable[Any] = [until] if isinstance(until, str) else until
    states = list(states)
    wrong = [s for s in states if s != "terminal" and s not in STATES] if states else ["(none)"]
    if wrong or (not isinstance(until, str) and "terminal" in states):
        hint = ""
        first = wrong[0] if wrong else "terminal"
        if isinstance(first, str) and (first.upper() in STATES or first.lower() == "terminal"):
            hint = f" (did you mean {'terminal' if first.lower() == 'terminal' else first.upper()!r}?)"
        raise RatchetError(
            "invalid-argument",
            f"wait_for: until must be 'terminal', one of {', '.join(STATES)}, or a list of those states, not {until!r}{hint}",
        )
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout >= 0):
        raise RatchetError("invalid-argument", f"wait_for: timeout must be a number of seconds, 0 or more, not {timeout!r}")
    return until if isinstance(until, str) else tuple(states)


def rank_of(state: Optional[str]) -> int:
    return _RANKS.get(state, -1) if state else -1


def is_terminal(state: Optional[str]) -> bool:
    return rank_of(state) == TERMINAL_RANK


def reached(state: Optional[str], until: Until) -> bool:
    """``'terminal'``: any terminal state; a list: one of those; a state: it, or an open state of higher rank."""
    if not isinstance(until, str):
        return state in until
    if until == "terminal":
        return is_terminal(state)
    return state == until or (not is_terminal(until) and rank_of(state) > rank_of(until))


def verdict(operation: Dict[str, Any], until: Until, timeout: Optional[float], left: float) -> Optional[RatchetError]:
    """Why a wait ends without the state it waits for, or None to go on."""
    name, state = operation["name"], operation.get("state")
    if is_terminal(state):
        return RatchetError("unreachable", f"{name} ended {state}; it will never be {_said(until)}", None, operation)
    stopped = polling_stopped(operation)
    if stopped:
        return stopped
    if left <= 0:
        return RatchetError("timeout", f"{name} is still {state or 'unobserved'} after {timeout} s", None, operation)
    return None


def timed_out(operation: Dict[str, Any], until: Until, timeout: Optional[float], left: float) -> Optional[RatchetError]:
    """A wait for an ended job's outcome ends only at its timeout."""
    if left <= 0:
        return RatchetError("timeout", f"{operation['name']} ended without its outcome yet after {timeout} s", None, operation)
    return None


def _said(until: Until) -> str:
    return until if isinstance(until, str) else " or ".join(until)


def polling_stopped(operation: Dict[str, Any]) -> Optional[RatchetError]:
    """Reconcile stopped polling the open job for good: only a webhook could still move it, so a wait ends at once."""
    polling = operation.get("polling")
    if not polling or polling.get("nextPollAt") is not None or not polling.get("note") or is_terminal(operation.get("state")):
        return None
    state = operation.get("state") or "unobserved"
    if polling["note"] == "not-found":
        return RatchetError(
            "not-found",
            f"{operation['name']}: {operation.get('provider', 'gemini')} no longer knows it (404 {polling.get('notFoundPolls')} times "
            f"in a row); polling stopped with it {state}",
            404,
            operation,
        )
    if polling["note"] in _STOPPED_NOTES:
        return RatchetError("polling-stopped", f"{operation['name']}: polling stopped ({polling['note']}) with it {state}", None, operation)
    return None


def passes(error: RatchetError) -> bool:
    """A failure watch waits out: the server restarting, away or busy, the connection dropped."""
    return error.code == "network" or error.status in (502, 503, 504)


def feed_filter(name: Optional[str], kind: Optional[str], state: Optional[str], provider: Optional[str] = None) -> Dict[str, str]:
    pairs = (("name", name), ("kind", kind), ("provider", provider), ("state", state))
    return {key: value for key, value in pairs if value is not None}


def change_of(operation: Dict[str, Any], cursor: str) -> Dict[str, Any]:
    """The change that made ``operation``'s version, at ``cursor`` (a snapshot's item)."""
    source = operation["source"]
    if source in ("track", "overdue"):
        write_kind = source
    elif operation.get("resultWrite"):
        write_kind = "result"
    else:
        write_kind = "state-change" if operation["stateChanged"] else "refresh"
    change = {
        "cursor": cursor,
        "name": operation["name"],
        "kind": operation["kind"],
        # A Ratchet from before providers sent none: every job it knew was Gemini's.
        "provider": operation.get("provider", "gemini"),
        "version": operation["version"],
        "state": operation.get("state"),
        "previousState": operation.get("previousState"),
        "stateChanged": operation["stateChanged"],
        "writeKind": write_kind,
        "providerState": operation.get("providerState"),
        "updateTime": operation.get("updateTime"),
        "result": operation.get("result"),
        "source": source,
        "createdAt": operation["createdAt"],
        "recordedAt": operation["recordedAt"],
        "committedAt": operation["recordedAt"],
    }
    if operation.get("userMetadata"):
        change["userMetadata"] = operation["userMetadata"]
    if operation.get("overdue"):
        change["overdue"] = operation["overdue"]
    return change


class Snapshot:
    """The matching operations at one cursor of the feed: the records read after a first cursor, then the
    feed's changes since up to a second; each operation at its latest version, so going on after that
    cursor neither repeats nor misses a change."""

    def __init__(self, cursor: str, scope: Dict[str, str]) -> None:
        self.cursor = cursor
        self.scope = scope
        self._latest: Dict[str, Dict[str, Any]] = {}

    def keep(self, change: Dict[str, Any]) -> None:
        held = self._latest.get(change["name"])
        if held is None or held["version"] < change["version"]:
            self._latest[change["name"]] = change

    def keep_records(self, operations: List[Dict[str, Any]]) -> None:
        for operation in operations:
            self.keep(change_of(operation, self.cursor))

    def changes_query(self) -> Dict[str, Any]:
        """The feed read after the records: every state (one may have left the state asked for)."""
        return {key: value for key, value in self.scope.items() if key != "state"}

    def items(self) -> List[Dict[str, Any]]:
        kind, provider, state = self.scope.get("kind"), self.scope.get("provider"), self.scope.get("state")
        return [
            dict(change, cursor=self.cursor, snapshot=True)
            for change in self._latest.values()
            if (not kind or change["kind"] == kind)
            and (not provider or change.get("provider") == provider)
            and (not state or change.get("state") == state)
        ]


#: The answer's status, among its headers as the clients' requests return them.
STATUS = ":status"


def headers_with_status(status: int, items: Iterable[Tuple[str, str]]) -> Dict[str, str]:
    """An answer's headers by lowercase name, with its status under ``:status``."""
    return {**{name.lower(): value for name, value in items}, STATUS: str(status)}
