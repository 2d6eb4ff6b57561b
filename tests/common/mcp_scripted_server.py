"""A tiny stdio MCP server that misbehaves in one scripted way (see faults.rs, `scripted_mcp_command`).

Usage: mcp_scripted_server.py MODE PIDFILE [BYTES]

Speaks newline-delimited JSON-RPC on stdin/stdout with one tool, `fetch_all`. Writes its own PID
and the PID of a child it starts (`sleep`, standing for the real server an `npx` wrapper starts)
to PIDFILE, one per line, so a test can check that neither outlives the client. MODE:
  hang-initialize  never answers `initialize`
  hang-tools-list  answers `initialize`, never answers `tools/list`
  escapes          terminal escape sequences in its name, the tool's name and its description
  escapes-error    answers `tools/list` with a JSON-RPC error whose message holds escapes
  big-result       `fetch_all` returns a text of BYTES bytes (one JSON-RPC line over the limit)
"""

import json
import os
import subprocess
import sys

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"


def main() -> None:
    mode, pidfile = sys.argv[1], sys.argv[2]
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    helper = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()}\n{helper.pid}\n")

    escapes = mode.startswith("escapes")
    server_name = f"scripted{CLEAR}" if escapes else "scripted"
    tool = {
        "name": f"fetch_all{CLEAR}" if escapes else "fetch_all",
        "description": f"{TITLE}Fetches everything." if escapes else "Fetches everything.",
        "inputSchema": {"type": "object", "properties": {}},
    }

    def send(message: dict) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, id_ = msg.get("method"), msg.get("id")
        if id_ is None:
            continue  # a notification
        if method == "initialize":
            if mode == "hang-initialize":
                continue
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": server_name, "version": "1"},
            }
        elif method == "tools/list":
            if mode == "hang-tools-list":
                continue
            if mode == "escapes-error":
                send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32000, "message": f"listing failed{CLEAR}{TITLE}"}})
                continue
            result = {"tools": [tool]}
        elif method == "tools/call":
            text = "x" * size if mode == "big-result" else "done"
            result = {"content": [{"type": "text", "text": text}]}
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": id_, "result": result})


if __name__ == "__main__":
    main()
