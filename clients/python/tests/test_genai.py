"""track_jobs against stand-ins with google-genai 1.x's and 2.x's shapes: each job-creating call tracked by a real
Ratchet before it returns, its metadata kept; the SDK's calls passed on unchanged; a tracking failure never hides
the job."""

import asyncio

import pytest
from conftest import TOKEN
from genai_standins import Client, batch_config

from ratchet_client import AsyncRatchetClient, RatchetClient, track_jobs


class Recorder:
    """A tracker that keeps what it was asked (for what the server here cannot take: credentials, Agent Platform names)."""

    def __init__(self) -> None:
        self.tracked = []

    def track(self, name, **options):
        self.tracked.append((name, options))
        return {"operation": {"name": name}, "created": True}


@pytest.mark.parametrize("major", [1, 2])
def test_each_job_is_tracked_before_the_call_returns(ratchet, major):
    client = RatchetClient(ratchet.url, token=TOKEN)
    ai = track_jobs(Client(major), client)

    batch = ai.batches.create(model="gemini-2.5-flash", src=[{"contents": []}], config=batch_config(major, {"order": "A-17"}))
    tracked = client.get(batch.name)
    assert tracked and tracked["kind"] == "batch" and tracked["userMetadata"] == {"order": "A-17"}
    embeddings = ai.batches.create_embeddings(model="gemini-embedding-001", src={"file_name": "files/x"})
    video = ai.models.generate_videos(model="veo-3.0-generate-preview", prompt="a lighthouse")
    imported = ai.file_search_stores.import_file(file_search_store_name="fileSearchStores/docs", file_name="files/a")
    uploaded = ai.file_search_stores.upload_to_file_search_store(file="a.pdf", file_search_store_name="fileSearchStores/docs")
    interaction = ai.interactions.create(
        model="gemini-3-pro", input="research", background=True, webhook_config={"user_metadata": {"ticket": 7}}
    )
    kinds = {
        embeddings.name: "batch",
        video.name: "video",
        imported.name: "file-search",
        uploaded.name: "file-search",
        f"interactions/{interaction.id}": "interaction",
    }
    assert {name: (client.get(name) or {}).get("kind") for name in kinds} == kinds
    assert client.get(f"interactions/{interaction.id}")["userMetadata"] == {"ticket": 7}

    # Not jobs: a foreground interaction, a streamed one, and a tuning off the Agent Platform.
    before = client.list(limit=100)["operations"]
    foreground = ai.interactions.create(model="gemini-3-pro", input="hi")
    ai.interactions.create(model="gemini-3-pro", input="hi", background=True, stream=True)
    ai.tunings.tune(base_model="gemini-2.5-flash", training_dataset={})
    assert client.get(f"interactions/{foreground.id}") is None
    assert len(client.list(limit=100)["operations"]) == len(before)

    # The SDK got every call as made, keyword for keyword.
    assert [call[0] for call in ai.calls] == [
        "batches.create",
        "batches.create_embeddings",
        "models.generate_videos",
        "file_search_stores.import_file",
        "file_search_stores.upload_to_file_search_store",
        "interactions.create",
        "interactions.create",
        "interactions.create",
        "tunings.tune",
    ]


@pytest.mark.parametrize("major", [1, 2])
def test_the_aio_calls_are_tracked_with_either_client(ratchet, major):
    async def scenario():
        async with AsyncRatchetClient(ratchet.url, token=TOKEN) as asynchronous:
            ai = track_jobs(Client(major), asynchronous)
            batch = await ai.aio.batches.create(model="gemini-2.5-flash", src=[], config=batch_config(major, {"n": 1}))
            assert (await asynchronous.get(batch.name))["userMetadata"] == {"n": 1}
            # The sync calls are left alone with an async tracker (they cannot await it).
            untracked = ai.batches.create(model="gemini-2.5-flash", src=[])
            assert await asynchronous.get(untracked.name) is None

        sync = RatchetClient(ratchet.url, token=TOKEN)
        ai = track_jobs(Client(major), sync)
        interaction = await ai.aio.interactions.create(model="gemini-3-pro", input="x", background=True)
        assert sync.get(f"interactions/{interaction.id}")["kind"] == "interaction"

    asyncio.run(scenario())


def test_the_credential_label_is_found_from_the_keys_and_the_key_never_sent():
    recorder = Recorder()
    ai = track_jobs(Client(2, api_key="AIza-second-key"), recorder, keys="first=AIza-first-key, second=AIza-second-key")
    batch = ai.batches.create(model="m", src=[])
    assert recorder.tracked == [(batch.name, {"credential": "second"})]
    assert "AIza" not in repr(recorder.tracked)
    explicit = Recorder()
    track_jobs(Client(1), explicit, credential="team-a").batches.create(model="m", src=[])
    assert explicit.tracked[0][1] == {"credential": "team-a"}


def test_on_the_agent_platform_interactions_are_scoped_and_tunings_tracked():
    recorder = Recorder()
    ai = track_jobs(Client(2, vertexai=True, project="p", location="us-central1"), recorder)
    interaction = ai.interactions.create(agent="deep-research", input="x", background=True)
    job = ai.tunings.tune(base_model="gemini-2.5-flash", training_dataset={})
    # aio.tunings.tune is a plain function (the SDK's experimental warning) answering a coroutine: awaited all the same.
    awaited = asyncio.run(ai.aio.tunings.tune(base_model="gemini-2.5-flash", training_dataset={}))
    assert [name for name, _ in recorder.tracked] == [
        f"projects/p/locations/us-central1/interactions/{interaction.id}",
        job.name,
        awaited.name,
    ]


def test_a_tracking_failure_never_hides_the_created_job(caplog):
    failures = []
    ai = track_jobs(
        Client(1), RatchetClient("http://127.0.0.1:9", token=TOKEN, retries=0), on_track_error=lambda e, name: failures.append((e.code, name))
    )
    batch = ai.batches.create(model="m", src=[])
    assert batch.name.startswith("batches/")
    assert failures == [("network", batch.name)]
    assert f"{batch.name} was created but could not be tracked" in caplog.text
    # Wrapping twice tracks once.
    recorder = Recorder()
    twice = track_jobs(track_jobs(Client(1), recorder), recorder)
    twice.batches.create(model="m", src=[])
    assert len(recorder.tracked) == 1
