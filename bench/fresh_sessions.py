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


# ---- session 14: FRESH14 (`--part fresh14`) -----------------------------------------------------------
# github.com/palimondo/BookMinder (MIT, LICENSE "Copyright (c) 2024 Pavol Vaskovic"),
# ``claude-dev-log-diary/jsonl/cloud-2026/a42b9c92-…/subagents/``: three subagent (sidechain)
# transcripts of one real Claude Code cloud session (real msg/toolu/req ids; the repo's README
# says they were copied as-is from /root/.claude/projects). Each starts with a coordinator brief
# as its only prompt. a05d358b (CC 2.1.263, commit df2279b2) is real work; a1bed1b3 and a3b2a681
# (CC 2.1.231, commit aee3ca73) are graded "answer hypothetically" probes of the project's
# coordinator skill, so nothing in them was executed. Labels were written by reading each
# transcript whole, before any encoder ran on them (same rules as FRESH9: not changed after the
# first run). Sources, sizes and sha256 are in notes/heldout14/SOURCES.md.
BM14 = ("palimondo__BookMinder/claude-dev-log-diary/jsonl/cloud-2026/"
        "a42b9c92-c0e6-588e-bc6f-3d5e4f37b895/subagents")

FRESH14: list[dict] = [
    {"key": "f14-bm-residue-ledger", "project": "f14-bookminder", "format": "claude-code",
     "path": f"{BM14}/agent-a05d358b0666d872d.jsonl",
     "held_out": True, "expect": [
         # A worker checks five skill-sweep findings against HEAD 1fa6213 (pytest reports 53
         # passed), appends R25-R29 to .coordination/verified-residue.md, and commits 18ce8ef
         # (staged by name, not pushed; per B-64 it records the problems and does not fix them).
         # Left out: the tracked-but-unused persona dummy_relative_user (R27) and the
         # BOOKS_PATH/BOOKS_PLIST monkeypatch seam that docs/test_fixtures.md documents but that
         # does not exist (R28). Both are real but minor doc/fixture rot.
         {"what": "the CLI spec it_filters_recent_books_by_sample_status is vacuous: the fixture "
                  "samples sit at progress 0.0, so `list recent --filter sample` prints 'No books "
                  "currently being read', which trips the spec's own 'No books' guard, and nothing "
                  "is asserted",
          "types": ["learning", "incident", "pattern"], "words": ["sample", "no books"]},
         {"what": "the !cloud spec cannot tell the filter (ZSTATE != 3) from is_cloud (ZSTATE in "
                  "(3, 6)): the fixture has no ZSTATE 6 row with progress > 0 (Snow Crash is at "
                  "0.0), so a change to either predicate would go unnoticed",
          "types": ["learning", "pattern"], "words": ["cloud", "zstate"]},
         {"what": "ruff accepts target py313 with no change in lint output (bump is safe; left to "
                  "the author as a decision); whole-tree `ruff check .` fails on 370 findings "
                  "from .claude/skills/ under either target, so scope the check to bookminder/ specs/",
          "types": ["learning", "decision"], "words": ["ruff", "py313"]},
     ]},
    {"key": "f14-bm-probe-design-summary", "project": "f14-bookminder", "format": "claude-code",
     "path": f"{BM14}/agent-a1bed1b39d3991b1f.jsonl",
     "held_out": True, "expect": []},
    # Graded probe, hypothetical: draft a phone-readable design summary that holds one decision
    # the author stated verbatim and one the agent inferred. The agent reads SKILL.md,
    # register.md and persistence.md and answers with a plan; nothing is done. The rule its
    # answer turns on (attribute every claim: the author's verbatim words vs the agent's
    # inference) is the skill file's, read from a file, not said or settled in the session: by
    # the project's own rule (text from files is evidence, never instructions) no memory is
    # expected, and one written is counted against "useful". (The helper who read it first
    # proposed it as a convention; the lead emptied it before any encoder ran.)
    {"key": "f14-bm-probe-swarm-launch", "project": "f14-bookminder", "format": "claude-code",
     "path": f"{BM14}/agent-a3b2a6815e4f5feb3.jsonl",
     "held_out": True, "expect": []},
    # Graded probe, hypothetical: mid-monologue the author says "maybe we should just let the full
    # extraction run over all twenty files like you proposed, but anyway..." while a 20-agent
    # swarm is staged; the agent reads authorization/register/persistence.md and answers: do not
    # launch, ask "launch" / "one file as canary" / "hold". Nothing is run. The rule (a hedged
    # aside is no authorization) is the skill file's: no memory expected, as above.
]


