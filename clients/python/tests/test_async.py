"""AsyncRatchetClient (httpx) against the same real Ratchet: the same methods, awaited."""

import asyncio
import builtins
import importlib
import sys

import pytest
from conftest import TOKEN

import ratchet_client
from ratchet_client import AsyncRatchetClient, RatchetError


def run(coroutine):
    return asyncio.run(coroutine)


def test_the_same_methods_awaited(ratchet, unique):
    async def scenario():
        async with AsyncRatchetClient(ratchet.url, token=TOKEN, timeout=10) as client:
            name = unique("interactions")
            assert (await client.track(name))["created"] is True
            assert (await client.track(name))["created"] is False
            assert (await client.get(name))["state"] is None
            assert await client.get(unique()) is None
            head = (await client.changes())["cursor"]

            async def send():
                await asyncio.sleep(0.3)
                await asyncio.to_thread(ratchet.webhook, "interaction.requires_action", name, "2026-12-01T10:00:00Z")
                await asyncio.sleep(0.3)
                await asyncio.to_thread(ratchet.webhook, "interaction.completed", name, "2026-12-01T10:01:00Z")

            sender = asyncio.ensure_future(send())
            done = await client.wait_for(name, timeout=20)
            await sender
            assert done["state"] == "SUCCEEDED"
            page = await client.changes(after=head, name=name)
            assert [c["version"] for c in page["changes"]] == [2, 3]
            # History is written from the feed, a moment after the write.
            for _ in range(100):
                history = [h["version"] for h in await client.history(name)]
                if len(history) == 3:
                    break
                await asyncio.sleep(0.05)
            assert history == [1, 2, 3]
            assert any(op["name"] == name for op in (await client.list(kind="interaction", limit=100))["operations"])

            seen = []
            async for change in client.watch(name=name):
                seen.append((change["version"], change["snapshot"]))
                break
            assert seen == [(3, True)]
            with pytest.raises(RatchetError) as missing:
                await client.wait_for(unique(), timeout=1)
            assert missing.value.code == "not-found"

    run(scenario())


def test_watch_is_woken_by_webhooks_sent_meanwhile(ratchet, unique):
    async def scenario():
        async with AsyncRatchetClient(ratchet.url, token=TOKEN) as client:
            name = unique()
            head = (await client.changes())["cursor"]

            async def send():
                await asyncio.sleep(0.3)
                await asyncio.to_thread(ratchet.webhook, "batch.succeeded", name, "2026-12-01T10:00:00Z")

            sender = asyncio.ensure_future(send())
            async for change in client.watch(name=name, after=head):
                assert (change["name"], change["state"], change["snapshot"]) == (name, "SUCCEEDED", False)
                break
            await sender

    run(scenario())


def test_list_changes_and_watch_by_provider_awaited(ratchet, unique):
    async def scenario():
        async with AsyncRatchetClient(ratchet.url, token=TOKEN, timeout=10) as client:
            openai_job, gemini_job = unique("openai/batches"), unique()
            head = (await client.changes())["cursor"]
            await client.track(gemini_job)
            assert (await client.track(openai_job))["operation"]["provider"] == "openai"
            listed = (await client.list(provider="openai", limit=100))["operations"]
            assert openai_job in {op["name"] for op in listed} and gemini_job not in {op["name"] for op in listed}
            feed = (await client.changes(after=head, wait=5, provider="openai"))["changes"]
            assert [(c["name"], c["provider"]) for c in feed] == [(openai_job, "openai")]
            async for change in client.watch(provider="openai", after=head):
                assert (change["name"], change["provider"], change["snapshot"]) == (openai_job, "openai", False)
                break

    run(scenario())


def test_without_httpx_a_clear_error_names_it(monkeypatch):
    real_import = builtins.__import__

    def no_httpx(name, *args, **kwargs):
        if name == "httpx":
            raise ImportError("No module named 'httpx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_httpx)
    monkeypatch.delitem(sys.modules, "httpx", raising=False)
    module = importlib.reload(sys.modules["ratchet_client._async"])
    try:
        with pytest.raises(RatchetError) as missing:
            module.AsyncRatchetClient("http://127.0.0.1:1")
        assert missing.value.code == "missing-dependency" and "httpx" in str(missing.value)
        # The sync client needs nothing.
        assert ratchet_client.RatchetClient("http://127.0.0.1:1").url == "http://127.0.0.1:1"
    finally:
        monkeypatch.undo()
        importlib.reload(sys.modules["ratchet_client._async"])
