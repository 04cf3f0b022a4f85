"""verify_effect: the receiving end of Ratchet's outbound effects (EFFECTS_WEBHOOK_URL), Standard Webhooks' HMAC."""

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Mapping, Optional, Union

from ._common import STATES
from ._errors import EffectVerificationError
from ._types import Effect

#: A delivery signed further than this from now is refused (a replay, or a clock far off): Standard Webhooks' 5 minutes.
TOLERANCE_SECONDS = 5 * 60
_SECRET = re.compile(r"^whsec_[A-Za-z0-9+/]+={0,2}$")
#: A state change, a job found overdue, and a finished job's outcome learnt after its state (after that state's effect).
_TYPES = ("operation.state_changed", "operation.overdue", "operation.result")


def verify_effect(body: Union[bytes, str], headers: Mapping[str, Any], secret: str, now: Optional[float] = None) -> Effect:
    """Verifies one delivery of an effect and returns it as a dict, or raises EffectVerificationError (only that).

    Its ``type``: ``operation.state_changed``, ``operation.overdue``, or ``operation.result`` (a finished job's outcome
    learnt after its state: OpenAI's webhooks name the job alone, so its counts come by the poll after; once, after that
    state's effect, the state unchanged). ``data["provider"]`` says who runs the job (``gemini``, ``openai``,
    ``anthropic``, ``bedrock``, ``azure-openai``); ``data["result"]`` holds a finished job's outcome.

    Pass the body exactly as received (bytes or str), before any JSON parsing: the signature covers those bytes.
    ``headers`` is any mapping (Flask's ``request.headers``, FastAPI's ``request.headers``, a dict): its names are
    read case-insensitively. ``secret`` is EFFECTS_SIGNING_SECRET (``whsec_<base64>``). Codes: ``missing-secret``,
    ``missing-headers``, ``bad-signature``, ``stale-timestamp`` (more than 5 minutes from now) and ``malformed-body``.
    The effect's ``id`` (``name#version``) is the same on every retry: do the work once per id.
    """
    key = _key_of(secret)
    plain = {str(name).lower(): value for name, value in dict(headers).items()}
    webhook_id, stamp, signatures = (plain.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not webhook_id or not stamp or not signatures:
        raise EffectVerificationError("missing-headers", "missing required headers: webhook-id, webhook-timestamp, webhook-signature")
    try:
        timestamp = int(str(stamp))
    except ValueError:
        raise EffectVerificationError("missing-headers", "invalid signature headers: webhook-timestamp is not a number") from None
    drift = (time.time() if now is None else now) - timestamp
    if abs(drift) > TOLERANCE_SECONDS:
        raise EffectVerificationError("stale-timestamp", f"message timestamp too {'old' if drift > 0 else 'new'}: {abs(int(drift))} s from now")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    signed = f"{webhook_id}.{timestamp}.".encode() + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [part.split(",", 1) for part in str(signatures).split()]
    if not any(len(p) == 2 and p[0] == "v1" and hmac.compare_digest(p[1], expected) for p in offered):
        raise EffectVerificationError("bad-signature", "no matching signature found")
    try:
        event = json.loads(raw)
    except ValueError as error:
        raise EffectVerificationError("malformed-body", f"body is not JSON: {error}") from None
    problem = _problem_of(event)
    if problem:
        raise EffectVerificationError("malformed-body", f"not one of Ratchet's events ({', '.join(_TYPES)}): {problem}")
    # A Ratchet from before providers sent none: every job it knew was Gemini's.
    return {"id": str(webhook_id), **event, "data": {"provider": "gemini", **event["data"]}}


def _key_of(secret: Any) -> bytes:
    """The HMAC key of ``whsec_<base64>``, or ``missing-secret`` (an unset EFFECTS_SIGNING_SECRET): never the value."""
    if not isinstance(secret, str) or not secret.strip():
        raise EffectVerificationError(
            "missing-secret", "no signing secret given: pass the whsec_<base64> secret Ratchet signs effects with (EFFECTS_SIGNING_SECRET)"
        )
    value = secret.strip()
    if _SECRET.match(value):
        try:
            return base64.b64decode(value[len("whsec_") :], validate=True)
        except (binascii.Error, ValueError):
            pass
    raise EffectVerificationError("missing-secret", "the signing secret is not whsec_<base64> (EFFECTS_SIGNING_SECRET)")


def _problem_of(event: Any) -> Optional[str]:
    """What makes ``event`` no effect of Ratchet's, or None. Fields may be added; none is removed."""
    if not isinstance(event, dict):
        return "the body is not an object"
    if event.get("type") not in _TYPES:
        return f"type must be one of {', '.join(_TYPES)}"
    if not isinstance(event.get("timestamp"), str):
        return "timestamp must be a string"
    data = event.get("data")
    if not isinstance(data, dict):
        return "data must be an object"
    if not isinstance(data.get("name"), str) or not isinstance(data.get("kind"), str) or not data.get("kind"):
        return "data.name and data.kind must be strings"
    if "provider" in data and (not isinstance(data["provider"], str) or not data["provider"]):
        return "data.provider must be a string"
    if data.get("state") not in STATES:
        return f"data.state must be one of {', '.join(STATES)}"
    if data.get("previousState") is not None and data.get("previousState") not in STATES:
        return "data.previousState must be a state or null"
    if not isinstance(data.get("version"), int) or isinstance(data.get("version"), bool):
        return "data.version must be a number"
    return None