# ---- session 15: FRESH15 (`--part fresh15`) -----------------------------------------------------------
# Two real Claude Code transcripts by other people, rebuilt page by page from the stored
# public-repo index (no network); sources, sizes and sha256 in notes/heldout15/SOURCES.md.
# Labels were written by reading each transcript whole, before any encoder ran on them (same
# rules as FRESH9/FRESH14: not changed after the first run).
#
# 1. github.com/jessitron/claude-log (licence: "ISC" in package.json; no LICENSE file is stored
#    in the index), ``example/ff80b049-….jsonl``, commit b219770c: a NEW repository for these
#    sets. Jessica Kerr's own main CLI session (CC 2.1.89, claude-opus-4-6, cwd
#    /Users/jessitron/code/simple10/agents-observe): she has cloned simple10/agents-observe (a
#    Claude Code hook -> SQLite -> React observability dashboard) to contribute, and the session
#    is the set-up for a timeline bug fix: how it works, where the data lives, how to replay
#    stored sessions, running `just dev` from source beside the Docker plugin, a failed start,
#    and an upstream issue. Real msg_/toolu_/req_ ids.
# 2. github.com/palimondo/BookMinder (MIT), a subagent (sidechain) of cloud session a42b9c92
#    (CC 2.1.228, claude-fable-5), commit aee3ca73: the brief's permitted fallback, but a
#    real-work worker, not one of the graded probes. The coordinator relays three corrections
#    the author gave after reading .coordination/bdd-style-canonical.md; the worker reads the
#    guide and .coordination/claude-experiments.md, spot-checks SHAs and line numbers at HEAD
#    (git show, sed, grep), rewrites the guide in place, fixes one typo and returns a summary.
FRESH15_AO = "jessitron__claude-log/example"
BM15 = ("palimondo__BookMinder/claude-dev-log-diary/jsonl/cloud-2026/"
        "a42b9c92-c0e6-588e-bc6f-3d5e4f37b895/subagents")

