"""A small schema registry speaking the part of Confluent Schema Registry's REST API that
Avro serializers use, for the tests: no real registry can be installed here (Confluent's
is a Java download outside the package registries this machine reaches; Karapace is not
on PyPI). Schemas live in memory; ids are global and a schema registered twice (under any
subject) keeps its id, as Confluent's registry does.

    python3 schema_registry.py [--user-info user:password]

prints `listening on PORT` once it serves on 127.0.0.1.
"""

import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class Store:
    def __init__(self):
        self.lock = threading.Lock()
        self.ids = {}  # canonical schema text -> id
        self.schemas = {}  # id -> schema text
        self.subjects = {}  # subject -> [id, ...] (versions, from 1)

    @staticmethod
    def canonical(schema):
        try:
            return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
        except ValueError:
            return None

    def register(self, subject, schema):
        key = self.canonical(schema)
        if key is None:
            return None
        with self.lock:
            schema_id = self.ids.get(key)
            if schema_id is None:
                schema_id = len(self.schemas) + 1
                self.ids[key] = schema_id
                self.schemas[schema_id] = schema
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id, versions.index(schema_id) + 1

    def lookup(self, subject, schema):
        key = self.canonical(schema)
        with self.lock:
            schema_id = self.ids.get(key)
            versions = self.subjects.get(subject, [])
            if schema_id is None or schema_id not in versions:
                return None
            return schema_id, versions.index(schema_id) + 1


STORE = Store()
USER_INFO = None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", MEDIA_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def not_found(self, code, message):
        self.answer(404, {"error_code": code, "message": message})

    def authorized(self):
        if USER_INFO is None:
            return True
        expected = "Basic " + base64.b64encode(USER_INFO.encode()).decode()
        if self.headers.get("Authorization") == expected:
            return True
        self.answer(401, {"error_code": 401, "message": "Unauthorized"})
        return False

    def parts(self):
        path = urlparse(self.path).path
        return [unquote(p) for p in path.strip("/").split("/") if p]

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return {}

    def do_GET(self):
        if not self.authorized():
            return
        parts = self.parts()
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
            schema = STORE.schemas.get(int(parts[2]))
            if schema is None:
                return self.not_found(40403, "Schema not found")
            return self.answer(200, {"schema": schema})
        if parts == ["subjects"]:
            return self.answer(200, sorted(STORE.subjects))
        if len(parts) == 4 and parts[0] == "subjects" and parts[2] == "versions":
            versions = STORE.subjects.get(parts[1])
            if not versions:
                return self.not_found(40401, "Subject not found")
            version = len(versions) if parts[3] == "latest" else int(parts[3])
            schema_id = versions[version - 1]
            return self.answer(200, {"subject": parts[1], "version": version,
                                     "id": schema_id, "schema": STORE.schemas[schema_id]})
        if parts == ["config"]:
            return self.answer(200, {"compatibilityLevel": "BACKWARD"})
        return self.not_found(404, "Not found")

    def do_POST(self):
        if not self.authorized():
            return
        parts = self.parts()
        body = self.body()
        schema = body.get("schema")
        if body.get("schemaType", "AVRO") != "AVRO" or not isinstance(schema, str):
            return self.answer(422, {"error_code": 42201, "message": "Invalid schema"})
        if len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
            registered = STORE.register(parts[1], schema)
            if registered is None:
                return self.answer(422, {"error_code": 42201, "message": "Invalid schema"})
            return self.answer(200, {"id": registered[0]})
        if len(parts) == 2 and parts[0] == "subjects":
            found = STORE.lookup(parts[1], schema)
            if found is None:
                return self.not_found(40403, "Schema not found")
            return self.answer(200, {"subject": parts[1], "id": found[0],
                                     "version": found[1], "schema": schema})
        return self.not_found(404, "Not found")


def main():
    global USER_INFO
    if "--user-info" in sys.argv:
        USER_INFO = sys.argv[sys.argv.index("--user-info") + 1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
