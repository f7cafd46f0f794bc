"""The launcher of the hooks a turn waits for: ``PYTHON -S fasthook.py SCRIPT hook EVENT ...``.

Run by path with ``-S`` (``dualtrace install`` writes it for SessionStart and
UserPromptSubmit on POSIX): the folder above this file is where ``dualtrace`` is
importable from, a wheel's site-packages or a source checkout alike, so nothing of
site is needed before ``dualtrace.hookcmd.fast_main`` decides (see there).
"""

import os
import sys

if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from dualtrace.hookcmd import fast_main

    sys.exit(fast_main(sys.argv[1:]))