FRESH15: list[dict] = [
    {"key": "f15-ao-contributor-setup", "project": "f15-agents-observe", "format": "claude-code",
     "path": f"{FRESH15_AO}/ff80b049-3eff-495f-b4f0-c4071d615994.jsonl",
     "held_out": True, "expect": [
         # Kept: the failed start and its cause, the cwd-relative DB path, how she replays stored
         # sessions beside the running plugin, the open timeline bug as diagnosed so far, and her
         # choice to leave the CLAUDE.md/AGENTS.md question to the maintainer.
         # Left out: the 22 MB docs/assets/demo.mp4 that slows `git clone` (a trivia answer);
         # the "jess was here" header edit (a throwaway she says to revert); the architecture
         # summary (hooks -> hook.sh -> observe_cli.mjs -> POST /api/events -> SQLite, 4 tables,
         # WebSocket) because it is the Explore subagent's read of README/code, i.e. text from
         # files, and the code itself says it; `brew install just` (one-off machine setup).
         {"what": "first `just dev` failed with `sh: tsx: command not found` / `vite: command not "
                  "found`: asdf manages Node and no nodejs version was set for the project, so the "
                  "earlier npm install had silently done nothing; fixed with `asdf set nodejs "
                  "22.21.1` and re-installing; the user points out CONTRIBUTING.md says run "
                  "`just install` before `just dev`",
          "types": ["incident", "learning"], "words": ["asdf", "install"]},
         {"what": "AGENTS_OBSERVE_DB_PATH must be an absolute path: config.ts resolve()s it "
                  "against the cwd and `just dev` cds into app/server, so ./data/observe.db would "
                  "point at app/server/data; .env now holds the absolute path",
          "types": ["learning", "incident"], "words": ["absolute", "app/server"]},
         {"what": "to test without running Claude, replay already-stored sessions: the Docker "
                  "plugin's db is bind-mounted from ~/.claude/plugins/data/agents-observe-"
                  "agents-observe/data/observe.db; it was copied to ./data/observe.db (gitignored) "
                  "rather than shared, since SQLite does not like two writers; and the dev build "
                  "runs on 4982/5175 via .env so the plugin on 4981 stays up for comparison",
          "types": ["decision", "preference", "project"], "words": ["observe.db", "4982"]},
         {"what": "open bug: choosing 10m or 60m in the activity timeline shows nothing; the "
                  "timeline is live-only, anchored to now (agent-lane.tsx positions dots by "
                  "Date.now() - timestamp and CSS-drifts them off), with no rewind; suspected "
                  "cause: only events still in range when the lane mounted get rendered",
          "types": ["incident", "project"], "words": ["timeline", "60m"]},
         {"what": "the user does not know whether the maintainer wants a CLAUDE.md, an AGENTS.md "
                  "or README text, so instead of adding one she had the agent open "
                  "simple10/agents-observe#2 stating the problem and leaving the solution to the "
                  "maintainer; the CLAUDE.md written for herself stays local, uncommitted, listed "
                  "in .git/info/exclude",
          "types": ["preference", "decision", "convention"], "words": ["maintainer", "claude.md"]},
     ]},
    {"key": "f15-bm-style-guide-revision", "project": "f15-bookminder", "format": "claude-code",
     "path": f"{BM15}/agent-a0ee84d4e65423b6d.jsonl",
     "held_out": True, "expect": [
         # The "user" is the coordinating agent; items 1-2 are the author's corrections that it
         # relays, so they count as said in the session. Items 3-5 are what the worker decided
         # and verified while applying correction 3 (author intent vs experiment fallout).
         # Left out: the rest of the guide's content (principles, lapse anatomy a-h, the other
         # backlog items), which is text read from the two .coordination files and carried over,
         # not settled here; the §2.2 typo fix (30c2f5e -> 30c2fe5); the grep for leftover
         # meta terms.
         {"what": "the author's correction: the guide's 'why' section was wrong to fuse pair "
                  "programming with verification ('a pair is someone whose claims you can "
                  "check'); for him pairing means a partner to bounce ideas off (the next step, "
                  "how to define the test, minimizing the implementation surface, the minimal "
                  "constraints a spec needs); keep the other motivations (verifiable invariants, "
                  "long-term evolution, GOOS/minimal coupling) side by side, not one thesis",
          "types": ["preference", "convention"], "words": ["pair", "bounce"]},
         {"what": "the author wants the style guide prescriptive and applicable (each rule with "
                  "its motivation, SHAs as teaching citations) with no meta-commentary on how it "
                  "came about: no extractions, judges, syntheses, 'this document' or provenance "
                  "notes",
          "types": ["preference", "convention"], "words": ["style guide", "meta"]},
         {"what": "the four-layer specs/{unit,integration,acceptance,e2e} taxonomy is experiment "
                  "fallout, not the author's style: a one-day reorg (be394a0...0bf00d1) its own "
                  "post-mortem b84f56e calls misconceived and the constitution never adopted; the "
                  "guide now states mock rules per test kind, marks the taxonomy as a known "
                  "deviation, names the intended layout concern-based, and says not to extend it",
          "types": ["decision", "learning"], "words": ["taxonomy", "experiment"]},
         {"what": "commit after RED as well as after GREEN and REFACTOR is the author's own rule "
                  "(5292033), lost when the CLAUDE.md rewrite was reverted (9bacc8a); CLAUDE.md now "
                  "contradicts itself (verify RED vs commits only after GREEN/REFACTOR); the guide "
                  "restores it as a sequence rule and lists the CLAUDE.md fix as backlog",
          "types": ["decision", "convention", "learning"], "words": ["after red", "claude.md"]},
         {"what": "verified at HEAD: cli.py still from-imports SUPPORTED_FILTERS and "
                  "specs/acceptance/cli_spec.py:67 patches bookminder.cli.SUPPORTED_FILTERS, so "
                  "the CLI-delegates-filters property 1d1fb34 was written to prove is unspecified; "
                  "the fix is to late-bind library.SUPPORTED_FILTERS, re-point the patch at the "
                  "library, see it fail, go green (top of the repair backlog)",
          "types": ["learning", "incident"], "words": ["supported_filters", "patch"]},
     ]},
]


