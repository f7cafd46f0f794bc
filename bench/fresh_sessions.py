"""A fresh held-out set of real sessions (issue 12, session 9): ``--part fresh9``.

Real Claude Code transcripts and a Codex rollout written by other people in public
GitHub repositories, none of them in ../shared/corpus and none read on the project
before session 9. The transcripts are not part of the project: the bench looks them up
under ``$DUALTRACE_FRESH_CORPUS`` (``<repo>/<path>`` as below) and skips the part when
that is unset or absent. Each source is recorded with the commit read and its licence.

The labels were written by reading each transcript whole, before any encoder ran on
them, and are not changed after the first run (docs/BENCHMARKS.md). The format is that
of real_sessions.py (types + words a memory must hold). Nobody tunes on this part.

What the set is, honestly: the only real, licensed, small transcripts the search found
in the time were scripted runs (claude-reliability's snapshot tests drive Claude Code
with a one-line prompt in a temp dir) and one trimmed Codex rollout. A careful reader
keeps nothing from any of them, so the part measures only what the encoder writes where
nothing should be written (written, useful = 0 of written); it has no captured figure.

Sources:
- github.com/DRMacIver/claude-reliability (MIT, per its README and Cargo.toml), commit
  228d653b8d2aba8251eb3f3d4c222a2f652d7c60, ``snapshot-tests/tests/<name>/transcript.jsonl``
  (Claude Code 2.1.14, claude-opus-4-5; real request ids). The corpus already holds two
  other runs of this repository (coverage-test-fix, python-to-rust-port); these five were
  not in it. (basic-stop-hook, problem-mode and unpushed-commits there are hand-written
  fixtures with ``user-1`` uuids, so they are left out.)
- github.com/simonw/claude-code-transcripts (Apache-2.0, pyproject ``license``), commit
  871966d66cca5ec1ba4c4372d056d7fd7b30bb12, ``tests/sample_codex_session.jsonl`` (Codex
  CLI 0.77.0, gpt-5.2-codex; trimmed by its author after the first user question).
"""

from __future__ import annotations

CR9 = "claude-reliability/snapshot-tests/tests"
CCT = "claude-code-transcripts/tests"

FRESH9: list[dict] = [
    {"key": "f9-cr-hello-world", "project": "f9-cr", "format": "claude-code",
     "path": f"{CR9}/hello-world-script/transcript.jsonl", "held_out": True,
     "expect": []},  # "write hello.sh that prints Hello world and run it"; a Stop-hook check
    {"key": "f9-cr-readme", "project": "f9-cr", "format": "claude-code",
     "path": f"{CR9}/stop-hook-fast-path-clean/transcript.jsonl", "held_out": True,
     "expect": []},  # "read README.md and tell me what it says": '# Test Project'
    {"key": "f9-cr-commit-edit", "project": "f9-cr", "format": "claude-code",
     "path": f"{CR9}/stop-hook-reflection-first-stop/transcript.jsonl", "held_out": True,
     "expect": []},  # change test.txt to "modified content", git init, commit 93bff95
    {"key": "f9-cr-stop-now", "project": "f9-cr", "format": "claude-code",
     "path": f"{CR9}/stop-hook-reflection-second-stop/transcript.jsonl", "held_out": True,
     "expect": []},  # "I've reviewed my work and it's complete. Stop now."
    {"key": "f9-cr-docstring", "project": "f9-cr", "format": "claude-code",
     "path": f"{CR9}/stop-hook-uncommitted-changes/transcript.jsonl", "held_out": True,
     "expect": []},  # add a docstring to src/main.py (uncommitted)
    {"key": "f9-cct-codex-homelab", "project": "f9-cct", "format": "codex",
     "path": f"{CCT}/sample_codex_session.jsonl", "held_out": True,
     "expect": []},  # AGENTS.md skills block (host-injected) and one question, no answer kept
]

