"""A stand-in for the ``anthropic`` SDK (it cannot be installed here): ``Anthropic`` and ``AsyncAnthropic`` with
``messages.batches.create`` and ``beta.messages.batches.create`` as the SDK has them. Each call is recorded on
``client.calls`` and answered as the API answers (a ``msgbatch_`` id, ``in_progress``)."""

from functools import cached_property
from typing import Any, Iterable

from _stainless import AsyncAPIClient, BaseModel, SyncAPIClient, new_id, omit

# Each create also takes the SDK's per-request options: extra_headers, extra_query, extra_body, timeout.
NOT_GIVEN: Any = omit


class Batches:
    def __init__(self, client: Any) -> None:
        self._client = client

    def create(
        self,
        *,
        requests: Iterable[Any],
        user_profile_id: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        requests = list(requests)
        self._client.calls.append(("messages.batches.create", (), {"requests": len(requests)}))
        return BaseModel(id=new_id("msgbatch_"), type="message_batch", processing_status="in_progress")


class BetaBatches:
    def __init__(self, client: Any) -> None:
        self._client = client

    def create(
        self,
        *,
        requests: Iterable[Any],
        betas: Any = omit,
        user_profile_id: Any = omit,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = NOT_GIVEN,
    ) -> BaseModel:
        requests = list(requests)
        self._client.calls.append(("beta.messages.batches.create", (), {"requests": len(requests), "betas": betas}))
        return BaseModel(id=new_id("msgbatch_"), type="message_batch", processing_status="in_progress")


class AsyncBatches(Batches):
    async def create(self, **params: Any) -> BaseModel:  # type: ignore[override]
        return Batches.create(self, **params)


class AsyncBetaBatches(BetaBatches):
    async def create(self, **params: Any) -> BaseModel:  # type: ignore[override]
        return BetaBatches.create(self, **params)


class Messages:
    def __init__(self, client: Any) -> None:
        self._client = client

    @cached_property
    def batches(self) -> Any:
        return AsyncBatches(self._client) if isinstance(self._client, AsyncAPIClient) else Batches(self._client)


class BetaMessages:
    def __init__(self, client: Any) -> None:
        self._client = client

    @cached_property
    def batches(self) -> Any:
        return AsyncBetaBatches(self._client) if isinstance(self._client, AsyncAPIClient) else BetaBatches(self._client)


class Beta:
    def __init__(self, client: Any) -> None:
        self._client = client

    @cached_property
    def messages(self) -> BetaMessages:
        return BetaMessages(self._client)


class Anthropic(SyncAPIClient):
    @cached_property
    def messages(self) -> Messages:
        return Messages(self)

    @cached_property
    def beta(self) -> Beta:
        return Beta(self)


class AsyncAnthropic(AsyncAPIClient):
    @cached_property
    def messages(self) -> Messages:
        return Messages(self)

    @cached_property
    def beta(self) -> Beta:
        return Beta(self)
