"""A stand-in for the ``openai`` SDK (it cannot be installed here): ``OpenAI`` and ``AsyncOpenAI`` with the
resources and ``create`` signatures of openai 2.x that create jobs (batches, responses, videos, fine-tuning jobs,
eval runs), ``AzureOpenAI`` on ``BaseAzureClient``, ``provider=`` kept in ``_provider``. Each call is recorded on
``client.calls`` and answered as the API answers (ids with OpenAI's prefixes, the first status)."""

from functools import cached_property
from typing import Any, Optional

from _stainless import AsyncAPIClient, BaseModel, SyncAPIClient, deprecated, new_id, omit

SORA = "The Sora API is scheduled to permanently shut down on September 24, 2026."
# Each create also takes the SDK's per-request options: extra_headers, extra_query, extra_body, timeout.
NOT_GIVEN: Any = omit


class Batches:
    def __init__(self, client: Any) -> None:
        self._client = client

    def create(
        self,
        *,
        completion_window: str,
        endpoint: str,
        input_file_id: str,
        metadata: Any = omit,
        output_expires_after: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        self._client.calls.append(("batches.create", (), {"input_file_id": input_file_id, "metadata": metadata}))
        return BaseModel(id=new_id("batch_"), object="batch", status="validating", endpoint=endpoint)


class Responses:
    def __init__(self, client: Any) -> None:
        self._client = client

    def create(
        self,
        *,
        background: Any = omit,
        input: Any = omit,
        model: Any = omit,
        metadata: Any = omit,
        stream: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> Any:
        self._client.calls.append(("responses.create", (), {"background": background, "stream": stream, "metadata": metadata}))
        response = BaseModel(id=new_id("resp_"), object="response", status="queued" if background else "completed")
        # A stream answers events; the first names the response.
        return iter([BaseModel(type="response.created", response=response)]) if stream else response


class Videos:
    def __init__(self, client: Any) -> None:
        self._client = client

    def _video(self, method: str, **params: Any) -> BaseModel:
        self._client.calls.append((f"videos.{method}", (), params))
        return BaseModel(id=new_id("video_"), object="video", status="queued")

    @deprecated(SORA)
    def create(
        self,
        *,
        prompt: str,
        input_reference: Any = omit,
        model: Any = omit,
        seconds: Any = omit,
        size: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        return self._video("create", prompt=prompt, model=model)

    @deprecated(SORA)
    def remix(
        self, video_id: str, *, prompt: str, extra_headers: Any = None, extra_query: Any = None, extra_body: Any = None, timeout: Any = NOT_GIVEN
    ) -> BaseModel:
        self._client.calls.append(("videos.remix", (video_id,), {"prompt": prompt}))
        return BaseModel(id=new_id("video_"), object="video", status="queued", remixed_from_video_id=video_id)

    @deprecated(SORA)
    def edit(
        self, *, prompt: str, video: Any, extra_headers: Any = None, extra_query: Any = None, extra_body: Any = None, timeout: Any = NOT_GIVEN
    ) -> BaseModel:
        return self._video("edit", prompt=prompt, video=video)

    @deprecated(SORA)
    def extend(
        self,
        *,
        prompt: str,
        seconds: Any,
        video: Any,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        return self._video("extend", prompt=prompt, seconds=seconds, video=video)


class Jobs:
    def __init__(self, client: Any) -> None:
        self._client = client

    def create(
        self,
        *,
        model: str,
        training_file: str,
        hyperparameters: Any = omit,
        integrations: Any = omit,
        metadata: Any = omit,
        method: Any = omit,
        seed: Any = omit,
        suffix: Any = omit,
        validation_file: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        self._client.calls.append(("fine_tuning.jobs.create", (), {"training_file": training_file, "metadata": metadata}))
        return BaseModel(id=new_id("ftjob-"), object="fine_tuning.job", status="validating_files", model=model)


class FineTuning:
    def __init__(self, client: Any) -> None:
        self._client = client

    @cached_property
    def jobs(self) -> Jobs:
        return Jobs(self._client)


class Runs:
    def __init__(self, client: Any) -> None:
        self._client = client

    def create(
        self,
        eval_id: str,
        *,
        data_source: Any,
        metadata: Any = omit,
        name: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        self._client.calls.append(("evals.runs.create", (eval_id,), {"metadata": metadata}))
        return BaseModel(id=new_id("evalrun_"), object="eval.run", eval_id=eval_id, status="queued")


class Evals:
    def __init__(self, client: Any) -> None:
        self._client = client

    @cached_property
    def runs(self) -> Runs:
        return Runs(self._client)


def _async_twin(resource: type, name: str) -> type:
    """A resource's async twin, as the SDK writes one beside it: each create an ``async def``, a deprecated one
    behind the same plain wrapper (so it does not look like a coroutine function)."""

    def twin(method: Any) -> Any:
        sync = getattr(method, "__wrapped__", method)

        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return sync(self, *args, **kwargs)

        return deprecated(SORA)(call) if sync is not method else call

    creates = ("create", "remix", "edit", "extend")
    return type(name, (resource,), {k: twin(v) for k, v in vars(resource).items() if k in creates})


AsyncBatches = _async_twin(Batches, "AsyncBatches")
AsyncResponses = _async_twin(Responses, "AsyncResponses")
AsyncVideos = _async_twin(Videos, "AsyncVideos")
AsyncJobs = _async_twin(Jobs, "AsyncJobs")
AsyncRuns = _async_twin(Runs, "AsyncRuns")


class AsyncFineTuning(FineTuning):
    @cached_property
    def jobs(self) -> Any:
        return AsyncJobs(self._client)


class AsyncEvals(Evals):
    @cached_property
    def runs(self) -> Any:
        return AsyncRuns(self._client)


class OpenAI(SyncAPIClient):
    def __init__(self, *, api_key: Optional[str] = None, base_url: str = "", provider: Any = None, **options: Any) -> None:
        super().__init__(api_key=api_key, base_url=base_url or "https://api.openai.com/v1/", **options)
        self._provider = provider

    @cached_property
    def batches(self) -> Batches:
        return Batches(self)

    @cached_property
    def responses(self) -> Responses:
        return Responses(self)

    @cached_property
    def videos(self) -> Videos:
        return Videos(self)

    @cached_property
    def fine_tuning(self) -> FineTuning:
        return FineTuning(self)

    @cached_property
    def evals(self) -> Evals:
        return Evals(self)


class AsyncOpenAI(AsyncAPIClient):
    def __init__(self, *, api_key: Optional[str] = None, base_url: str = "", provider: Any = None, **options: Any) -> None:
        super().__init__(api_key=api_key, base_url=base_url or "https://api.openai.com/v1/", **options)
        self._provider = provider

    @cached_property
    def batches(self) -> Any:
        return AsyncBatches(self)

    @cached_property
    def responses(self) -> Any:
        return AsyncResponses(self)

    @cached_property
    def videos(self) -> Any:
        return AsyncVideos(self)

    @cached_property
    def fine_tuning(self) -> AsyncFineTuning:
        return AsyncFineTuning(self)

    @cached_property
    def evals(self) -> AsyncEvals:
        return AsyncEvals(self)


class BaseAzureClient:
    """``AzureOpenAI(azure_endpoint=…)`` sends to ``{azure_endpoint}/openai/``."""

    def __init__(self, *, azure_endpoint: str = "", api_version: str = "2025-04-01-preview", base_url: str = "", **options: Any) -> None:
        super().__init__(base_url=base_url or f"{azure_endpoint.rstrip('/')}/openai/", **options)  # type: ignore[call-arg]
        self._api_version = api_version


class AzureOpenAI(BaseAzureClient, OpenAI):
    pass


class AsyncAzureOpenAI(BaseAzureClient, AsyncOpenAI):
    pass
