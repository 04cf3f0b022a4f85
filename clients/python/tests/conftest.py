"""A real Ratchet for the tests: `ratchet start` from this checkout (Node on the PATH), on a free port, with a
fresh data folder, a Gemini webhook secret to sign deliveries with, and an effects receiver in this process."""

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
# `openai` and `anthropic` as stand-ins with the SDKs' shapes (neither can be installed here).
SDK_STANDINS = Path(__file__).resolve().parent / "sdk_standins"
sys.path.insert(0, str(SDK_STANDINS))

TOKEN = "python-client-token-0123456789abcdef"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def signed(secret: str, body: bytes, webhook_id: str, timestamp: int) -> Dict[str, str]:
    key = base64.b64decode(secret[len("whsec_") :])
    mac = base64.b64encode(hmac.new(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()).decode()
    return {"webhook-id": webhook_id, "webhook-timestamp": str(timestamp), "webhook-signature": f"v1,{mac}"}


class Receiver:
    """The app's effects endpoint: keeps every delivery as it came (headers and raw body)."""

    def __init__(self) -> None:
        self.deliveries: List[Dict[str, Any]] = []
        received = self.deliveries

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                received.append({"headers": dict(self.headers.items()), "body": body})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/effects"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Ratchet:
    """`ratchet start` as a user runs it; `restart` keeps its port and data folder (so cursors stay good)."""

    def __init__(self, receiver: Receiver) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = tempfile.mkdtemp(prefix="ratchet-python-")
        self.webhook_secret = new_secret()
        self.effects_secret = new_secret()
        self.receiver = receiver
        self.process: Optional[subprocess.Popen] = None
        self.output = ""
        self.start()

    def start(self) -> None:
        node = shutil.which("node")
        if not node:
            raise RuntimeError("node is not on the PATH: the tests start Ratchet with it")
        env = {
            **os.environ,
            "PORT": str(self.port),
            "DATA_DIR": self.data,
            "RATCHET_API_TOKEN": TOKEN,
            "WEBHOOK_SIGNING_SECRETS": self.webhook_secret,
            "EFFECTS_WEBHOOK_URL": self.receiver.url,
            "EFFECTS_SIGNING_SECRET": self.effects_secret,
            "EFFECTS_RETRY_BASE_MS": "100",
            "EFFECTS_RETRY_MAX_MS": "500",
            "POWERTOOLS_LOG_LEVEL": "WARN",
        }
        for name in ("GEMINI_API_KEY", "GEMINI_API_KEYS", "DATABASE_URL"):
            env.pop(name, None)
        self.process = subprocess.Popen(
            [node, "--import", "tsx", "local/cli/ratchet.ts", "start"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        ready = threading.Event()
        # This process's ready line, not the one before a restart (its first line, a warning, came before it listened).
        began = len(self.output)

        def read(stream: Any) -> None:
            for line in iter(stream.readline, b""):
                self.output += line.decode("utf-8", "replace")
                if re.search(r"Ratchet ready at http://", self.output[began:]):
                    ready.set()

        threading.Thread(target=read, args=(self.process.stdout,), daemon=True).start()
        deadline = time.monotonic() + 60
        while not ready.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ratchet start did not get ready:\n{self.output[-3000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def webhook(self, type_: str, name: str, timestamp: str, webhook_id: Optional[str] = None) -> Dict[str, Any]:
        """One Gemini delivery, signed as Gemini signs it; Ratchet's answer."""
        body = json.dumps({"type": type_, "version": "v1", "timestamp": timestamp, "data": {"id": name}}).encode()
        headers = {"content-type": "application/json", **signed(self.webhook_secret, body, webhook_id or f"msg_{uuid.uuid4()}", int(time.time()))}
        request = urllib.request.Request(f"{self.url}/webhooks/gemini", data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture(scope="session")
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="session")
def ratchet(receiver):
    server = Ratchet(receiver)
    yield server
    server.close()


@pytest.fixture()
def unique():
    """A fresh operation id per test."""
    return lambda prefix="batches": f"{prefix}/py-{uuid.uuid4().hex[:10]}"


def eventually(check, timeout: float = 10.0, what: str = "a condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
