"""track_openai_jobs: an OpenAI client (the official ``openai`` SDK) whose job-creating calls are tracked by Ratchet
before they return."""

import re
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

from ._tracking import Job, JobOf, OnTrackError, Tracking, awaits, field, label_of_key, logger, resource


def track_openai_jobs(
    client: Any,
    ratchet: Any,
    credential: Optional[str] = None,
    keys: Optional[str] = None,
    on_track_error: Optional[OnTrackError] = None,
) -> Any:
    """Returns ``client`` (an ``openai.OpenAI`` or ``openai.AsyncOpenAI``) with each call that creates a job tracked
    before it returns, where the SDK has it:

    - ``batches.create``: ``openai/batches/{id}``
    - ``responses.create`` with ``background=True``, not streamed: ``openai/responses/{id}`` (a foreground or
      streamed response is no job, and is not tracked)
    - ``videos.create``, and ``remix``, ``edit``, ``extend``, which make a new video: ``openai/videos/{id}``
    - ``fine_tuning.jobs.create``: ``openai/fine_tuning/jobs/{id}``
    - ``evals.runs.create(eval_id, …)``: ``openai/evals/{eval_id}/runs/{id}``

    and the same on the clients ``client.with_options(…)`` and ``client.copy(…)`` make. The request's ``metadata``
    becomes the job's metadata.

    On Azure (an ``AzureOpenAI``, or any client whose base URL is ``https://{resource}.openai.azure.com/…``) only
    batches are jobs Ratchet knows: ``batches.create`` tracks ``azure-openai/{resource}/batches/{id}``, nothing else
    is tracked. A client whose platform cannot be named (an ``AzureOpenAI`` on another host, Bedrock's
    OpenAI-compatible endpoint) is returned as it is, tracking nothing, with one warning.

    ``ratchet`` is a RatchetClient, or an AsyncRatchetClient for an AsyncOpenAI (with a RatchetClient an
    AsyncOpenAI's calls track from a worker thread). ``credential`` is this client's key's label in the server's
    OPENAI_API_KEYS; or pass ``keys`` (that ``label=key,…`` text) and the label of ``client.api_key`` is found,
    never sent. A tracking failure never hides the created job: the job is returned, the failure logged (logger
    ``ratchet_client``) and given to ``on_track_error``.
    """
    azure_resource, untracked = _platform_of(client)
    if untracked:
        logger.warning("ratchet: track_openai_jobs tracks nothing on %s: %s", getattr(client, "base_url", None), untracked)
        return client
    tracking = Tracking(ratchet, lambda: credential or label_of_key(getattr(client, "api_key", None), keys), on_track_error)
    awaited = awaits(client)
    if azure_resource:
        tracking.patch(resource(client, "batches"), "create", _named(f"azure-openai/{azure_resource}/batches"), awaited)
    else:
        tracking.patch(resource(client, "batches"), "create", _named("openai/batches"), awaited)
        tracking.patch(resource(client, "responses"), "create", _background_response, awaited)
        for method in ("create", "remix", "edit", "extend"):
            tracking.patch(resource(client, "videos"), method, _named("openai/videos"), awaited)
        tracking.patch(resource(client, "fine_tuning", "jobs"), "create", _named("openai/fine_tuning/jobs"), awaited)
        tracking.patch(resource(client, "evals", "runs"), "create", _eval_run, awaited)
    tracking.follow_copies(client, lambda copy: track_openai_jobs(copy, ratchet, credential, keys, on_track_error))
    return client


#: An Azure OpenAI resource's host: its first label names the resource.
_AZURE_HOST = re.compile(r"([a-z0-9][a-z0-9-]*)\.openai\.azure\.com")


def _platform_of(client: Any) -> Tuple[Optional[str], Optional[str]]:
    """Where the client's jobs live: (the Azure resource, None) on Azure, (None, why) where Ratchet cannot name them,
    (None, None) on OpenAI's API or a proxy of it."""
    host = urlsplit(str(getattr(client, "base_url", ""))).hostname or ""
    azure = _AZURE_HOST.fullmatch(host)
    if azure:
        return azure.group(1), None
    # AzureOpenAI is built on the SDK's BaseAzureClient; its host names the resource only on openai.azure.com.
    if any(cls.__name__ == "BaseAzureClient" for cls in type(client).__mro__):
        return None, "an Azure client whose resource is not https://{resource}.openai.azure.com"
    # The SDK keeps a client's provider= (Bedrock's BedrockOpenAI makes one) in _provider.
    if host.startswith("bedrock-mantle.") or getattr(client, "_provider", None) is not None:
        return None, "another provider's OpenAI-compatible endpoint, whose jobs Ratchet does not poll"
    return None, None


def _named(collection: str) -> JobOf:
    """The job is ``{collection}/{the answer's id}``."""

    def job(answer: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Job]:
        job_id = field(answer, "id")
        return (f"{collection}/{job_id}", _metadata(kwargs)) if job_id else None

    return job


def _background_response(answer: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Job]:
    # Only a background response outlives the call; a streamed one answers a stream, not the response.
    if not kwargs.get("background") or kwargs.get("stream"):
        return None
    return _named("openai/responses")(answer, args, kwargs)


def _eval_run(answer: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Job]:
    # A run is named under its eval: the answer says which, else the call's first argument does.
    eval_id = field(answer, "eval_id") or (args[0] if args else kwargs.get("eval_id"))
    return _named(f"openai/evals/{eval_id}/runs")(answer, args, kwargs) if eval_id else None


def _metadata(kwargs: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """OpenAI's own ``metadata`` parameter (left out, it is the SDK's ``omit``, not a dict)."""
    metadata = kwargs.get("metadata")
    return dict(metadata) if isinstance(metadata, dict) and metadata else None
