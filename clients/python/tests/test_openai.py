"""track_openai_jobs against a stand-in with the openai SDK's shapes (sdk_standins/openai): each job-creating call
tracked by a real Ratchet before it returns, under the name and kind the server gives it, the request's metadata
kept; the SDK's calls passed on unchanged; a tracking failure never hides the job."""

import asyncio
import os
import subprocess
import sys

import pytest
from conftest import ROOT, TOKEN
from openai import AsyncAzureOpenAI, AsyncOpenAI, AzureOpenAI, OpenAI

from ratchet_client import AsyncRatchetClient, RatchetClient, track_openai_jobs

# The stand-in's videos.create warns as the SDK's does (the Sora API's end).
pytestmark = pytest.mark.filterwarnings("ignore:The Sora API")


class Recorder:
    """A tracker that keeps what it was asked (for what needs no server: credentials, failures)."""

    def __init__(self) -> None:
        self.tracked = []

    def track(self, name, **options):
        self.tracked.append((name, options))
        return {"operation": {"name": name}, "created": True}


def create_each_job(openai):
    """One call of each kind that creates a job, as a user writes it; (name, kind, metadata) of each."""
    batch = openai.batches.create(
        completion_window="24h", endpoint="/v1/responses", input_file_id="file-abc", metadata={"order": "A-17"}
    )
    response = openai.responses.create(model="o3-deep-research", input="research", background=True, metadata={"ticket": "7"})
    video = openai.videos.create(model="sora-2", prompt="a lighthouse")
    # Each makes a new video.
    remix = openai.videos.remix(video.id, prompt="at dusk")
    edit = openai.videos.edit(prompt="in fog", video={"id": video.id})
    extend = openai.videos.extend(prompt="and on", seconds="4", video={"id": video.id})
    job = openai.fine_tuning.jobs.create(model="gpt-4.1-mini", training_file="file-train", metadata={"team": "search"})
    run = openai.evals.runs.create("eval_123", data_source={"type": "jsonl"}, name="nightly")
    return [
        (f"openai/batches/{batch.id}", "openai-batch", {"order": "A-17"}),
        (f"openai/responses/{response.id}", "openai-response", {"ticket": "7"}),
        *[(f"openai/videos/{v.id}", "openai-video", None) for v in (video, remix, edit, extend)],
        (f"openai/fine_tuning/jobs/{job.id}", "openai-fine-tuning", {"team": "search"}),
        (f"openai/evals/eval_123/runs/{run.id}", "openai-eval-run", None),
    ]


def test_each_job_is_tracked_before_the_call_returns(ratchet):
    client = RatchetClient(ratchet.url, token=TOKEN)
    openai = track_openai_jobs(OpenAI(api_key="sk-test"), client)
    for name, kind, metadata in create_each_job(openai):
        tracked = client.get(name)
        assert tracked and (tracked["kind"], tracked.get("userMetadata")) == (kind, metadata)

    # Not jobs: a foreground response and a streamed one (it answers a stream, not the response).
    before = client.list(limit=100)["operations"]
    foreground = openai.responses.create(model="gpt-5", input="hi")
    openai.responses.create(model="gpt-5", input="hi", background=True, stream=True)
    assert client.get(f"openai/responses/{foreground.id}") is None
    assert len(client.list(limit=100)["operations"]) == len(before)

    # The SDK got every call as made, the eval's id still positional.
    assert [call[:2] for call in openai.calls] == [
        ("batches.create", ()),
        ("responses.create", ()),
        ("videos.create", ()),
        ("videos.remix", (openai.calls[3][1][0],)),
        ("videos.edit", ()),
        ("videos.extend", ()),
        ("fine_tuning.jobs.create", ()),
        ("evals.runs.create", ("eval_123",)),
        ("responses.create", ()),
        ("responses.create", ()),
    ]


def test_the_async_client_awaits_the_track_with_either_ratchet_client(ratchet):
    async def scenario(ratchet_client):
        openai = track_openai_jobs(AsyncOpenAI(api_key="sk-test"), ratchet_client)
        batch = await openai.batches.create(completion_window="24h", endpoint="/v1/responses", input_file_id="f", metadata={"n": "1"})
        # videos.create hides its coroutine behind the SDK's deprecation wrapper: awaited all the same.
        video = await openai.videos.create(prompt="a lighthouse")
        job = await openai.fine_tuning.jobs.create(model="gpt-4.1-mini", training_file="f")
        run = await openai.evals.runs.create("eval_9", data_source={})
        response = await openai.responses.create(input="x", background=True)
        return [
            f"openai/batches/{batch.id}",
            f"openai/videos/{video.id}",
            f"openai/fine_tuning/jobs/{job.id}",
            f"openai/evals/eval_9/runs/{run.id}",
            f"openai/responses/{response.id}",
        ]

    async def with_async_client():
        async with AsyncRatchetClient(ratchet.url, token=TOKEN) as asynchronous:
            names = await scenario(asynchronous)
            assert [(await asynchronous.get(name) or {}).get("name") for name in names] == names
            assert (await asynchronous.get(names[0]))["userMetadata"] == {"n": "1"}

    asyncio.run(with_async_client())
    # A RatchetClient tracks from a worker thread.
    sync = RatchetClient(ratchet.url, token=TOKEN)
    names = asyncio.run(scenario(sync))
    assert [(sync.get(name) or {}).get("name") for name in names] == names


