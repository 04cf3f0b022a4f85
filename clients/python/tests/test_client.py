"""RatchetClient against a real `ratchet start`: each method, waits and watches woken by webhooks sent meanwhile,
and a watch that goes on across a restart of the server, missing nothing and repeating nothing."""

import threading
import time

import pytest
from conftest import TOKEN, eventually

from ratchet_client import RatchetClient, RatchetError


@pytest.fixture()
def client(ratchet):
    return RatchetClient(ratchet.url, token=TOKEN, timeout=10)


def later(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_track_get_list_history(client, ratchet, unique):
    name = unique()
    first = client.track(name, metadata={"order": "A-17"})
    assert first["created"] is True
    assert first["operation"]["name"] == name and first["operation"]["state"] is None
    assert first["operation"]["userMetadata"] == {"order": "A-17"}
    again = client.track(name)
    assert again["created"] is False and again["operation"]["version"] == 1

    ratchet.webhook("batch.succeeded", name, "2026-12-01T10:00:00Z")
    got = client.get(name)
    assert got["state"] == "SUCCEEDED" and got["version"] == 2
    assert got["polling"]["nextPollAt"] is None
    assert client.get(unique()) is None

    other = unique()
    client.track(other)
    page = client.list(kind="batch", limit=1)
    assert len(page["operations"]) == 1 and page["nextCursor"]
    rest = client.list(kind="batch", limit=100, cursor=page["nextCursor"])
    names = {op["name"] for op in page["operations"] + rest["operations"]}
    assert {name, other} <= names
    assert name in {op["name"] for op in client.list(state="SUCCEEDED")["operations"]}
    assert other not in {op["name"] for op in client.list(state="SUCCEEDED")["operations"]}

    history = eventually(lambda: (h := client.history(name)) and len(h) == 2 and h, what="history")
    assert [(h["version"], h["state"], h["source"]) for h in history] == [(1, None, "track"), (2, "SUCCEEDED", "webhook")]


def test_errors_carry_the_api_code_and_status(client, ratchet, unique):
    with pytest.raises(RatchetError) as bad:
        client.track("not a resource name")
    assert (bad.value.code, bad.value.status) == ("malformed-request", 400)
    with pytest.raises(RatchetError) as missing:
        client.history(unique())
    assert (missing.value.code, missing.value.status) == ("not-found", 404)
    with pytest.raises(RatchetError) as refused:
        RatchetClient(ratchet.url, token="wrong-token-0123456789abcdef").list()
    assert (refused.value.code, refused.value.status) == ("unauthorized", 401)
    with pytest.raises(RatchetError) as wrong_state:
        client.list(state="DONE")
    assert wrong_state.value.code == "malformed-request"
    with pytest.raises(RatchetError) as url:
        RatchetClient("ftp://example.com")
    assert url.value.code == "invalid-url"
    with pytest.raises(RatchetError) as network:
        RatchetClient("http://127.0.0.1:9", token=TOKEN, retries=1).list()
    assert network.value.code == "network" and network.value.status is None
    assert TOKEN not in repr(client)


def test_token_from_the_environment(ratchet, monkeypatch):
    monkeypatch.setenv("RATCHET_API_TOKEN", f"{TOKEN},another-token-0123456789abcdef")
    assert "operations" in RatchetClient(ratchet.url).list(limit=1)


def test_changes_pages_the_feed_and_long_polls(client, ratchet, unique):
    name = unique("interactions")
    head = client.changes()
    assert head["changes"] == [] and head["cursor"]
    client.track(name)
    page = client.changes(after=head["cursor"], name=name)
    assert [(c["name"], c["version"], c["writeKind"]) for c in page["changes"]] == [(name, 1, "track")]

    started = time.monotonic()
    later(0.5, lambda: ratchet.webhook("interaction.requires_action", name, "2026-12-01T10:00:00Z"))
    woken = client.changes(after=page["cursor"], wait=10, name=name)
    assert time.monotonic() - started < 5
    assert [(c["version"], c["state"]) for c in woken["changes"]] == [(2, "REQUIRES_ACTION")]
    assert client.changes(after=woken["cursor"], name=name, kind="interaction", state="SUCCEEDED")["changes"] == []
    with pytest.raises(RatchetError) as bad:
        client.changes(after="not-a-cursor")
    assert bad.value.code == "malformed-request"


def test_list_changes_and_watch_by_provider(client, ratchet, unique):
    """An OpenAI-named job is tracked without any OpenAI key; provider= keeps each provider's jobs apart."""
    openai_job, gemini_job = unique("openai/batches"), unique()
    head = client.changes()["cursor"]
    tracked = client.track(openai_job)["operation"]
    assert (tracked["provider"], tracked["kind"]) == ("openai", "openai-batch")
    assert client.track(gemini_job)["operation"]["provider"] == "gemini"

    listed = client.list(provider="openai", limit=100)["operations"]
    assert openai_job in {op["name"] for op in listed} and {op["provider"] for op in listed} == {"openai"}
    assert openai_job not in {op["name"] for op in client.list(provider="gemini", limit=100)["operations"]}
    feed = client.changes(after=head, wait=5, provider="openai")["changes"]
    assert [(c["name"], c["provider"], c["writeKind"]) for c in feed] == [(openai_job, "openai", "track")]
    with pytest.raises(RatchetError) as wrong:
        client.list(provider="OpenAI")
    assert wrong.value.code == "malformed-request"

    # The snapshot is read before its first item comes: what is tracked after it comes live, in commit order.
    watched = client.watch(provider="openai")
    seen = [next(watched)]
    later_gemini, later_openai = unique(), unique("openai/batches")
    client.track(later_gemini)
    client.track(later_openai)
    for change in watched:
        seen.append(change)
        if change["name"] == later_openai:
            break
    watched.close()
    assert openai_job in {c["name"] for c in seen if c["snapshot"]}
    assert {c["provider"] for c in seen} == {"openai"} and not {gemini_job, later_gemini} & {c["name"] for c in seen}
    assert (seen[-1]["snapshot"], seen[-1]["version"], seen[-1]["writeKind"]) == (False, 1, "track")


def test_wait_for_is_woken_by_webhooks_sent_meanwhile(client, ratchet, unique):
    name = unique("interactions")
    client.track(name)
    seen = []
    later(0.4, lambda: ratchet.webhook("interaction.requires_action", name, "2026-12-01T10:00:00Z"))
    later(0.8, lambda: ratchet.webhook("interaction.completed", name, "2026-12-01T10:01:00Z"))
    started = time.monotonic()
    done = client.wait_for(name, timeout=20, on_change=lambda op: seen.append(op["state"]))
    assert done["state"] == "SUCCEEDED" and time.monotonic() - started < 5
    assert seen[0] is None and seen[-1] == "SUCCEEDED"


def test_wait_for_never_misses_a_change_made_before_the_call(client, ratchet, unique):
    name = unique()
    ratchet.webhook("batch.failed", name, "2026-12-01T10:00:00Z")
    assert client.wait_for(name, until=["FAILED", "CANCELLED"], timeout=1)["state"] == "FAILED"
    assert client.wait_for(name, timeout=1)["state"] == "FAILED"


def test_wait_for_states_timeout_and_refusals(client, ratchet, unique):
    name = unique("interactions")
    client.track(name)
    ratchet.webhook("interaction.requires_action", name, "2026-12-01T10:00:00Z")
    # RUNNING or a later open state: REQUIRES_ACTION shares RUNNING's rank.
    assert client.wait_for(name, until="REQUIRES_ACTION", timeout=1)["state"] == "REQUIRES_ACTION"
    with pytest.raises(RatchetError) as timeout:
        client.wait_for(name, timeout=0.5)
    assert timeout.value.code == "timeout" and timeout.value.operation["state"] == "REQUIRES_ACTION"
    ratchet.webhook("interaction.failed", name, "2026-12-01T10:02:00Z")
    with pytest.raises(RatchetError) as unreachable:
        client.wait_for(name, until="SUCCEEDED", timeout=5)
    assert unreachable.value.code == "unreachable"
    with pytest.raises(RatchetError) as unknown:
        client.wait_for(unique(), timeout=1)
    assert unknown.value.code == "not-found"
    with pytest.raises(RatchetError) as wrong:
        client.wait_for(name, until="succeeded")
    assert wrong.value.code == "invalid-argument" and "SUCCEEDED" in str(wrong.value)


def test_watch_yields_a_snapshot_then_each_change_as_it_happens(client, ratchet, unique):
    before, after = unique("interactions"), unique("interactions")
    client.track(before)
    watched = client.watch(kind="interaction")
    snapshot = []
    for change in watched:
        snapshot.append(change)
        if change["name"] == before:
            break
    assert snapshot[-1]["snapshot"] is True
    later(0.3, lambda: client.track(after))
    later(0.6, lambda: ratchet.webhook("interaction.completed", after, "2026-12-01T10:00:00Z"))
    live = []
    for change in watched:
        if change["name"] == after:
            live.append((change["version"], change["state"], change["snapshot"]))
        if len(live) == 2:
            break
    assert live == [(1, None, False), (2, "SUCCEEDED", False)]
    watched.close()


def test_watch_goes_on_across_a_restart_of_the_server(client, ratchet, unique):
    """Nothing missed, nothing twice: a watcher keeps its cursor while the server is down and comes back."""
    names = [unique("interactions") for _ in range(3)]
    head = client.changes()["cursor"]
    seen = []
    stop = threading.Event()

    def watch():
        for change in client.watch(kind="interaction", after=head):
            if change["name"] in names:
                seen.append((change["name"], change["version"]))
            if stop.is_set() and len(seen) >= 6:
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for name in names:
        client.track(name)
    eventually(lambda: len(seen) == 3, what="the first changes")
    ratchet.restart()
    for index, name in enumerate(names):
        ratchet.webhook("interaction.completed", name, f"2026-12-01T10:0{index}:00Z")
    stop.set()
    watcher.join(30)
    assert not watcher.is_alive()
    assert sorted(seen) == sorted([(n, 1) for n in names] + [(n, 2) for n in names])
    assert len(seen) == len(set(seen))