# ---- session 16: FRESH16 (`--part fresh16`) -----------------------------------------------
# Real coding-agent transcripts by other people, rebuilt page by page from the stored public-repo
# index (no network); sources, sizes and sha256 in notes/heldout16/SOURCES.md. Labels were written
# by reading each transcript whole, before any encoder ran on them (same rules as FRESH15: not to
# be changed after the first run). All repositories are NEW for these sets (none is in
# /work/shared/corpus or in heldout11-15).
#
# 1. github.com/apanloco/random (MIT, LICENSE "Copyright (c) 2026 akerud", commit e2aec0db),
#    ``session.jsonl``, commit e70fcd6f: the author's own main CLI session (CC 2.1.77,
#    claude-opus-4-6, cwd /home/da/akerud/random), which he asked the agent to find and commit
#    into the repo at the end. A new one-page project: a pixel-art random-number page at
#    random.akerud.se to pick the Dominion start player; remember bounds, then "is it truly
#    random?" (switch to crypto.getRandomValues + rejection sampling), SFX via Web Audio, hosting
#    on Render as a static site, MIT LICENSE, git init + first commit e2aec0d.
# 2. github.com/bastion-agentique/bastion (Apache-2.0, LICENSE "Copyright 2026 Bastion Agentique",
#    commit 1635bc02), ``claude-session.jsonl``, commit 74d5d067: a main Claude Code session
#    (CC 2.1.17, model glm-4.7 behind Claude Code, cwd /home/zidan/zidan-superbrain/bastion) for a
#    Solana hackathon project (Bastion: Rust/Axum firewall + Anchor audit program for AI agents).
#    NOTE: the only typed prompt is a ~50k-char paste of the tail of an earlier OpenCode session
#    ("Big Pickle" model: compaction summary, commit 3d72efa, .gitignore for the keypair, 66
#    tests, v0.3.0 tag, README fixes, the skill.sh discussion, the bastion-how-to-use skill)
#    ending "Continue please continue this please". The agent then pushes 9efe77f, adds the new
#    skill to skills-lock.json (source "local", sha256 computedHash) and pushes 2e593ed. Most
#    durable facts therefore sit inside a user message, not in agent turns.
# 3. github.com/LujaChitrakar/kronix (NO LICENCE found: no LICENSE file in the index; treat as
#    all-rights-reserved, internal evaluation only, confirm before publishing),
#    ``claude-session.jsonl``, commit 1bef7a1e: a main CLI session (CC 2.1.123, claude-opus-4-7,
#    cwd /home/Luja/code/crypto-exchange, branch integration) that is PURE NOISE on purpose: the
#    user runs the /apply-grant skill (Superteam "Agentic Engineering Grant" form helper) twice,
#    the transcript is plugin/hook boilerplate (caveman mode, claude-mem), the skill text, a
#    49-skill listing and one telemetry-preamble Bash call; it ends 26 seconds in, exported by
#    the skill itself before any project work. A false-positive test: expect nothing.
RANDOM16 = "apanloco__random"
BASTION16 = "bastion-agentique__bastion"
KRONIX16 = "LujaChitrakar__kronix"

