"""A stdio MCP proxy that records every `tools/call` a client makes (see scenarios_walk.rs).

Usage: mcp_call_log.py LOG COMMAND...

Starts COMMAND (an MCP server speaking newline-delimited JSON-RPC on stdio), forwards messages
both ways unchanged, and appends the name of every tool called to LOG, one per line, before the
call reaches the server.
"""

import json
import subprocess
import sys
import threading


def main() -> None:
    log, command = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def to_server() -> None:
        with open(log, "a", encoding="utf-8") as out:
            for line in sys.stdin.buffer:
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                if isinstance(message, dict) and message.get("method") == "tools/call":
                    out.write(str(message.get("params", {}).get("name")) + "\n")
                    out.flush()
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
    for line in server.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()
