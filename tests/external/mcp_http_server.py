#!/usr/bin/env python3
"""A small MCP server over streamable HTTP for agentd's wire tests; the standard library only.

Usage: mcp_http_server.py --log PATH [--sse]

It listens on 127.0.0.1 on a port the system picks and prints that port on stdout, one line,
once it accepts connections. Every HTTP request it receives is appended to PATH as one JSON
line before it is answered — {"method", "path", "session", "protocol_version", "x_test",
"body"} — so a test can count exactly what reached it.

POST /mcp takes one JSON-RPC message:
  a notification or an answer   202, no body;
  initialize                    its result, with the header Mcp-Session-Id: sess-1;
  any other request             400 unless it carries that session id and Accept names both
                                application/json and text/event-stream;
  tools/list                    one tool, write_note {text};
  tools/call write_note         keeps the note and answers "noted: TEXT (note N)".
Requests are answered with an application/json body, or with --sse as a text/event-stream
that sends a notifications/message event before the answer. Anything else is 404 or 405.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SESSION = "sess-1"

TOOLS = [
    {
        "name": "write_note",
        "description": "Keep a note on the server.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What the note says."}},
            "required": ["text"],
        },
    }
]


class State:
    def __init__(self, log_path, sse):
        self.log_path = log_path
        self.sse = sse
        self.notes = []
        self.lock = threading.Lock()

    def record(self, entry):
        with self.lock, open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")


def text_result(text, is_error=False):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class Handler(BaseHTTPRequestHandler):
    state = None

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def record(self, body):
        self.state.record(
            {
                "method": self.command,
                "path": self.path,
                "session": self.headers.get("Mcp-Session-Id"),
                "protocol_version": self.headers.get("MCP-Protocol-Version"),
                "x_test": self.headers.get("X-Test"),
                "body": body,
            }
        )

    def answer(self, status, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - the base class's name
        self.record(None)
        self.answer(405)

    def do_POST(self):  # noqa: N802 - the base class's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        self.record(message)
        if self.path != "/mcp":
            self.answer(404)
            return
        if not isinstance(message, dict):
            self.answer(400, {"jsonrpc": "2.0", "error": {"code": -32700, "message": "parse"}})
            return
        ident, method = message.get("id"), message.get("method")
        if ident is None or method is None:
            self.answer(202)
            return
        accept = self.headers.get("Accept") or ""
        if "application/json" not in accept or "text/event-stream" not in accept:
            self.answer(406, {"jsonrpc": "2.0", "id": ident,
                              "error": {"code": -32600, "message": "accept both types"}})
            return
        headers = []
        if method == "initialize":
            params = message.get("params") or {}
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "web", "version": "1"},
            }
            headers.append(("Mcp-Session-Id", SESSION))
        elif self.headers.get("Mcp-Session-Id") != SESSION:
            self.answer(400, {"jsonrpc": "2.0", "id": ident,
                              "error": {"code": -32600, "message": "no session"}})
            return
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            params = message.get("params") or {}
            text = (params.get("arguments") or {}).get("text")
            if params.get("name") != "write_note" or not isinstance(text, str):
                result = text_result("write_note needs a text", True)
            else:
                with self.state.lock:
                    self.state.notes.append(text)
                    count = len(self.state.notes)
                result = text_result(f"noted: {text} (note {count})")
        else:
            self.answer(200, {"jsonrpc": "2.0", "id": ident,
                              "error": {"code": -32601, "message": "method not found"}})
            return
        response = {"jsonrpc": "2.0", "id": ident, "result": result}
        if not self.state.sse:
            self.answer(200, response, headers)
            return
        # An event stream, ended by closing the connection (HTTP/1.0).
        self.send_response(200)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        note = {"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "working"}}
        for event in (note, response):
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode("utf-8"))
            self.wfile.flush()


def main():
    args = sys.argv[1:]
    if "--log" not in args or args.index("--log") + 1 >= len(args):
        sys.stderr.write(__doc__)
        sys.exit(2)
    Handler.state = State(args[args.index("--log") + 1], "--sse" in args)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