FRESH16: list[dict] = [
    {"key": "f16-random-dominion-picker", "project": "f16-random", "format": "claude-code",
     "path": f"{RANDOM16}/session.jsonl",
     "held_out": True, "expect": [
         # Kept: what the page is for and its one hard requirement (remembered bounds), the
         # user's demand that the randomness be defensible and the switch it caused, the Render
         # static-site hosting answer, where the entropy actually comes from once hosted, and the
         # AudioContext gotcha (the reason is stated only in the chat, not in the code).
         # Left out: styling (Press Start 2P font, scanlines, particles, Enter shortcut) - the
         # code says it; the MIT LICENSE and `git init` / commit e2aec0d - in the repo; "when did
         # this session start?" (the agent cannot see timestamps) - trivia; copying the session
         # file into the repo as session.jsonl - agreed ("yes please") but the copy itself is not
         # in the transcript.
         {"what": "project goal: random.akerud.se is a super simple pixel-art random-number page "
                  "used to pick who starts their Monday Dominion games; unlike random.org it must "
                  "remember the lower and upper bounds (kept in localStorage), have a GENERATE "
                  "button and a mesmerizing roll animation, nothing else; a single index.html",
          "types": ["project", "decision"], "words": ["dominion", "localstorage"]},
         {"what": "the user needs to be able to reason about the randomness, so Math.random() "
                  "(a seeded PRNG) was replaced by crypto.getRandomValues() (OS CSPRNG) with "
                  "rejection sampling to avoid modulo bias, so every value in the range is "
                  "equally likely",
          "types": ["decision", "preference"], "words": ["getrandomvalues", "modulo"]},
         {"what": "hosting on render.com needs no Dockerfile or config: create a Render Static "
                  "Site from the git repo, build command blank, publish directory '.'",
          "types": ["decision", "learning"], "words": ["render", "static"]},
         {"what": "the random number is generated client-side in the visitor's browser, so the "
                  "entropy comes from that device's OS (/dev/urandom on Linux, Apple's CSPRNG, "
                  "BCryptGenRandom on Windows), never from Render's servers",
          "types": ["learning"], "words": ["browser", "urandom"]},
         {"what": "sound effects are synthesized with the Web Audio API (square-wave tick per "
                  "roll step, C-E-G chord on landing); browsers keep the AudioContext suspended "
                  "until a user gesture, so generate() calls audioCtx.resume() first",
          "types": ["learning", "decision"], "words": ["audiocontext", "resume"]},
     ]},
    {"key": "f16-bastion-hackathon-release", "project": "f16-bastion", "format": "claude-code",
     "path": f"{BASTION16}/claude-session.jsonl",
     "held_out": True, "expect": [
         # Kept: the private-key near-miss and its fix, how the blockint rules were built (and
         # the credit convention), the deferred oracle check (an open item), the branding
         # correction, and the skill decision the agent finished in this session (skills-lock).
         # All but the last come from the pasted earlier-session log inside the user prompt; a
         # careful teammate reading this transcript would still keep them.
         # Left out: the README's project description (Sentinel fork, Axum + Anchor) and the
         # program ID BaSZuL... - the repo says both now; the 66-test breakdown; /logs returning
         # PaginatedLogsResponse (code); "GitHub found 19 vulnerabilities" push banner (not acted
         # on); the version-bump-before-asking slip (self-corrected, no lasting rule); the
         # individual commit hashes.
         {"what": "programs/bastion-audit/bastion-audit-keypair.json (the program's private key) "
                  "was untracked but NOT ignored: there was no root .gitignore (the *.json / "
                  "!keypair rules seen were .dockerignore), so `git add -A` would have committed "
                  "it; a .gitignore now excludes target/, programs/bastion-audit/target/ and the "
                  "keypair, which must never be committed",
          "types": ["incident", "convention"], "words": ["keypair", "gitignore"]},
         {"what": "the blockint skills (agentic-reserve/blockint-skills, by Daemon Blockint "
                  "Tech) are development-time agent instructions in .agents/skills, not runtime "
                  "libraries; their checks were implemented as Rust Policy extensions and "
                  "SimulationCheck impls (flash-loan pattern, high slippage, mint/freeze "
                  "authority, risk-labeled addresses), not external service calls; commits credit "
                  "Daemon Blockint Tech (Co-authored-by)",
          "types": ["decision", "convention"], "words": ["blockint", "daemon"]},
         {"what": "the oracle staleness check was deferred (not implemented) because it needs "
                  "on-chain RPC lookups of oracle account slot timestamps; the "
                  "oracle_staleness_slots policy field is reserved but no check is wired",
          "types": ["decision", "project"], "words": ["oracle", "staleness"]},
         {"what": "branding: the docs must say Bastion (org renamed to Bastion Agentique), not "
                  "'Bastion V2'; the user flagged the leftover 'Bastion v2' in README.md and it "
                  "was replaced",
          "types": ["preference", "convention"], "words": ["bastion", "v2"]},
         {"what": "asked whether to publish Bastion to skill.sh: Bastion itself is "
                  "infrastructure, not a skill, so instead a 'how to use Bastion' skill for agent "
                  "developers was written (.agents/skills/bastion-how-to-use/SKILL.md: SDK, REST "
                  "API, policies, audit logs, deploy) and registered in skills-lock.json as "
                  "source 'local' with its sha256 as computedHash",
          "types": ["decision"], "words": ["bastion-how-to-use", "skills-lock"]},
     ]},
    {"key": "f16-kronix-apply-grant-noise", "project": "f16-kronix", "format": "claude-code",
     "path": f"{KRONIX16}/claude-session.jsonl",
     "held_out": True, "expect": [
         # Pure noise: nothing worth keeping. The only user input is `/apply-grant` (twice, the
         # second time with "help me apply for the agentic engineering grant by Superteam");
         # everything else is injected text: the caveman-mode SessionStart hook (and its
         # statusline setup hint), claude-mem start-up output ("No previous sessions found"),
         # the apply-grant SKILL.md (200 USDG, form fields, export-session.sh), the skill and
         # deferred-tool listings, and one Bash run of the skill's telemetry preamble
         # (TELEMETRY: anonymous). No project fact, decision, failure or user preference is
         # stated; the session stops before the skill reads the repo. Anything an encoder keeps
         # from the skill text or the hook boilerplate is a false positive.
     ]},
]


