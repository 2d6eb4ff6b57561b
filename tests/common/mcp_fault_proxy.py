"""A stdio MCP proxy that breaks a real server on purpose (see faults.rs, `mcp_fault_command`).

Usage: mcp_fault_proxy.py MODE AFTER COMMAND...

Starts COMMAND (an MCP server speaking newline-delimited JSON-RPC on stdio) and forwards
messages both ways. Once the server has sent AFTER messages, the next one triggers MODE:
  kill     SIGKILL the server and exit (the client sees its connection close)
  stall    forward nothing more from the server (requests still reach it; answers never return)
  corrupt  send a line that is not JSON-RPC in place of that message, then carry on
"""

import subprocess
import sys
import threading


def main() -> None:
    mode, after, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def to_server() -> None:
        for line in sys.stdin.buffer:
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
        if sent >= after:
            if mode == "kill":
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


if __name__ == "__main__":
    main()