# ---- session 13: FRESH11 (`--part fresh11`) -----------------------------------------------
# github.com/handgemacht-ai/claude-code-log (MIT), ``test/test_data/real_projects/``: real
# Claude Code 2.1.42 sessions its author kept as test data (real uuids, French `ls` dates,
# /exit at the end; stored commits read: 15bec058 for 03eb5929, cffbcdb2 for a95fea4a,
# cd5009ef for ef958aa1); none is in ../shared/corpus (whose claude-code-log folder is another
# project of the same tool). Labels written by reading each transcript whole, before any
# encoder ran on them (the same rules as FRESH9: not changed after the first run).
CCL11 = "claude-code-log/test/test_data/real_projects"

FRESH11: list[dict] = [
    {"key": "f11-ideas-docs", "project": "f11-ideas", "format": "claude-code",
     "path": f"{CCL11}/-experiments-ideas/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl",
     "held_out": True, "expect": [
         # The folder holds one idea, work-and-dev-docs.md: dev-docs/ = technical reference,
         # work/ = work items (archive/, backlog/, future/); the user tried it in clmail. The
         # rest is pros / cons / a balanced opinion asked twice (a rewind): the user's own
         # view flips, so no preference is kept, only what the idea is.
         {"what": "the dev-docs/ vs work/ convention for the Markdown a session writes",
          "types": ["convention", "decision", "project", "learning"], "words": ["dev-docs", "work"]},
     ]},
    {"key": "f11-ideas-snapshots", "project": "f11-ideas", "format": "claude-code",
     "path": f"{CCL11}/-experiments-ideas/a95fea4a-b88a-4e49-ac07-4cc323d8700c.jsonl",
     "held_out": True, "expect": []},  # four file-history-snapshot lines, no message
    {"key": "f11-worktrees-teammates", "project": "f11-worktrees", "format": "claude-code",
     "path": f"{CCL11}/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
     "held_out": True, "expect": [
         # Three named teammates (Agent, isolation: "worktree") research plan mode, teammates
         # and Beads on their own branches, octopus-merged into master twice. What a reader
         # keeps: the user's rule for the channel, and what the agent found when round 2 hung.
         {"what": "use the builtin subagent teams, not ClMail, for teammate communication",
          "types": ["convention", "decision", "preference"], "words": ["clmail"]},
         {"what": "SendMessage does not resurrect a terminated subagent: respawn fresh agents "
                  "with the worktree path for a second round",
          "types": ["learning", "incident", "decision"], "words": ["sendmessage", "terminated"]},
     ]},
]

# ---- session 13, second find: FRESH13 (`--part fresh13`) -----------------------------------
# github.com/alicoding/claude-parser, ``jsonl-prod-data-for-test/test-data/`` at commit
# 77e073aeae06c6d28361b470ec7157920b196b89: a real Claude Code 1.0.89 session (real msg/toolu/req
# ids) its author kept as "prod data for test". Licence: MIT as the README states it (badge and a
# "MIT License - see LICENSE" section); the stored index holds no LICENSE file, so the evidence is
# the README only. Labelled by reading it whole, before any encoder ran on it.
CP13 = "alicoding__claude-parser/jsonl-prod-data-for-test/test-data"

FRESH13: list[dict] = [
    {"key": "f13-parser-moved-away", "project": "f13-parser", "format": "claude-code",
     "path": f"{CP13}/3a7770b4-aba3-46dd-b677-8fc2d71d4e06.jsonl",
     "held_out": True, "expect": [
         # Asked to move the project into ~/.claude/projects, the agent ran `rm -rf
         # ~/.claude/projects/claude-parser && mv <cwd> ~/.claude/projects/`: the existing copy
         # was deleted, and every later command failed because the Bash tool's working
         # directory (the moved project) no longer existed; the user lost work (git commits,
         # unknown remote), recovery left to testdisk/photorec by hand.
         {"what": "the rm -rf && mv move deleted the claude-parser folder (an incident the user "
                  "reported: 'you just deleted my claude-parser?')",
          "types": ["incident", "pattern", "learning"], "words": ["rm -rf", "claude-parser"]},
         {"what": "once its working directory is moved away the Bash tool is stuck: every command "
                  "fails with 'Path ... does not exist'",
          "types": ["learning", "incident"], "words": ["does not exist", "stuck"]},
     ]},
]