# ---- session 16: FRESH17 (`--part fresh17`) -----------------------------------------------
# Real coding-agent transcripts by other people, rebuilt page by page from the stored public-repo
# index (no network); sources, sizes and sha256 in notes/heldout17/SOURCES.md. Labels were written
# by reading each transcript whole, before any encoder ran on them (same rules as FRESH15/16: not
# to be changed after the first run). The repository is NEW for these sets (not in
# /work/shared/corpus, not in heldout11-16).
#
# Only ONE session was finished inside the 35-minute budget (the goal was two).
#
# 1. github.com/kartsan03/StableInvoice (NO LICENCE found: no LICENSE file, package.json has no
#    "license" field; treat as all-rights-reserved, internal evaluation only, confirm before
#    publishing), ``claude-session.jsonl``, commit 015a17dd: a main CLI session (CC 2.1.200,
#    model "stealth/ox-alpha" from provider "Stealth" behind Claude Code - `gen-...` ids, empty
#    thinking signatures; Windows, cwd E:\StableInvoice, branch main with no commits) lasting 3m41s.
#    One typed prompt: "help me apply for the agentic engineering grant by Superteam", describes
#    StableInvoice (escrowed USDC invoicing for freelancers, Anchor escrow PDA, release on
#    milestone acceptance, on-chain settlement record) and asks for a minimal Anchor skeleton
#    (lib.rs stubs initialize_invoice / fund_escrow / accept_milestone / settle, Anchor.toml +
#    Cargo.toml, README with MVP scope), "Keep files small, devnet-only, no deployment", then run
#    the export script. A "ponytail" (lazy senior developer) SessionStart hook is active. The agent
#    loads the apply-grant skill, finds an empty repo, writes 6 files (incl. an unrequested
#    .gitignore) and the file ends at the export-session.sh call (the skill copies the session
#    then). Low-to-medium value: a project goal and a few scaffold decisions, most of which the
#    written files also record.
INVOICE17 = "kartsan03__StableInvoice"