def test_a_sync_client_with_an_async_ratchet_client_is_refused():
    async def scenario():
        async with AsyncRatchetClient("http://127.0.0.1:9", token=TOKEN) as asynchronous:
            with pytest.raises(TypeError, match="RatchetClient"):
                track_openai_jobs(OpenAI(), asynchronous)

    asyncio.run(scenario())


def test_the_clients_with_options_and_copy_make_are_tracked_with_their_own_key():
    recorder = Recorder()
    openai = track_openai_jobs(OpenAI(api_key="sk-first"), recorder, keys="first=sk-first second=sk-second")
    slow = openai.with_options(timeout=900)
    batch = slow.batches.create(completion_window="24h", endpoint="/v1/responses", input_file_id="f")
    other = openai.copy(api_key="sk-second").fine_tuning.jobs.create(model="m", training_file="f")
    assert recorder.tracked == [
        (f"openai/batches/{batch.id}", {"credential": "first"}),
        (f"openai/fine_tuning/jobs/{other.id}", {"credential": "second"}),
    ]
    assert slow.timeout == 900 and "sk-" not in repr(recorder.tracked)


def test_the_credential_is_the_label_given_or_found_from_the_keys():
    explicit = Recorder()
    track_openai_jobs(OpenAI(api_key="sk-x"), explicit, credential="team-a").videos.create(prompt="p")
    assert explicit.tracked[0][1] == {"credential": "team-a"}
    unlisted = Recorder()
    track_openai_jobs(OpenAI(api_key="sk-x"), unlisted, keys="a=sk-a").videos.create(prompt="p")
    assert unlisted.tracked[0][1] == {}


def test_an_eval_run_answer_without_its_eval_is_named_from_the_argument():
    recorder = Recorder()
    openai = OpenAI()
    runs = openai.evals.runs
    answer_of = runs.create
    runs.create = lambda eval_id, **params: type("Run", (), {"id": answer_of(eval_id, **params).id})()
    run = track_openai_jobs(openai, recorder).evals.runs.create("eval_7", data_source={})
    assert recorder.tracked == [(f"openai/evals/eval_7/runs/{run.id}", {})]


@pytest.mark.parametrize(
    "make",
    [
        lambda: AzureOpenAI(azure_endpoint="https://contoso-east.openai.azure.com", api_key="azure-key"),
        lambda: OpenAI(base_url="https://contoso-east.openai.azure.com/openai/v1/", api_key="azure-key"),
    ],
)
def test_on_azure_only_batches_are_tracked_named_by_the_resource(ratchet, make):
    client = RatchetClient(ratchet.url, token=TOKEN)
    azure = track_openai_jobs(make(), client)
    batch = azure.batches.create(completion_window="24h", endpoint="/v1/chat/completions", input_file_id="f", metadata={"n": "1"})
    tracked = client.get(f"azure-openai/contoso-east/batches/{batch.id}")
    assert tracked and (tracked["kind"], tracked["userMetadata"]) == ("azure-openai-batch", {"n": "1"})
    # Ratchet names no other Azure job: none is tracked.
    before = client.list(limit=100)["operations"]
    azure.fine_tuning.jobs.create(model="gpt-4.1-mini", training_file="f")
    azure.responses.create(input="x", background=True)
    assert len(client.list(limit=100)["operations"]) == len(before)


@pytest.mark.parametrize(
    "make",
    [
        lambda: AzureOpenAI(azure_endpoint="https://contoso.cognitiveservices.azure.com"),
        lambda: AsyncAzureOpenAI(azure_endpoint="https://contoso.cognitiveservices.azure.com"),
        lambda: OpenAI(base_url="https://bedrock-mantle.us-east-1.api.aws/v1"),
        lambda: OpenAI(provider=object()),
    ],
)
def test_a_client_whose_jobs_ratchet_cannot_name_is_left_alone_with_a_warning(make, caplog):
    recorder = Recorder()
    made = make()
    assert track_openai_jobs(made, recorder) is made
    assert not getattr(made.batches.create, "_ratchet_tracked", False)
    assert "track_openai_jobs tracks nothing on" in caplog.text


def test_a_tracking_failure_never_hides_the_created_job(caplog):
    failures = []
    openai = track_openai_jobs(
        OpenAI(),
        RatchetClient("http://127.0.0.1:9", token=TOKEN, retries=0),
        on_track_error=lambda error, name: failures.append((error.code, name)),
    )
    batch = openai.batches.create(completion_window="24h", endpoint="/v1/responses", input_file_id="f")
    assert batch.id.startswith("batch_")
    assert failures == [("network", f"openai/batches/{batch.id}")]
    assert f"openai/batches/{batch.id} was created but could not be tracked" in caplog.text
    # Wrapping twice tracks once.
    recorder = Recorder()
    twice = track_openai_jobs(track_openai_jobs(OpenAI(), recorder), recorder)
    twice.with_options(timeout=1).batches.create(completion_window="24h", endpoint="/v1/responses", input_file_id="f")
    assert len(recorder.tracked) == 1


def test_ratchet_client_imports_with_neither_sdk_installed():
    # A fresh interpreter where importing openai, anthropic or google fails, as where none is installed.
    script = """
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("openai", "anthropic", "google"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NotInstalled())
import ratchet_client
print(ratchet_client.track_openai_jobs.__name__, ratchet_client.track_anthropic_jobs.__name__)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "clients" / "python")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "track_openai_jobs track_anthropic_jobs"), done.stderr
