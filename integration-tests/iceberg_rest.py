"""A small Iceberg REST catalog for the tests: the REST protocol's configuration, namespace,
table load, create and commit endpoints over pyiceberg's SQL catalog (SQLite), which
checks a commit's requirements and applies its updates as any catalog must.

No REST catalog server can be installed here (Polaris, Lakekeeper, Nessie and Tabular's
reference server are JVM or container downloads); pyiceberg ships the protocol's models and
a catalog that commits, so this serves them.

    python3 iceberg_rest.py DIRECTORY [--token TOKEN] [--lose-every N]
        [--credential ID:SECRET [--expire-after N]]

prints `listening on PORT` once it listens. With `--token`, every request must carry it as
a bearer token. With `--credential`, `/v1/oauth/tokens` exchanges those client
credentials for tokens (OAuth2's client-credentials grant), each good for `--expire-after`
requests (then answered 401, as an expired token is; the count of tokens issued is kept
in DIRECTORY/tokens-issued). With `--lose-every N`, every Nth
commit is applied but answered with a 503, as when a server's answer is lost: the writer
cannot know whether it committed.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (CommitFailedException, NamespaceAlreadyExistsError,
                                  NoSuchTableError, TableAlreadyExistsError)
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest

PREFIX = "main"
LOCK = threading.Lock()
CATALOG = None
TOKEN = None
LOSE_EVERY = 0
COMMITS = 0
CREDENTIAL = None
EXPIRE_AFTER = 0
ISSUED = {}  # token -> requests it may still make
DIRECTORY = None


def loaded(table):
    return {"metadata-location": table.metadata_location,
            "metadata": json.loads(table.metadata.model_dump_json()), "config": {}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, kind, message):
        self.answer(status, {"error": {"message": message, "type": kind, "code": status}})

    def authorized(self):
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if CREDENTIAL is not None:
            with LOCK:
                left = ISSUED.get(given, 0)
                if left > 0:
                    ISSUED[given] = left - 1
                return left > 0
        return TOKEN is None or given == TOKEN

    def route(self):
        """The path's parts after /v1/{prefix}, or None when not authorized or not ours."""
        if not self.authorized():
            self.error(401, "NotAuthorizedException", "a bearer token is required")
            return None
        parts = [unquote(p) for p in urlparse(self.path).path.strip("/").split("/")]
        if parts[:2] == ["v1", "config"]:
            return ["config"]
        if parts[:2] != ["v1", PREFIX]:
            self.error(404, "NoSuchResourceException", f"no route {self.path}")
            return None
        return parts[2:]

    def body(self):
        length = int(self.headers.get("Content-Length", 0))
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self):
        parts = self.route()
        if parts is None:
            return
        if parts == ["config"]:
            return self.answer(200, {"defaults": {}, "overrides": {"prefix": PREFIX}})
        if len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "tables":
            namespace = tuple(parts[1].split("\x1f"))
            try:
                with LOCK:
                    table = CATALOG.load_table(namespace + (parts[3],))
                return self.answer(200, loaded(table))
            except NoSuchTableError as e:
                return self.error(404, "NoSuchTableException", str(e))
        self.error(404, "NoSuchResourceException", f"no route {self.path}")

    def do_POST(self):
        try:
            self.post()
        except Exception as e:  # an answer, not a dropped connection
            self.error(500, "ServerError", repr(e))

    def exchange(self):
        length = int(self.headers.get("Content-Length", 0))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        given = f"{form.get('client_id')}:{form.get('client_secret')}"
        if form.get("grant_type") != "client_credentials" or given != CREDENTIAL:
            return self.answer(401, {"error": "invalid_client",
                                     "error_description": "unknown client credentials"})
        with LOCK:
            token = f"token-{len(ISSUED)}"
            ISSUED[token] = EXPIRE_AFTER or 1 << 30
            with open(f"{DIRECTORY}/tokens-issued", "w") as count:
                count.write(str(len(ISSUED)))
        self.answer(200, {"access_token": token, "token_type": "bearer",
                          "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})

    def post(self):
        global COMMITS
        if urlparse(self.path).path == "/v1/oauth/tokens":
            return self.exchange()
        parts = self.route()
        if parts is None:
            return
        body = self.body()
        with LOCK:
            if parts == ["namespaces"]:
                try:
                    CATALOG.create_namespace(tuple(body["namespace"]))
                    return self.answer(200, {"namespace": body["namespace"], "properties": {}})
                except NamespaceAlreadyExistsError as e:
                    return self.error(409, "AlreadyExistsException", str(e))
            if len(parts) == 3 and parts[0] == "namespaces" and parts[2] == "tables":
                namespace = tuple(parts[1].split("\x1f"))
                try:
                    table = CATALOG.create_table(namespace + (body["name"],),
                                                 schema=Schema.model_validate(body["schema"]),
                                                 properties=body.get("properties", {}))
                    return self.answer(200, loaded(table))
                except TableAlreadyExistsError as e:
                    return self.error(409, "AlreadyExistsException", str(e))
            if len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "tables":
                namespace = tuple(parts[1].split("\x1f"))
                request = CommitTableRequest.model_validate(body)
                try:
                    table = CATALOG.load_table(namespace + (parts[3],))
                    response = CATALOG.commit_table(table, tuple(request.requirements),
                                                    tuple(request.updates))
                except NoSuchTableError as e:
                    return self.error(404, "NoSuchTableException", str(e))
                except CommitFailedException as e:
                    return self.error(409, "CommitFailedException", str(e))
                COMMITS += 1
                if LOSE_EVERY and COMMITS % LOSE_EVERY == 0:
                    return self.error(503, "ServiceUnavailableException", "answer lost")
                return self.answer(200, json.loads(response.model_dump_json()))
        self.error(404, "NoSuchResourceException", f"no route {self.path}")


def main():
    global CATALOG, TOKEN, LOSE_EVERY, CREDENTIAL, EXPIRE_AFTER, DIRECTORY
    directory = DIRECTORY = sys.argv[1]
    if "--credential" in sys.argv:
        CREDENTIAL = sys.argv[sys.argv.index("--credential") + 1]
    if "--expire-after" in sys.argv:
        EXPIRE_AFTER = int(sys.argv[sys.argv.index("--expire-after") + 1])
    if "--token" in sys.argv:
        TOKEN = sys.argv[sys.argv.index("--token") + 1]
    if "--lose-every" in sys.argv:
        LOSE_EVERY = int(sys.argv[sys.argv.index("--lose-every") + 1])
    CATALOG = SqlCatalog("rest", uri=f"sqlite:///{directory}/catalog.db",
                         warehouse=f"file://{directory}/warehouse")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