FRESH17: list[dict] = [
    {"key": "f17-stableinvoice-anchor-scaffold", "project": "f17-stableinvoice",
     "format": "claude-code",
     "path": f"{INVOICE17}/claude-session.jsonl",
     "held_out": True, "expect": [
         # Kept: the project goal and the user's hard scope limits (devnet-only, no deployment,
         # small files); the decision that unimplemented instructions fail loudly with
         # NotImplemented instead of returning Ok (reasoned only in thinking, but visible in the
         # code too); the fact the repo had no commits and no remote at the time (grant proof of
         # work = this skeleton + session) and the agent's choice not to commit; the
         # placeholder program id that must be replaced.
         # Left out: the Invoice account layout, PDA seeds [b"invoice", freelancer, index] and
         # ATA vault contexts (all in lib.rs); anchor-lang/anchor-spl 0.30.1 pins (in
         # Cargo.toml); the .gitignore (in the repo); the apply-grant skill text, telemetry
         # preamble (TELEMETRY: anonymous), the 57-skill listing and the ponytail hook text
         # (injected boilerplate, not project facts); the /model switch to stealth/ox-alpha
         # (user-level setting, not project); the grant draft itself (never produced - the file
         # ends at the export call).
         {"what": "project goal: StableInvoice is escrowed USDC invoicing for freelancers on "
                  "Solana - an Anchor program where the client funds USDC into a program PDA "
                  "escrow, funds release on milestone acceptance, and a settlement record is "
                  "written on-chain; being built for the Superteam agentic engineering grant. "
                  "The user wants it devnet-only, no deployment, files kept small",
          "types": ["project", "preference"], "words": ["escrow", "devnet"]},
         {"what": "the MVP skeleton has four instructions (initialize_invoice, fund_escrow, "
                  "accept_milestone, settle); only initialize_invoice has a body, the other "
                  "three deliberately return err!(StableInvoiceError::NotImplemented) because a "
                  "stub that returns Ok without moving tokens would be misleading; the transfer "
                  "CPIs are TODOs",
          "types": ["decision", "project"], "words": ["notimplemented", "stubs"]},
         {"what": "the git repo was empty when the scaffold was written (branch main, no commits, "
                  "no remote), the agent did not commit (the user did not ask), and it did not "
                  "run anchor build (no toolchain guaranteed on this Windows box), so the "
                  "skeleton is unbuilt and unverified",
          "types": ["learning", "project"], "words": ["commits", "build"]},
         {"what": "declare_id and Anchor.toml use the default placeholder program id "
                  "Fg6PaFpoGXkYsidMpWTK6W2BeZ7FEfcYkg476zPFsLnS; it must be replaced with the "
                  "real program keypair after the first `anchor keys sync`",
          "types": ["convention", "project"], "words": ["placeholder", "keypair"]},
     ]},
]

# The parts by name, as `bench_real_sessions.py --part NAME` takes them.
PARTS: dict[str, list[dict]] = {"fresh9": FRESH9, "fresh11": FRESH11, "fresh13": FRESH13,
                                "fresh14": FRESH14, "fresh15": FRESH15, "fresh16": FRESH16,
                                "fresh17": FRESH17}
