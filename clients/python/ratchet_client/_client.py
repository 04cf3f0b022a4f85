"""RatchetClient: Ratchet's HTTP API from Python, the standard library only."""

import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from . import _common as common
from . import _plans as plans
from ._errors import RatchetError
from ._types import ChangePage, HistoryEntry, Operation, OperationPage, Tracked, WatchedChange

#: A refused or dropped connection, a timeout, a broken answer (URLError, ConnectionError and socket.timeout are OSErrors).
_NETWORK_ERRORS = (OSError, http.client.HTTPException)


class RatchetClient:
    """Ratchet's API: on one machine, on PostgreSQL, or mounted inside an app (its URL with the mount path).

    ``token`` is the API token (default: ``RATCHET_API_TOKEN`` from the
    environment, its first when it holds several). ``timeout`` bounds each
    request in seconds (a long poll's wait is added to it). A 503, a proxy's
    429, 502 or 504, and a failed connection are retried ``retries`` times with
    backoff (about 0.2, 0.4, 0.8, 1.6 s); then the call raises RatchetError.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 30.0, retries: int = 4) -> None:
        self.url = common.base_url(url)
        self._token = common.token_of(token)
        self.timeout = timeout
        self.retries = retries

    def __repr__(self) -> str:  # never the token
        return f"RatchetClient({self.url!r})"

    def _request(self, method: str, path: str, body: Any = None, wait: float = 0.0) -> Tuple[Any, Mapping[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        attempt = 0
        while True:
            request = urllib.request.Request(
                self.url + path, data=data, method=method, headers=common.headers_of(self._token, data is not None)
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout + wait) as response:
                    status, text, headers = response.status, response.read().decode("utf-8", "replace"), response.headers
            except urllib.error.HTTPError as error:
                status, text, headers = error.code, error.read().decode("utf-8", "replace"), error.headers
            except _NETWORK_ERRORS as error:
                if attempt < self.retries:
                    time.sleep(common.backoff(attempt))
                    attempt += 1
                    continue
                raise RatchetError("network", f"{method} {self.url}{path.split('?')[0]}: {error}, after {attempt + 1} attempts") from error
            if status in common.RETRIED and attempt < self.retries:
                time.sleep(common.backoff(attempt))
                attempt += 1
                continue
            answer = common.answer_of(method, path.split("?")[0], status, text)
            return answer, common.headers_with_status(status, headers.items())

    def track(self, name: str, credential: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None) -> Tracked:
        """Starts tracking a job (reconcile polls it before any webhook). ``created`` is False when Ratchet knew it.
        ``credential``: the label of the API key that created it (the server's GEMINI_API_KEYS, OPENAI_API_KEYS or
        ANTHROPIC_API_KEYS), which polls it."""
        body: Dict[str, Any] = {"name": name}
        if metadata is not None:
            body["metadata"] = metadata
        if credential is not None:
            body["credential"] = credential
        # Tracking is safe to repeat (a known job is 200 with its record): retried like a read.
        answer, headers = self._request("POST", "/operations", body)
        return {"operation": answer, "created": headers[common.STATUS] == "201"}

    def get(self, name: str) -> Optional[Operation]:
        """The stored record with its polling status; None when Ratchet does not know the job."""
        try:
            return self._request("GET", f"/operations/{common.encode_name(name)}")[0]
        except RatchetError as error:
            if error.code == "not-found":
                return None
            raise

    def list(
        self,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        overdue: Optional[bool] = None,
        provider: Optional[str] = None,
    ) -> OperationPage:
        """One page, most recently recorded first: ``operations``, and ``nextCursor`` to pass back (absent on the last).
        ``provider``: only that provider's jobs (``gemini``, ``openai``, ``anthropic``, ``bedrock``, ``azure-openai``)."""
        query = {"state": state, "kind": kind, "provider": provider, "limit": limit, "cursor": cursor, "overdue": overdue}
        return self._request("GET", common.with_query("/operations", query))[0]

    def history(self, name: str) -> List[HistoryEntry]:
        """Every applied write of the job, in version order."""
        return self._request("GET", f"/operations/{common.encode_name(name)}/history")[0]["history"]

    def changes(
        self,
        after: Optional[str] = None,
        wait: float = 0,
        name: Optional[str] = None,
        kind: Optional[str] = None,
        state: Optional[str] = None,
        limit: Optional[int] = None,
        provider: Optional[str] = None,
    ) -> ChangePage:
        """One page of the change feed: the changes after ``after`` that match (``name``, ``kind``, ``provider``,
        ``state``), in commit order, at once when there are some, else after ``wait`` seconds (0 to 60) with none.
        Without ``after``: the feed's head (what changes from now on). A cursor the feed no longer holds raises
        RatchetError ``cursor-expired`` (its ``oldest_cursor`` set)."""
        query = {"after": after, "wait": wait or None, "name": name, "kind": kind, "provider": provider, "state": state, "limit": limit}
        return self._request("GET", common.with_query("/changes", query), wait=float(wait or 0))[0]

    def wait_for(
        self,
        name: str,
        until: common.Until = "terminal",
        timeout: Optional[float] = None,
        on_change: Optional[Callable[[Operation], None]] = None,
    ) -> Operation:
        """Returns the operation once it reaches ``until``: ``'terminal'`` (the default), a state (it, or an open state
        of higher rank), or a list of states. The stored record is read first, so a change made before the call is never
        missed; then the server holds each read until the job changes (a long poll), or, where it does not offer that,
        the record is read again after 1 s, 2 s, 4 s… at most a minute apart. Raises RatchetError ``timeout`` after
        ``timeout`` seconds, ``unreachable`` if it ended otherwise, ``not-found`` if Ratchet does not know it."""
        returned: List[Operation] = []
        for _ in self._run(plans.wait_for(name, until, timeout, on_change), returned):
            pass
        return returned[0]

    def watch(
        self,
        name: Optional[str] = None,
        kind: Optional[str] = None,
        state: Optional[str] = None,
        after: Optional[str] = None,
        provider: Optional[str] = None,
    ) -> Iterator[WatchedChange]:
        """Every change that matches, as it happens: a generator that never ends on its own (break out of it).

        Without ``after`` it first yields the operations as they stand (``snapshot`` True), all at one cursor of the
        feed, then each change after it (``snapshot`` False): one made while the snapshot was read comes once, never
        missed. Keep the ``cursor`` of what you handled and pass it back as ``after`` to go on exactly where you stopped.
        A restart of the server, a dropped connection and a 503 are waited out and the feed read on from the cursor;
        a cursor older than the feed keeps (a day) begins again with a snapshot: nothing is skipped silently."""
        return self._run(plans.watch(common.feed_filter(name, kind, state, provider), after))

    def _run(self, plan: plans.Plan, returned: Optional[List[Any]] = None) -> Iterator[Any]:
        """Runs a plan: its requests sent, its pauses slept, its items yielded; what it returns put in ``returned``."""
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
                        reply = self._request(*step[1:])
                    except RatchetError as failed:
                        error = failed
                elif step[0] == "sleep":
                    time.sleep(step[1])
                else:
                    yield step[1]
        finally:
            plan.close()
