"""AsyncRatchetClient: RatchetClient's methods for asyncio, on httpx (installed with every google-genai)."""

import asyncio
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Tuple

from . import _common as common
from . import _plans as plans
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

    async def _request(self, method: str, path: str, body: Any = None, wait: float = 0.0) -> Tuple[Any, Mapping[str, str]]:
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
            answer = common.answer_of(method, path.split("?")[0], response.status_code, response.text)
            return answer, common.headers_with_status(response.status_code, response.headers.items())

    async def track(self, name: str, credential: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None) -> Tracked:
        """As RatchetClient.track."""
        body: Dict[str, Any] = {"name": name}
        if metadata is not None:
            body["metadata"] = metadata
        if credential is not None:
            body["credential"] = credential
        answer, headers = await self._request("POST", "/operations", body)
        return {"operation": answer, "created": headers[common.STATUS] == "201"}

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
        provider: Optional[str] = None,
    ) -> OperationPage:
        """As RatchetClient.list."""
        query = {"state": state, "kind": kind, "provider": provider, "limit": limit, "cursor": cursor, "overdue": overdue}
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
        provider: Optional[str] = None,
    ) -> ChangePage:
        """As RatchetClient.changes."""
        query = {"after": after, "wait": wait or None, "name": name, "kind": kind, "provider": provider, "state": state, "limit": limit}
        return (await self._request("GET", common.with_query("/changes", query), wait=float(wait or 0)))[0]

    async def wait_for(
        self,
        name: str,
        until: common.Until = "terminal",
        timeout: Optional[float] = None,
        on_change: Optional[Callable[[Operation], None]] = None,
    ) -> Operation:
        """As RatchetClient.wait_for."""
        returned: List[Operation] = []
        async for _ in self._run(plans.wait_for(name, until, timeout, on_change), returned):
            pass
        return returned[0]

    def watch(
        self,
        name: Optional[str] = None,
        kind: Optional[str] = None,
        state: Optional[str] = None,
        after: Optional[str] = None,
        provider: Optional[str] = None,
    ) -> AsyncIterator[WatchedChange]:
        """As RatchetClient.watch: ``async for change in client.watch(...)``."""
        return self._run(plans.watch(common.feed_filter(name, kind, state, provider), after))

    async def _run(self, plan: plans.Plan, returned: Optional[List[Any]] = None) -> AsyncIterator[Any]:
        """As RatchetClient._run, awaiting each request and pause."""
        reply: Any = None
        error: Optional[RatchetError] = None
        try:
            while True:
                try:
                    step = plan.throw(error) if error else plan.send(reply)
                except StopIteration as done:
                    if returned is not None:
                        returned.append(done.value)
                    return
                reply, error = None, None
                if step[0] == "request":
                    try:
                        reply = await self._request(*step[1:])
                    except RatchetError as failed:
                        error = failed
                elif step[0] == "sleep":
                    await asyncio.sleep(step[1])
                else:
                    yield step[1]
        finally:
            plan.close()
