"""What every SDK's track_*_jobs shares: a job-creating method wrapped in place, so that the job its answer names is
tracked by Ratchet before the call returns, and a failure to track never hides the job that was created.

Each SDK's module (_genai.py, _openai.py, _anthropic.py) says only which methods create jobs and how their answers
name them; none of them imports its SDK, so ratchet_client imports with none installed.
"""

import asyncio
import functools
import inspect
import logging
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("ratchet_client")

#: A job a call made: its name in Ratchet and the metadata to track it with.
Job = Tuple[str, Optional[Dict[str, Any]]]
#: The job a call made, from its answer, its positional and its keyword arguments; None when it made none.
JobOf = Callable[[Any, Tuple[Any, ...], Dict[str, Any]], Optional[Job]]
#: Given a tracking failure and the job's name.
OnTrackError = Callable[[Exception, str], None]


class Tracking:
    """One SDK client's tracking: the Ratchet client that tracks, the credential label it tracks with (read at each
    call: an SDK may change its key), and what to do when tracking fails."""

    def __init__(self, ratchet: Any, credential: Callable[[], Optional[str]], on_track_error: Optional[OnTrackError]) -> None:
        self.ratchet = ratchet
        self.credential = credential
        self.on_track_error = on_track_error
        #: An AsyncRatchetClient: its track is awaited, so only coroutine methods can use it.
        self.asynchronous = inspect.iscoroutinefunction(getattr(ratchet, "track", None))

    def patch(self, owner: Any, method: str, job_of: JobOf, awaited: bool) -> None:
        """Wraps ``owner.method`` in place, once (wrapping twice tracks once); nothing when either is absent (an
        older SDK). ``awaited``: the method belongs to an async client, so its answer is awaited and so is the track
        (from a worker thread with a RatchetClient). The caller says so, since the method cannot: the SDKs' own
        decorators (deprecation warnings, required arguments) hide a coroutine function behind a plain one. A plain
        method cannot await an AsyncRatchetClient's track, so that pairing is refused."""
        create = getattr(owner, method, None) if owner is not None else None
        if create is None or getattr(create, "_ratchet_tracked", False):
            return
        if awaited:
            patched = self._wrap_async(create, job_of)
        elif self.asynchronous:
            raise TypeError(f"{type(owner).__name__}.{method} is synchronous: track it with a RatchetClient, not an AsyncRatchetClient")
        else:
            patched = self._wrap_sync(create, job_of)
        patched._ratchet_tracked = True  # type: ignore[attr-defined]
        setattr(owner, method, patched)

    def follow_copies(self, client: Any, track: Callable[[Any], Any]) -> None:
        """``client.copy()`` and ``client.with_options()`` answer a new client with new resources (the OpenAI and
        Anthropic SDKs): ``track`` is applied to each, so ``client.with_options(timeout=…).batches.create`` is
        tracked too."""
        for method in ("copy", "with_options"):
            make = getattr(client, method, None)
            if make is None or getattr(make, "_ratchet_tracked", False):
                continue

            @functools.wraps(make)
            def copied(*args: Any, __make: Callable[..., Any] = make, **kwargs: Any) -> Any:
                return track(__make(*args, **kwargs))

            copied._ratchet_tracked = True  # type: ignore[attr-defined]
            setattr(client, method, copied)

    def _options(self, metadata: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        return {k: v for k, v in (("metadata", metadata), ("credential", self.credential())) if v is not None}

    def _failed(self, error: Exception, name: str) -> None:
        logger.warning("ratchet: %s was created but could not be tracked: %s", name, error)
        if self.on_track_error:
            self.on_track_error(error, name)

    def _wrap_sync(self, create: Callable[..., Any], job_of: JobOf) -> Callable[..., Any]:
        @functools.wraps(create)
        def tracking(*args: Any, **kwargs: Any) -> Any:
            answer = create(*args, **kwargs)
            job = job_of(answer, args, kwargs)
            if job:
                try:
                    self.ratchet.track(job[0], **self._options(job[1]))
                except Exception as error:  # noqa: BLE001 - the job exists: never hide it
                    self._failed(error, job[0])
            return answer

        return tracking

    def _wrap_async(self, create: Callable[..., Any], job_of: JobOf) -> Callable[..., Any]:
        @functools.wraps(create)
        async def tracking(*args: Any, **kwargs: Any) -> Any:
            answer = await create(*args, **kwargs)
            job = job_of(answer, args, kwargs)
            if job:
                try:
                    if self.asynchronous:
                        await self.ratchet.track(job[0], **self._options(job[1]))
                    else:
                        await asyncio.to_thread(self.ratchet.track, job[0], **self._options(job[1]))
                except Exception as error:  # noqa: BLE001 - the job exists: never hide it
                    self._failed(error, job[0])
            return answer

        return tracking


def awaits(client: Any) -> bool:
    """Whether an OpenAI or Anthropic client is the async one: both SDKs (generated by Stainless) build
    AsyncOpenAI, AsyncAzureOpenAI and AsyncAnthropic on AsyncAPIClient."""
    return any(cls.__name__ == "AsyncAPIClient" for cls in type(client).__mro__)


def resource(client: Any, *path: str) -> Any:
    """``client.a.b`` for path ("a", "b"), None where the SDK has no such resource."""
    for name in path:
        client = getattr(client, name, None)
        if client is None:
            return None
    return client


def field(value: Any, name: str) -> Any:
    """A field of an SDK object or of a dict (SDKs take either)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


#: A key's label, as the server takes it (core/credentials.ts CREDENTIAL_LABEL).
_CREDENTIAL_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def api_keys_of(value: str) -> Optional[List[Tuple[str, str]]]:
    """The (label, key) pairs of a GEMINI_API_KEYS value (OPENAI_API_KEYS and ANTHROPIC_API_KEYS are written the
    same), in order, read as the server reads it: ``label=key`` pairs with commas or white space between them; None
    when a pair is not ``label=key``, a label is malformed or repeats, or there is none (the cases both read:
    test/cases/gemini-api-keys.json)."""
    pairs = [pair.partition("=") for pair in re.split(r"[\s,]+", value) if pair]
    labels = [label for label, _, _ in pairs]
    if not pairs or len(set(labels)) != len(labels):
        return None
    if not all(equals and key and _CREDENTIAL_LABEL.fullmatch(label) for label, equals, key in pairs):
        return None
    return [(label, key) for label, _, key in pairs]


def label_of_key(api_key: Optional[str], keys: Optional[str]) -> Optional[str]:
    """The label ``keys`` (``label=key,…``) gives ``api_key``; the key itself is never sent anywhere."""
    if not keys or not api_key:
        return None
    return next((label for label, key in api_keys_of(keys) or [] if key == api_key), None)
