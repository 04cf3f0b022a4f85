"""verify_effect on real effects Ratchet signed and sent to the receiver here; and what it refuses."""

import json
import time

import pytest
from conftest import TOKEN, eventually, new_secret, signed

from ratchet_client import EffectVerificationError, RatchetClient, verify_effect


def effect_of(ratchet, name, state):
    def find():
        for delivery in list(ratchet.receiver.deliveries):
            if f'"name":"{name}"'.encode() in delivery["body"] and f'"state":"{state}"'.encode() in delivery["body"]:
                return delivery
        return None

    return eventually(find, timeout=15, what=f"the effect of {name} {state}")


def test_verifies_a_real_effect_and_returns_it(ratchet, unique):
    name = unique()
    RatchetClient(ratchet.url, token=TOKEN).track(name, metadata={"order": "A-17"})
    ratchet.webhook("batch.succeeded", name, "2026-12-01T10:00:00Z")
    delivery = effect_of(ratchet, name, "SUCCEEDED")
    effect = verify_effect(delivery["body"], delivery["headers"], ratchet.effects_secret)
    assert effect["id"] == f"{name}#2"
    assert effect["type"] == "operation.state_changed"
    assert effect["data"]["name"] == name and effect["data"]["state"] == "SUCCEEDED" and effect["data"]["previousState"] is None
    assert effect["data"]["userMetadata"] == {"order": "A-17"}
    # A str body and headers in any case are read the same.
    upper = {k.upper(): v for k, v in delivery["headers"].items()}
    assert verify_effect(delivery["body"].decode(), upper, ratchet.effects_secret)["id"] == effect["id"]


def test_refuses_a_tampered_body_a_wrong_secret_and_an_old_timestamp(ratchet, unique):
    name = unique()
    ratchet.webhook("batch.cancelled", name, "2026-12-01T10:00:00Z")
    delivery = effect_of(ratchet, name, "CANCELLED")
    body, headers = delivery["body"], delivery["headers"]
    refusals = {
        "tampered": (body.replace(b"CANCELLED", b"SUCCEEDED"), headers, ratchet.effects_secret, None),
        "wrong secret": (body, headers, new_secret(), None),
        "replayed ten minutes later": (body, headers, ratchet.effects_secret, time.time() + 600),
        "no signature": (body, {k: v for k, v in headers.items() if k.lower() != "webhook-signature"}, ratchet.effects_secret, None),
        "no secret": (body, headers, "", None),
    }
    codes = {}
    for why, (b, h, secret, now) in refusals.items():
        with pytest.raises(EffectVerificationError) as refused:
            verify_effect(b, h, secret, now=now)
        codes[why] = refused.value.code
    assert codes == {
        "tampered": "bad-signature",
        "wrong secret": "bad-signature",
        "replayed ten minutes later": "stale-timestamp",
        "no signature": "missing-headers",
        "no secret": "missing-secret",
    }
    assert ratchet.effects_secret not in str(codes)


def test_refuses_a_signed_body_that_is_no_effect(ratchet):
    secret = new_secret()
    for body in (b"not json", b'{"type":"operation.state_changed","timestamp":"t","data":{"name":"batches/x"}}'):
        headers = signed(secret, body, "msg_1", int(time.time()))
        with pytest.raises(EffectVerificationError) as refused:
            verify_effect(body, headers, secret)
        assert refused.value.code == "malformed-body"


def test_returns_an_outcome_learnt_after_the_state_as_operation_result_with_its_provider():
    # As Ratchet sends it after a bare OpenAI batch.completed: the poll after it brought the counts.
    secret = new_secret()
    name = "openai/batches/batch_abc"
    body = (
        b'{"type":"operation.result","timestamp":"2026-12-01T10:00:05.000000000Z","data":{"name":"' + name.encode() + b'",'
        b'"kind":"openai-batch","provider":"openai","state":"SUCCEEDED","previousState":"SUCCEEDED","version":2,'
        b'"updateTime":"2026-12-01T10:00:04.000000000Z","providerState":"completed",'
        b'"result":{"requestCounts":{"total":3,"succeeded":2,"failed":1},"outputFileId":"file-out","errorFileId":"file-err"}}}'
    )
    effect = verify_effect(body, signed(secret, body, f"{name}#2", int(time.time())), secret)
    assert effect["type"] == "operation.result"
    assert effect["data"]["provider"] == "openai" and effect["data"]["state"] == "SUCCEEDED"
    result = effect["data"]["result"]
    assert result is not None and result["requestCounts"] == {"total": 3, "succeeded": 2, "failed": 1}
    assert result["outputFileId"] == "file-out"


def test_names_gemini_the_provider_of_an_effect_from_a_ratchet_before_providers(ratchet, unique):
    name = unique()
    ratchet.webhook("batch.succeeded", name, "2026-12-01T10:00:00Z")
    delivery = effect_of(ratchet, name, "SUCCEEDED")
    assert verify_effect(delivery["body"], delivery["headers"], ratchet.effects_secret)["data"]["provider"] == "gemini"
    # The same effect as a Ratchet before providers sent it: no provider; every job it knew was Gemini's.
    secret = new_secret()
    event = json.loads(delivery["body"])
    del event["data"]["provider"]
    body = json.dumps(event).encode()
    effect = verify_effect(body, signed(secret, body, f"{name}#2", int(time.time())), secret)
    assert effect["data"]["provider"] == "gemini"
    unnamed = json.dumps({**event, "data": {**event["data"], "provider": ""}}).encode()
    with pytest.raises(EffectVerificationError) as refused:
        verify_effect(unnamed, signed(secret, unnamed, f"{name}#2", int(time.time())), secret)
    assert refused.value.code == "malformed-body"
