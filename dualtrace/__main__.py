"""``python -m dualtrace ...``: the same entry as the console script (git's merge
driver is registered this way, with the interpreter's absolute path)."""

from dualtrace.hookcmd import entry

entry()
