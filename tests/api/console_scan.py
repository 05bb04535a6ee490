"""The crash scan of tests/e2e/lib.sh for Python test drivers: a guest
console's new bytes since the last scan, matched against
tests/e2e/guest-crash.re (the same patterns, no allow-list)."""
import os
import re

PATTERNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e", "guest-crash.re")


def load_patterns(path=PATTERNS):
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f]
    return re.compile("|".join(f"(?:{p})" for p in lines if p and not p.startswith("#")))


class Console:
    """One console file. scan() returns the crash lines written since the
    previous scan (the first scan starts where the file was when this
    object was made); a last line with no newline yet waits for the next
    scan unless final is set."""

    def __init__(self, path, patterns=None):
        self.path = path
        self.patterns = patterns or load_patterns()
        self.ino, self.off = self._stat()

    def _stat(self):
        try:
            st = os.stat(self.path)
            return st.st_ino, st.st_size
        except FileNotFoundError:
            return None, 0

    def scan(self, final=False):
        ino, size = self._stat()
        if ino is None:
            return []
        if ino != self.ino or size < self.off:
            self.ino, self.off = ino, 0  # a new file by that name, or rewritten
        with open(self.path, "rb") as f:
            f.seek(self.off)
            chunk = f.read(size - self.off)
        if not final and chunk and not chunk.endswith(b"\n"):
            chunk = chunk[:chunk.rfind(b"\n") + 1]
        self.off += len(chunk)
        text = chunk.decode("utf-8", "replace").replace("\r", "")
        return [line for line in text.split("\n") if self.patterns.search(line)]
