"""What wait_for and watch do, written once for both clients as plans: generators that yield each step (a request
to send, a pause, an item for the caller) and are sent each request's answer, or thrown its RatchetError. The sync
client runs them with urllib and time.sleep, the async client with httpx and asyncio.sleep. No I/O here."""

import time
from typing import Any, Callable, Dict, Generator, Mapping, Optional, Tuple

from . import _common as common
from ._errors import RatchetError

#: ("request", method, path, body, wait) | ("sleep", seconds) | ("item", value)
Step = Tuple[Any, ...]
Answer = Tuple[Any, Mapping[str, str]]
Plan = Generator[Step, Optional[Answer], Any]


def request(method: str, path: str, body: Any = None, wait: float = 0.0) -> Step:
    return ("request", method, path, body, wait)


def operation_path(name: str) -> str:
    return f"/operations/{common.encode_name(name)}"


def wait_for(name: str, until: common.Until, timeout: Optional[float], on_change: Optional[Callable[[Any], None]]) -> Plan:
    """The operation once it reaches ``until``: read first (a change made before the call is never missed), then
    long polls the server answers the moment it changes, or, where it offers none, reads 1 s, 2 s, 4 s… apart."""
    until = common.check_wait(until, timeout)
    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    long_poll, delay, seen = True, common.WAIT_FIRST_SECONDS, 0
    while True:
        wait = max(0.0, min(common.LONG_POLL_SECONDS, left())) if long_poll else 0.0
        path = operation_path(name)
        if long_poll:
            path = common.with_query(path, {"afterVersion": seen, "wait": f"{wait:.3f}"})
        try:
            operation, headers = yield request("GET", path, wait=wait)
        except RatchetError as error:
            if error.code != "not-found":
                raise
            raise RatchetError("not-found", f"Ratchet does not know {name}: track it first", 404) from None
        # A server that ignored the wait answered at once: read again with backoff from now on.
        long_poll = long_poll and common.LONG_POLL_HEADER in headers
        if operation["version"] > seen:
            seen = operation["version"]
            if on_change:
                on_change(operation)
        # Ended, its outcome still to come (a bare webhook): waited for too, while the job is polled for it.
        awaiting = operation.get("resultPending") is True and (operation.get("polling") or {}).get("nextPollAt", "") is not None
        arrived = common.reached(operation.get("state"), until)
        if arrived and not awaiting:
            return operation
        stop = common.timed_out(operation, until, timeout, left()) if arrived else common.verdict(operation, until, timeout, left())
        if stop:
            raise stop
        if not long_poll:
            yield ("sleep", min(delay, left()))
            delay = min(delay * 2, common.WAIT_MAX_SECONDS)


def watch(scope: Dict[str, str], after: Optional[str]) -> Plan:
    """Every change that matches, as items: a snapshot first without ``after``, then the feed from its cursor; the
    server restarting, away or busy waited out; a cursor the feed no longer holds begun again with a snapshot."""
    cursor, failures = after, 0
    while True:
        try:
            if cursor is None:
                snapshot = yield from _snapshot(scope)
                for item in snapshot.items():
                    yield ("item", item)
                cursor = snapshot.cursor
            query = {"after": cursor, "wait": common.LONG_POLL_SECONDS, **scope}
            page, _ = yield request("GET", common.with_query("/changes", query), wait=common.LONG_POLL_SECONDS)
            failures = 0
            for change in page["changes"]:
                cursor = change["cursor"]
                yield ("item", dict(change, snapshot=False))
            cursor = page["cursor"]
        except RatchetError as error:
            if error.code == "cursor-expired":
                cursor = None
                continue
            if not common.passes(error):
                raise
            yield ("sleep", min(common.RECONNECT_MAX_SECONDS, common.backoff(failures)))
            failures += 1


def _snapshot(scope: Dict[str, str]) -> Plan:
    head, _ = yield request("GET", "/changes")
    snapshot = common.Snapshot(head["cursor"], scope)
    if "name" in scope:
        try:
            operation, _ = yield request("GET", operation_path(scope["name"]))
            snapshot.keep_records([operation])
        except RatchetError as error:
            if error.code != "not-found":
                raise
    else:
        page: Optional[str] = None
        while True:
            query = {"kind": scope.get("kind"), "provider": scope.get("provider"), "state": scope.get("state"), "limit": 100, "cursor": page}
            listed, _ = yield request("GET", common.with_query("/operations", query))
            snapshot.keep_records(listed["operations"])
            page = listed.get("nextCursor")
            if not page:
                break
    while True:
        query = {"after": snapshot.cursor, "limit": 1000, **snapshot.changes_query()}
        read, _ = yield request("GET", common.with_query("/changes", query))
        for change in read["changes"]:
            snapshot.keep(change)
        if read["cursor"] == snapshot.cursor:
            return snapshot
        snapshot.cursor = read["cursor"]
