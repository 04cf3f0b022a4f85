"""track_jobs: a google-genai Client whose job-creating calls are tracked by Ratchet before they return."""

from typing import Any, Callable, Dict, Optional, Tuple

from ._tracking import Job, JobOf, Tracking, field, label_of_key, resource

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
    label = credential or label_of_key(getattr(getattr(genai_client, "_api_client", None), "api_key", None), keys)
    tracking = Tracking(ratchet, lambda: label, on_track_error)
    scope = _interaction_scope(genai_client)

    def job_of(module: str, answer_field: str) -> JobOf:
        def job(answer: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Job]:
            if module == "interactions":
                # Only a background interaction (not streamed) is a job that outlives the call.
                if not kwargs.get("background") or kwargs.get("stream"):
                    return None
                job_id = field(answer, "id")
                return (f"{scope}interactions/{job_id}", _metadata(kwargs.get("webhook_config"))) if job_id else None
            if module == "tunings" and not _vertex(genai_client):
                return None  # a tuning job is a job of its own on the Agent Platform only
            name = field(answer, answer_field)
            return (name, _metadata(field(kwargs.get("config"), "webhook_config"))) if name else None

        return job

    # With an AsyncRatchetClient only the calls under aio are tracked: the others could not await it.
    aio = getattr(genai_client, "aio", None)
    roots = ((aio, True),) if tracking.asynchronous else ((genai_client, False), (aio, True))
    for module_name, method, answer_field in _JOBS:
        for root, awaited in roots:
            tracking.patch(resource(root, module_name), method, job_of(module_name, answer_field), awaited)
    return genai_client


def _metadata(webhook_config: Any) -> Optional[Dict[str, Any]]:
    metadata = field(webhook_config, "user_metadata")
    return dict(metadata) if isinstance(metadata, dict) and metadata else None


def _vertex(client: Any) -> bool:
    return bool(getattr(client, "vertexai", False) or getattr(getattr(client, "_api_client", None), "vertexai", False))


def _interaction_scope(client: Any) -> str:
    """On the Agent Platform an interaction lives in the client's project and location."""
    api = getattr(client, "_api_client", None)
    project, location = getattr(api, "project", None), getattr(api, "location", None)
    return f"projects/{project}/locations/{location}/" if _vertex(client) and project and location else ""
