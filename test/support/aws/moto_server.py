"""moto's server as `moto_server` runs it, with one difference: DynamoDB
requests are served one at a time.

moto's DynamoDB backend checks a ConditionExpression and applies the write
without a lock, so two concurrent conditional writes on one item can both
pass (seen here: 16 racing ingesters, two writes of the same version). DynamoDB
makes each conditional write atomic per item; a lock around moto's DynamoDB
requests restores that. Other services (SQS long polls) keep moto's threads.
Pinned by test/integration/ingest-race.test.ts, which fails without the lock.

And one addition: POST /ratchet/secretsmanager-clock?offset=SECONDS shifts the
clock Secrets Manager dates new secret versions by (moto's server has no time
control of its own). `npm run connect` reads a version's CreatedDate to end
the 24 h rotation grace; test/e2e/connect.test.ts stores a version "25 h ago"
this way, on a moto of its own.

usage: python3 moto_server.py HOST PORT
"""
import os
import sys
import threading
import time
import types

host, port = sys.argv[1], int(sys.argv[2])
os.environ.setdefault("MOTO_PORT", str(port))  # moto builds queue URLs with it

from moto.server import DomainDispatcherApplication, create_backend_app  # noqa: E402
from werkzeug.serving import run_simple  # noqa: E402

app = DomainDispatcherApplication(create_backend_app)
dynamodb = threading.Lock()


def set_secretsmanager_clock(environ, start_response):
    from urllib.parse import parse_qs

    import moto.secretsmanager.models as secrets

    offset = float(parse_qs(environ.get("QUERY_STRING", "")).get("offset", ["0"])[0])
    secrets.time = types.SimpleNamespace(time=lambda: time.time() + offset)
    start_response("204 No Content", [])
    return []


def serve(environ, start_response):
    if environ.get("PATH_INFO") == "/ratchet/secretsmanager-clock" and environ.get("REQUEST_METHOD") == "POST":
        return set_secretsmanager_clock(environ, start_response)
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        with dynamodb:
            return list(app(environ, start_response))
    return app(environ, start_response)


run_simple(host, port, serve, threaded=True)
