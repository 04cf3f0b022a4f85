"""AsyncRatchetClient: RatchetClient's methods for asyncio, on httpx (installed with every google-genai)."""

import asyncio
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Tuple

from . import _common as common
from ._errors import RatchetError
from ._types import ChangePage, HistoryEntry, Operation, OperationPage, Tracked, WatchedChange

try:
    import httpx
except ImportError:  # said when a client is made, not on import: the sync client needs nothing
    httpx = None  # type: ignore[assignment]


class AsyncRatchetClient:
    """The same methods as RatchetClient, awaited; ``watch`` is an async generator.

    Needs ``httpx`` (``pip install httpx``; every ``google-genai`` install has it): without it, making one raises
    RatchetError ``missing-dependency``. Pass ``http_client`` to share an ``httpx.AsyncClient``; otherwise the
    client owns one: ``await client.aclose()``, or ``async with AsyncRatchetClient(url) as client``.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 4,
        http_client: Optional[Any] = None,
    ) -> None:
        if httpx is None:
            raise RatchetError(
                "missing-dependency",
                "AsyncRatchetClient needs httpx, which is not installed: pip install httpx (or use RatchetClient, which needs nothing)",
            )
        self.url = common.base_url(url)
        self._token = common.token_of(token)
        self.timeout = timeout
        self.retries = retries
        self._owned = http_client is None
        self._http = http_client or httpx.AsyncClient()

    def __repr__(self) -> str:  # never the token
        return f"AsyncRatchetClient({self.url!r})"

    async def __aenter__(self) -> "AsyncRatchetClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def _request(self, method: str, path: str, body: Any = None, wait: float = 0.0) -> Tuple[Any, Mapping[str, str], int]:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method,
                    self.url + path,
                    headers=common.headers_of(self._token, body is not None),
                    json=body,
                    timeout=self.timeout + wait,
                )
            except httpx.TransportError as error:
                if attempt < self.retries:
                    await asyncio.sleep(common.backoff(attempt))
                    attempt += 1
                    continue
                raise RatchetError("network", f"{method} {self.url}{path.split('?')[0]}: {error!r}, after {attempt + 1} attempts") from error
            if response.status_code in common.RETRIED and attempt < self.retries:
                await asyncio.sleep(common.backoff(attempt))
                attempt += 1
                continue
            answer, _ = common.response_parts(method, path.split("?")[0], response.status_code, response.text, {})
            return answer, response.headers, response.status_code

    async def track(self, name: str, credential: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None) -> Tracked:
        """As RatchetClient.track."""
        body: Dict[str, Any] = {"name": name}
        if metadata is not None:
            body["metadata"] = metadata
        if credential is not None:
            body["credential"] = credential
        answer, _, status = await self._request("POST", "/operations", body)
        return {"operation": answer, "created": status == 201}

    async def get(self, name: str) -> Optional[Operation]:
        """As RatchetClient.get."""
        try:
            return (await self._request("GET", f"/operations/{common.encode_name(name)}"))[0]
        except RatchetError as error:
            if error.code == "not-found":
                return None
            raise

    async def list(
        self,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        overdue: Optional[bool] = None,
    ) -> OperationPage:
        """As RatchetClient.list."""
        query = {"state": state, "kind": kind, "limit": limit, "cursor": cursor, "overdue": overdue}
        return (await self._request("GET", common.with_query("/operations", query)))[0]

    async def history(self, name: str) -> List[HistoryEntry]:
        """As RatchetClient.history."""
        return (await self._request("GET", f"/operations/{common.encode_name(name)}/history"))[0]["history"]

    async def changes(
        self,
        after: Optional[str] = None,
        wait: float = 0,
        name: Optional[str] = None,
        kind: Optional[str] = None,
        state: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> ChangePage:
        """As RatchetClient.changes."""
        query = {"after": after, "wait": wait or None, "name": name, "kind": kind, "state": state, "limit": limit}
        return (await self._request("GET", common.with_query("/changes", query), wait=float(wait or 0)))[0]

    async def wait_for(
        self,
        name: str,
        until: common.Until = "terminal",
        timeout: Optional[float] = None,
        on_change: Optional[Callable[[Operation], None]] = None,
    ) -> Operation:
        """As RatchetClient.wait_for."""
        until = common.check_wait(until, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        long_poll, delay, seen = True, common.WAIT_FIRST_SECONDS, 0
        while True:
            left = float("inf") if deadline is None else deadline - time.monotonic()
            operation: Optional[Operation]
            if long_poll:
                wait = max(0.0, min(common.LONG_POLL_SECONDS, left))
                path = common.with_query(f"/operations/{common.encode_name(name)}", {"afterVersion": seen, "wait": f"{wait:.3f}"})
                try:
                    operation, headers, _ = await self._request("GET", path, wait=wait)
                except RatchetError as error:
                    if error.code != "not-found":
                        raise
                    operation = None
                long_poll = operation is None or common.LONG_POLL_HEADER in headers
            else:
                operation = await self.get(name)
            if operation is None:
                raise RatchetError("not-found", f"Ratchet does not know {name}: track it first", 404)
            if operation["version"] > seen:
                seen = operation["version"]
                if on_change:
                    on_change(operation)
            if common.reached(operation.get("state"), until):
                return operation
            left = float("inf") if deadline is None else deadline - time.monotonic()
            stop = common.verdict(operation, until, timeout, left)
            if stop:
                raise stop
            if not long_poll:
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, common.WAIT_MAX_SECONDS)

    async def watch(
        self, name: Optional[str] = None, kind: Optional[str] = None, state: Optional[str] = None, after: Optional[str] = None
    ) -> AsyncIterator[WatchedChange]:
        """As RatchetClient.watch: ``async for change in client.watch(...)``."""
        scope = common.feed_filter(name, kind, state)
        cursor, failures = after, 0
        while True:
            try:
                if cursor is None:
                    snapshot = await self._snapshot(scope)
                    for item in snapshot.items():
                        yield item  # type: ignore[misc]
                    cursor = snapshot.cursor
                page = await self.changes(after=cursor, wait=common.LONG_POLL_SECONDS, **scope)
                failures = 0
                for change in page["changes"]:
                    cursor = change["cursor"]
                    yield dict(change, snapshot=False)  # type: ignore[misc]
                cursor = page["cursor"]
            except RatchetError as error:
                if error.code == "cursor-expired":
                    cursor = None
                    continue
                if not common.passes(error):
                    raise
                await asyncio.sleep(min(common.RECONNECT_MAX_SECONDS, common.backoff(failures)))
                failures += 1

    async def _snapshot(self, scope: Dict[str, str]) -> common.Snapshot:
        snapshot = common.Snapshot((await self.changes())["cursor"], scope)
        if "name" in scope:
            operation = await self.get(scope["name"])
            snapshot.keep_records([operation] if operation else [])
        else:
            page: Optional[str] = None
            while True:
                listed = await self.list(kind=scope.get("kind"), state=scope.get("state"), limit=100, cursor=page)
                snapshot.keep_records(listed["operations"])
                page = listed.get("nextCursor")
                if not page:
                    break
        while True:
            read = await self.changes(after=snapshot.cursor, limit=1000, **snapshot.changes_query())
            for change in read["changes"]:
                snapshot.keep(change)
            if read["cursor"] == snapshot.cursor:
                return snapshot
            snapshot.cursor = read["cursor"]
