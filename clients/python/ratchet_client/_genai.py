"""track_jobs: a google-genai Client whose job-creating calls are tracked by Ratchet before they return."""

import asyncio
import functools
import inspect
import logging
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("ratchet_client")

#: (module, method, what the answer names): the calls that create a job, on ``client`` and on ``client.aio``.
_JOBS: Tuple[Tuple[str, str, str], ...] = (
    ("batches", "create", "name"),
    ("batches", "create_embeddings", "name"),
    ("models", "generate_videos", "name"),
    ("interactions", "create", "id"),
    ("file_search_stores", "import_file", "name"),
    ("file_search_stores", "upload_to_file_search_store", "name"),
    ("tunings", "tune", "name"),
)


def track_jobs(
    genai_client: Any,
    ratchet: Any,
    credential: Optional[str] = None,
    keys: Optional[str] = None,
    on_track_error: Optional[Callable[[Exception, str], None]] = None,
) -> Any:
    """Returns ``genai_client`` (a ``google.genai.Client``, 1.x or 2.x) with each call that creates a job tracked
    before it returns: ``batches.create``, ``batches.create_embeddings``, ``models.generate_videos``, background
    ``interactions.create`` (not streamed), ``file_search_stores.import_file`` and ``upload_to_file_search_store``
    (where the SDK has them), and on the Agent Platform ``tunings.tune``; the same under ``genai_client.aio``.
    The request's webhook ``user_metadata`` becomes the job's metadata.

    ``ratchet`` is a RatchetClient (the calls under ``aio`` then track from a worker thread) or an
    AsyncRatchetClient (only the calls under ``aio`` are tracked then). ``credential`` is this client's key's label in
    the server's GEMINI_API_KEYS; or pass ``keys`` (that ``label=key,…`` text) and the label is found, never sent.
    A tracking failure never hides the created job: the job is returned, the failure logged (logger
    ``ratchet_client``) and given to ``on_track_error``.
    """
    label = credential or _label_of_key(genai_client, keys)
    asynchronous = inspect.iscoroutinefunction(getattr(ratchet, "track", None))
    scope = _interaction_scope(genai_client)

    def tracked(answer: Any, kwargs: Dict[str, Any], module: str, field: str) -> Optional[Tuple[str, Optional[Dict[str, Any]]]]:
        if module == "interactions":
            # Only a background interaction (not streamed) is a job that outlives the call.
            if not kwargs.get("background") or kwargs.get("stream"):
                return None
            job_id = _field(answer, "id")
            return (f"{scope}interactions/{job_id}", _metadata(kwargs.get("webhook_config"))) if job_id else None
        if module == "tunings" and not _vertex(genai_client):
            return None  # a tuning job is a job of its own on the Agent Platform only
        name = _field(answer, field)
        return (name, _metadata(_field(kwargs.get("config"), "webhook_config"))) if name else None

    def failed(error: Exception, name: str) -> None:
        logger.warning("ratchet: %s was created but could not be tracked: %s", name, error)
        if on_track_error:
            on_track_error(error, name)

    def track_options(metadata: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        return {k: v for k, v in (("metadata", metadata), ("credential", label)) if v is not None}

    def wrap_sync(create: Callable[..., Any], module: str, field: str) -> Callable[..., Any]:
        @functools.wraps(create)
        def tracking(*args: Any, **kwargs: Any) -> Any:
            answer = create(*args, **kwargs)
            job = tracked(answer, kwargs, module, field)
            if job:
                try:
                    ratchet.track(job[0], **track_options(job[1]))
                except Exception as error:  # noqa: BLE001 - the job exists: never hide it
                    failed(error, job[0])
            return answer

        return tracking

    def wrap_async(create: Callable[..., Any], module: str, field: str) -> Callable[..., Any]:
        @functools.wraps(create)
        async def tracking(*args: Any, **kwargs: Any) -> Any:
            answer = await create(*args, **kwargs)
            job = tracked(answer, kwargs, module, field)
            if job:
                try:
                    if asynchronous:
                        await ratchet.track(job[0], **track_options(job[1]))
                    else:
                        await asyncio.to_thread(ratchet.track, job[0], **track_options(job[1]))
                except Exception as error:  # noqa: BLE001 - the job exists: never hide it
                    failed(error, job[0])
            return answer

        return tracking

    aio = getattr(genai_client, "aio", None)
    for module_name, method, field in _JOBS:
        for root, wrap in ((None if asynchronous else genai_client, wrap_sync), (aio, wrap_async)):
            module = getattr(root, module_name, None) if root is not None else None
            create = getattr(module, method, None) if module is not None else None
            if create is not None and not getattr(create, "_ratchet_tracked", False):
                patched = wrap(create, module_name, field)
                patched._ratchet_tracked = True  # type: ignore[attr-defined]
                setattr(module, method, patched)
    return genai_client


def _field(value: Any, name: str) -> Any:
    """A field of an SDK object or of a dict (the SDK takes either for its configs)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _metadata(webhook_config: Any) -> Optional[Dict[str, Any]]:
    metadata = _field(webhook_config, "user_metadata")
    return dict(metadata) if isinstance(metadata, dict) and metadata else None


def _vertex(client: Any) -> bool:
    return bool(getattr(client, "vertexai", False) or getattr(getattr(client, "_api_client", None), "vertexai", False))


def _interaction_scope(client: Any) -> str:
    """On the Agent Platform an interaction lives in the client's project and location."""
    api = getattr(client, "_api_client", None)
    project, location = getattr(api, "project", None), getattr(api, "location", None)
    return f"projects/{project}/locations/{location}/" if _vertex(client) and project and location else ""


#: A key's label, as the server takes it (core/credentials.ts CREDENTIAL_LABEL).
_CREDENTIAL_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def gemini_keys_of(value: str) -> Optional[List[Tuple[str, str]]]:
    """The (label, key) pairs of a GEMINI_API_KEYS value, in order, read as the server reads it: ``label=key``
    pairs with commas or white space between them; None when a pair is not ``label=key``, a label is malformed or
    repeats, or there is none (the cases both read: test/cases/gemini-api-keys.json)."""
    pairs = [pair.partition("=") for pair in re.split(r"[\s,]+", value) if pair]
    labels = [label for label, _, _ in pairs]
    if not pairs or len(set(labels)) != len(labels):
        return None
    if not all(equals and key and _CREDENTIAL_LABEL.fullmatch(label) for label, equals, key in pairs):
        return None
    return [(label, key) for label, _, key in pairs]


def _label_of_key(client: Any, keys: Optional[str]) -> Optional[str]:
    """The label ``keys`` (``label=key,…``) gives the key this client was made with."""
    api_key = getattr(getattr(client, "_api_client", None), "api_key", None)
    if not keys or not api_key:
        return None
    return next((label for label, key in gemini_keys_of(keys) or [] if key == api_key), None)
