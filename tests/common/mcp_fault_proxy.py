"""A stdio MCP proxy that breaks a real server on purpose (see faults.rs, `mcp_fault_command`).

Usage: mcp_fault_proxy.py MODE AFTER MARKER COMMAND...

Starts COMMAND (an MCP server speaking newline-delimited JSON-RPC on stdio) and forwards
messages both ways. Once the server has sent AFTER messages, the next one triggers MODE:
  kill     SIGKILL the server and exit (the client sees its connection close); a client that
           restarts the command gets a working server
  crash    the same, but every later start exits at once (a server that stays down)
  stall    forward nothing more from the server (requests still reach it; answers never return)
  corrupt  send a line that is not JSON-RPC in place of that message, then carry on
  log      break nothing: append the name of every tool the client calls to MARKER, one per
           line, before the call reaches the server (AFTER is ignored)
MARKER is a file created when the fault fires (`crash` checks it at start); `-` for none.
"""

import json
import os
import subprocess
import sys
import threading


def main() -> None:
    mode, after, marker, command = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    if mode == "crash" and os.path.exists(marker):
        sys.exit(1)
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def to_server() -> None:
        for line in sys.stdin.buffer:
            if mode == "log":
                record_call(line, marker)
            try:
                server.stdin.write(line)
                server.stdin.flush()
            except (BrokenPipeError, ValueError):
                return
        try:
            server.stdin.close()
        except BrokenPipeError:
            pass

    threading.Thread(target=to_server, daemon=True).start()
    sent = 0
    out = sys.stdout.buffer
    for line in server.stdout:
        if mode != "log" and sent >= after:
            if sent == after and marker != "-":
                open(marker, "w").close()
            if mode in ("kill", "crash"):
                server.kill()
                server.wait()
                out.close()
                return
            if mode == "stall":
                continue
            if mode == "corrupt" and sent == after:
                line = b"this line is not JSON-RPC {\n"
        out.write(line)
        out.flush()
        sent += 1
    server.wait()


def record_call(line: bytes, log: str) -> None:
    """Appends the tool name of a `tools/call` request to `log`."""
    try:
        message = json.loads(line)
    except ValueError:
        return
    if isinstance(message, dict) and message.get("method") == "tools/call":
        with open(log, "a", encoding="utf-8") as out:
            out.write(str(message.get("params", {}).get("name")) + "\n")


if __name__ == "__main__":
    main()
