#!/usr/bin/env python3
"""A small MCP server on stdio for agentd's wire tests; the standard library only.

Tools:
  write_note {path, text}  writes text to path (relative to the current directory) and says
                           so; a write the system refuses is a result with isError.
  echo {text}              answers text, after $MCP_ECHO_PREFIX when that is set.
  fetch {url}              answers the body at url, through the proxy the environment names;
                           a failure is a result with isError.
  tiny_image {}            answers a line of text, a 1x1 PNG image and a link to a file.

With --exit-at-start it says so on stderr and exits with code 3 before reading anything.
"""

import json
import os
import sys

TOOLS = [
    {
        "name": "write_note",
        "description": "Write a note to a file relative to the server's directory.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where, relative."},
                "text": {"type": "string", "description": "What the note says."},
            },
            "required": ["path", "text"],
        },
    },
    {
        "name": "echo",
        "description": "Answer the text given.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "fetch",
        "description": "Answer the body at a URL.",
        "inputSchema": {
            "type": "object",
            "properties": {"url": {"type": "string"}},
            "required": ["url"],
        },
    },
    {
        "name": "tiny_image",
        "description": "Answer a tiny image.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]

# A 1x1 transparent PNG.
TINY_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def text_result(text, is_error=False):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def call(name, arguments):
    if name == "write_note":
        path, text = arguments.get("path"), arguments.get("text")
        if not isinstance(path, str) or not isinstance(text, str):
            return text_result("write_note needs a path and a text", True)
        try:
            with open(path, "w", encoding="utf-8") as note:
                note.write(text)
        except OSError as e:
            return text_result(f"could not write {path}: {e.strerror}", True)
        return text_result(f"wrote {len(text)} characters to {path}")
    if name == "echo":
        text = arguments.get("text")
        if not isinstance(text, str):
            return text_result("echo needs a text", True)
        return text_result(os.environ.get("MCP_ECHO_PREFIX", "") + text)
    if name == "tiny_image":
        return {
            "content": [
                {"type": "text", "text": "a tiny image:"},
                {"type": "image", "data": TINY_PNG, "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///srv/tiny.png", "name": "tiny.png"},
            ],
            "isError": False,
        }
    if name == "fetch":
        import urllib.request

        url = arguments.get("url")
        if not isinstance(url, str):
            return text_result("fetch needs a url", True)
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return text_result(answer.read().decode("utf-8", "replace"))
        except Exception as e:  # noqa: BLE001 - every failure is the tool's answer
            return text_result(f"could not fetch {url}: {e}", True)
    return None


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    if "--exit-at-start" in sys.argv[1:]:
        sys.stderr.write("mcp_server.py: told to exit at start\n")
        sys.exit(3)
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "notes", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            result = call(params.get("name"), params.get("arguments") or {})
            if result is None:
                send({"jsonrpc": "2.0", "id": ident,
                      "error": {"code": -32602, "message": "unknown tool"}})
                continue
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": ident,
                  "error": {"code": -32601, "message": "method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
