"""The READMEs' Python, as written: wait.py run against the real Ratchet, receiver.py's Flask view handed real
effects (Flask cannot be installed here: a stand-in with its shape carries the request), and the client README's
OpenAI and Anthropic examples on the SDK stand-ins, tracking on the real Ratchet (its URL in place of port 3000)."""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import types

import pytest
from conftest import ROOT, TOKEN, eventually

from ratchet_client import RatchetClient


def readme_block(first_line, readme_path=ROOT / "README.md"):
    readme = readme_path.read_text()
    for block in re.findall(r"```python\n(.*?)```", readme, re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"the README has no python block starting {first_line!r}")


def test_wait_py_waits_for_the_end(ratchet, unique, tmp_path):
    name = unique()
    script = tmp_path / "wait.py"
    script.write_text(readme_block("# wait.py"))
    RatchetClient(ratchet.url, token=TOKEN).track(name)
    env = {**os.environ, "RATCHET_URL": ratchet.url, "RATCHET_API_TOKEN": TOKEN, "PYTHONPATH": str(ROOT / "clients" / "python")}
    child = subprocess.Popen([sys.executable, str(script), name], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Timer(0.5, lambda: ratchet.webhook("batch.succeeded", name, "2026-12-01T10:00:00Z")).start()
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 0, out
    assert out.strip() == f"{name} SUCCEEDED"


class FlaskStandIn(types.ModuleType):
    """`flask` as receiver.py uses it: Flask(__name__), @app.post(path), request.get_data(), request.headers."""

    def __init__(self):
        super().__init__("flask")
        self.request = types.SimpleNamespace(get_data=lambda: b"", headers={})

        class Flask:
            def __init__(self, name):
                self.views = {}

            def post(self, path):
                def register(view):
                    self.views[path] = view
                    return view

                return register

        self.Flask = Flask


def test_receiver_py_verifies_real_effects(ratchet, unique, monkeypatch):
    flask = FlaskStandIn()
    monkeypatch.setitem(sys.modules, "flask", flask)
    monkeypatch.setenv("EFFECTS_SIGNING_SECRET", ratchet.effects_secret)
    namespace = {"__name__": "receiver"}
    exec(compile(readme_block("# receiver.py"), "receiver.py", "exec"), namespace)
    view = namespace["app"].views["/effects"]

    name = unique()
    ratchet.webhook("batch.succeeded", name, "2026-12-01T10:00:00Z")
    delivery = eventually(
        lambda: next((d for d in list(ratchet.receiver.deliveries) if f'"name":"{name}"'.encode() in d["body"]), None),
        timeout=15,
        what="the effect",
    )
    flask.request.get_data = lambda: delivery["body"]
    flask.request.headers = delivery["headers"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert view() == ("", 204)
    assert printed.getvalue().strip() == f"{name}#1 SUCCEEDED"
    flask.request.get_data = lambda: delivery["body"].replace(b"SUCCEEDED", b"FAILED")
    assert view() == ("", 400)


@pytest.mark.parametrize(
    "first_line, name",
    [
        ("from openai import OpenAI", lambda batch: f"openai/batches/{batch.id}"),
        ("from anthropic import Anthropic", lambda batch: f"anthropic/messages/batches/{batch.id}"),
    ],
)
def test_the_client_readmes_sdk_examples_track_their_batch(ratchet, monkeypatch, first_line, name):
    monkeypatch.setenv("RATCHET_API_TOKEN", TOKEN)
    example = readme_block(first_line, ROOT / "clients" / "python" / "README.md")
    namespace = {"__name__": "example"}
    exec(compile(example.replace("http://127.0.0.1:3000", ratchet.url), "README.md", "exec"), namespace)
    tracked = RatchetClient(ratchet.url, token=TOKEN).get(name(namespace["batch"]))
    # The metadata the comment promises, where the example gives some.
    promised = re.search(r"with metadata (\{.*\})", example)
    assert tracked and tracked.get("userMetadata") == (json.loads(promised.group(1)) if promised else None)
