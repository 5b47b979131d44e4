"""Running commands: a failed command raises with everything it said."""

import subprocess
from collections.abc import Sequence

from .errors import DcblabError

__all__ = ["CmdError", "run"]


class CmdError(DcblabError):
    """A command exited non-zero (or could not run at all)."""

    def __init__(self, argv: Sequence[str], rc: int | None, stdout: str = "",
                 stderr: str = "", where: str = "host") -> None:
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.where = where
        super().__init__(self._message())

    def _message(self):
        lines = [f"{self.where}: {self.argv!r} exited {self.rc}"]
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            text = (text or "").rstrip()
            if text:
                lines.append(f"--- {name} ---")
                lines.append(text[-4000:])
        return "\n".join(lines)


def run(argv, *, check=True, timeout=60, cwd=None, env=None, input=None):
    """Run argv on the host; return CompletedProcess, raise CmdError if rc != 0."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env=env, input=input)
    except FileNotFoundError as e:
        raise CmdError(argv, 127, "", str(e)) from None
    except subprocess.TimeoutExpired as e:
        raise CmdError(argv, -1, e.stdout or "",
                       f"timed out after {timeout}s") from None
    if check and proc.returncode != 0:
        raise CmdError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc
