"""Stand-ins with google-genai's shapes (it cannot be installed here): a Client with the modules and keyword-only
methods that create jobs, as 1.x makes them (typed config objects, the interactions resource made on first use) and
as 2.x does (plain dict configs, the next-gen interactions resource). Each records the calls it was given."""

import functools
import uuid
from typing import Any, Dict, List, Optional


class Answer:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class Config:
    """A typed config as 1.x's pydantic types are read: by attribute."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _id() -> str:
    return uuid.uuid4().hex[:12]


class _Module:
    def __init__(self, calls: List[Any]) -> None:
        self.calls = calls


class Batches(_Module):
    def create(self, *, model: str, src: Any, config: Optional[Any] = None) -> Answer:
        self.calls.append(("batches.create", model, config))
        return Answer(name=f"batches/{_id()}", state="JOB_STATE_PENDING")

    def create_embeddings(self, *, model: str, src: Any, config: Optional[Any] = None) -> Answer:
        self.calls.append(("batches.create_embeddings", model, config))
        return Answer(name=f"batches/{_id()}")


class Models(_Module):
    def generate_videos(self, *, model: str, prompt: Optional[str] = None, config: Optional[Any] = None) -> Answer:
        self.calls.append(("models.generate_videos", model, config))
        return Answer(name=f"models/{model}/operations/{_id()}", done=False)


class FileSearchStores(_Module):
    def import_file(self, *, file_search_store_name: str, file_name: str, config: Optional[Any] = None) -> Answer:
        self.calls.append(("file_search_stores.import_file", file_search_store_name, file_name))
        return Answer(name=f"{file_search_store_name}/operations/{_id()}", done=False)

    def upload_to_file_search_store(self, *, file: str, file_search_store_name: str, config: Optional[Any] = None) -> Answer:
        self.calls.append(("file_search_stores.upload_to_file_search_store", file_search_store_name, file))
        return Answer(name=f"{file_search_store_name}/upload/operations/{_id()}", done=False)


class Tunings(_Module):
    def tune(self, *, base_model: str, training_dataset: Any, config: Optional[Any] = None) -> Answer:
        self.calls.append(("tunings.tune", base_model))
        return Answer(name=f"projects/p/locations/us-central1/tuningJobs/{uuid.uuid4().int % 10**12}")


class Interactions(_Module):
    def create(
        self,
        *,
        input: Any,
        model: Optional[str] = None,
        agent: Optional[str] = None,
        background: Optional[bool] = None,
        stream: Optional[bool] = None,
        webhook_config: Optional[Dict[str, Any]] = None,
        **rest: Any,
    ) -> Any:
        self.calls.append(("interactions.create", model or agent, background, stream))
        if stream:
            return iter([Answer(event_type="interaction.created")])
        return Answer(id=f"v1_{_id()}", status="in_progress" if background else "completed")


def _experimental(method: Any) -> Any:
    """The SDK's experimental_warning decorator (on ``aio.tunings.tune``): a plain function around the coroutine
    function, so the method does not look like one."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return wrapper


def _async_of(module: Any) -> Any:
    """The same module's methods as coroutines (`client.aio`)."""

    class Async:
        pass

    wrapper = Async()
    for name in dir(module):
        method = getattr(module, name)
        if callable(method) and not name.startswith("_"):

            async def call(*args: Any, __method: Any = method, **kwargs: Any) -> Any:
                return __method(*args, **kwargs)

            setattr(wrapper, name, _experimental(call) if name == "tune" else call)
    return wrapper


class ApiClient:
    def __init__(self, api_key: Optional[str], vertexai: bool, project: Optional[str], location: Optional[str]) -> None:
        self.api_key, self.vertexai, self.project, self.location = api_key, vertexai, project, location


class Client:
    """``google.genai.Client``: ``major`` 1 or 2."""

    def __init__(
        self, major: int, api_key: Optional[str] = None, vertexai: bool = False, project: Optional[str] = None, location: Optional[str] = None
    ) -> None:
        self.major = major
        self.calls: List[Any] = []
        self._api_client = ApiClient(api_key, vertexai, project, location)
        self.batches = Batches(self.calls)
        self.models = Models(self.calls)
        self.file_search_stores = FileSearchStores(self.calls)
        self.tunings = Tunings(self.calls)
        self._interactions: Optional[Interactions] = None
        self.aio = Answer(
            batches=_async_of(self.batches),
            models=_async_of(self.models),
            file_search_stores=_async_of(self.file_search_stores),
            tunings=_async_of(self.tunings),
            interactions=_async_of(self.interactions),
        )

    @property
    def vertexai(self) -> bool:
        return self._api_client.vertexai

    @property
    def interactions(self) -> Interactions:
        # Made on first use and kept, as both majors do.
        if self._interactions is None:
            self._interactions = Interactions(self.calls)
        return self._interactions


def batch_config(major: int, metadata: Dict[str, Any]) -> Any:
    """A batch's config carrying webhook user metadata, as each major's users write it."""
    if major == 1:
        return Config(display_name="nightly", webhook_config=Config(user_metadata=metadata))
    return {"display_name": "nightly", "webhook_config": {"user_metadata": metadata}}
