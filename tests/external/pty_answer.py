"""Runs a command with its stdin and stderr on a pseudo-terminal, as a person at a terminal
would, and answers each "(y/N)" question it asks there with a fixed answer.

    python3 pty_answer.py TRANSCRIPT ANSWER -- COMMAND [ARG...]

The command's stdout is this process's stdout. Everything the command wrote to the terminal is
saved in TRANSCRIPT when it exits; the exit status is the command's (128+N for signal N).
"""

import os
import pty
import subprocess
import sys

QUESTION = b"(y/N)"


def main() -> int:
    transcript_path, answer = sys.argv[1], sys.argv[2]
    if sys.argv[3] != "--":
        print("usage: pty_answer.py TRANSCRIPT ANSWER -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    command = sys.argv[4:]
    master, slave = pty.openpty()
    child = subprocess.Popen(command, stdin=slave, stderr=slave, close_fds=True)
    os.close(slave)
    seen = b""
    answered = 0
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            # EIO: every holder of the terminal's other side has closed it.
            break
        if not chunk:
            break
        seen += chunk
        # One answer per question, each after the question is on the screen.
        while seen.count(QUESTION) > answered:
            os.write(master, answer.encode() + b"\n")
            answered += 1
    status = child.wait()
    os.close(master)
    with open(transcript_path, "wb") as out:
        out.write(seen)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
