"""track_anthropic_jobs: an Anthropic client (the official ``anthropic`` SDK) whose message batches are tracked by
Ratchet before the call that creates them returns."""

from typing import Any, Dict, Optional, Tuple

from ._tracking import Job, OnTrackError, Tracking, awaits, field, label_of_key, resource


def track_anthropic_jobs(
    client: Any,
    ratchet: Any,
    credential: Optional[str] = None,
    keys: Optional[str] = None,
    on_track_error: Optional[OnTrackError] = None,
) -> Any:
    """Returns ``client`` (an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``) with ``messages.batches.create``
    and ``beta.messages.batches.create`` tracked before they return (``anthropic/messages/batches/{id}``); the same on
    the clients ``client.with_options(…)`` and ``client.copy(…)`` make. A message batch takes no metadata.

    ``ratchet``, ``credential`` (a label in the server's ANTHROPIC_API_KEYS), ``keys`` and ``on_track_error`` as for
    track_openai_jobs.
    """
    tracking = Tracking(ratchet, lambda: credential or label_of_key(getattr(client, "api_key", None), keys), on_track_error)
    awaited = awaits(client)
    for batches in (resource(client, "messages", "batches"), resource(client, "beta", "messages", "batches")):
        tracking.patch(batches, "create", _message_batch, awaited)
    tracking.follow_copies(client, lambda copy: track_anthropic_jobs(copy, ratchet, credential, keys, on_track_error))
    return client


def _message_batch(answer: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Job]:
    batch_id = field(answer, "id")
    return (f"anthropic/messages/batches/{batch_id}", None) if batch_id else None
