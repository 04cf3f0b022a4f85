"""track_anthropic_jobs against a stand-in with the anthropic SDK's shapes (sdk_standins/anthropic): each message
batch tracked by a real Ratchet before the call returns, sync and async, the beta resource's too; the SDK's calls
passed on unchanged; a tracking failure never hides the batch."""

import asyncio

from anthropic import Anthropic, AsyncAnthropic
from conftest import TOKEN

from ratchet_client import AsyncRatchetClient, RatchetClient, track_anthropic_jobs

REQUESTS = [{"custom_id": "q1", "params": {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": []}}]


class Recorder:
    def __init__(self) -> None:
        self.tracked = []

    def track(self, name, **options):
        self.tracked.append((name, options))
        return {"operation": {"name": name}, "created": True}


def test_each_message_batch_is_tracked_before_the_call_returns(ratchet):
    client = RatchetClient(ratchet.url, token=TOKEN)
    anthropic = track_anthropic_jobs(Anthropic(api_key="sk-ant-test"), client)
    batch = anthropic.messages.batches.create(requests=iter(REQUESTS))
    beta = anthropic.beta.messages.batches.create(requests=REQUESTS, betas=["files-api-2025-04-14"])
    for made in (batch, beta):
        tracked = client.get(f"anthropic/messages/batches/{made.id}")
        assert tracked and tracked["kind"] == "anthropic-batch"
    # The SDK got each call as made (the requests a one-pass iterable, read once by the SDK alone).
    assert anthropic.calls == [
        ("messages.batches.create", (), {"requests": 1}),
        ("beta.messages.batches.create", (), {"requests": 1, "betas": ["files-api-2025-04-14"]}),
    ]


def test_the_async_client_awaits_the_track_with_either_ratchet_client(ratchet):
    async def scenario():
        async with AsyncRatchetClient(ratchet.url, token=TOKEN) as asynchronous:
            batch = await track_anthropic_jobs(AsyncAnthropic(), asynchronous).messages.batches.create(requests=REQUESTS)
            assert (await asynchronous.get(f"anthropic/messages/batches/{batch.id}"))["kind"] == "anthropic-batch"
        sync = RatchetClient(ratchet.url, token=TOKEN)
        beta = await track_anthropic_jobs(AsyncAnthropic(), sync).beta.messages.batches.create(requests=REQUESTS)
        assert sync.get(f"anthropic/messages/batches/{beta.id}")["kind"] == "anthropic-batch"

    asyncio.run(scenario())


def test_the_credential_label_is_found_from_the_keys_on_every_copy():
    recorder = Recorder()
    anthropic = track_anthropic_jobs(Anthropic(api_key="sk-ant-b"), recorder, keys="a=sk-ant-a,b=sk-ant-b")
    first = anthropic.messages.batches.create(requests=REQUESTS)
    second = anthropic.with_options(api_key="sk-ant-a").messages.batches.create(requests=REQUESTS)
    assert recorder.tracked == [
        (f"anthropic/messages/batches/{first.id}", {"credential": "b"}),
        (f"anthropic/messages/batches/{second.id}", {"credential": "a"}),
    ]
    assert "sk-ant" not in repr(recorder.tracked)


def test_a_tracking_failure_never_hides_the_created_batch(caplog):
    failures = []
    anthropic = track_anthropic_jobs(
        Anthropic(),
        RatchetClient("http://127.0.0.1:9", token=TOKEN, retries=0),
        on_track_error=lambda error, name: failures.append((error.code, name)),
    )
    batch = anthropic.messages.batches.create(requests=REQUESTS)
    assert batch.id.startswith("msgbatch_")
    assert failures == [("network", f"anthropic/messages/batches/{batch.id}")]
    assert f"anthropic/messages/batches/{batch.id} was created but could not be tracked" in caplog.text
