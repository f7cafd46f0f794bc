"""A labelled set of real sessions from the shared corpus (issue 12).

Written by reading each transcript in ``../shared/corpus`` *before* any heuristic of
the offline encoder was tuned on it. For each session: the memories a careful reader
would keep, each with the memory types that would be right for it and the words
(case-insensitive, matched on word boundaries) that must appear in the memory's
description or body. ``status`` marks an incident that the session itself fixed
(its memory must say ``resolved``).

Sessions of one project are encoded in the listed (date) order into one memory
directory, so a later session can update or revise an earlier one. Sessions with no
expectations are noise: anything written for them counts as not useful.

``held_out`` sessions (about a third) are never looked at while tuning: the bench
only reports them when asked for ``--part held-out`` or ``--part all``. A session that
was held out until a failure seen on it informed a change carries ``exposed`` (why) and
is a tuning session from then on.
"""

from __future__ import annotations

CCL = "claude-code/claude-code-log/-Users-dain-workspace-claude-code-log-sample"
CCV = "claude-code/claude-code-viewer/sample-project"
CR = "claude-code/claude-reliability"
SP = "claude-code/spotter"
AL = "agentlogs"

# Held out until session 3 of the issue, when the offline recurrence guard's false merge
# (sp-otel's bead spotter-4te work decision written as an update of sp-readability's bead
# spotter-fum decision) was found by reading sp-otel's operations. The fix is tested on
# both sessions, so from session 4 on they are tuning sessions; the bench reports them
# also as their own group ("exposed") so that the old and the new split can be compared.
EXPOSED_S3 = "session 3: the spotter-4te / spotter-fum false merge was found here"

# Held out until session 5, when the one held-out duplicate (sessions 3-4) was looked at:
# ty's invalid-assignment fix broke the rewritten tests, and the failure the user pasted
# next became a second incident of one debugging episode. Fixed (offline._breaks_fix),
# tested on this transcript, so it is a tuning session from session 5 on.
EXPOSED_S5 = "session 5: the held-out duplicate (a failure the fix itself caused) was found here"

# Held out until session 6: review 5's finding 5 names this session's memory (its opening
# request "Add a function called multiply_numbers ..." stored as a HIGH decision), and the
# fix for that finding is tested on it, so from session 6 on it is a tuning session.
EXPOSED_S6 = "session 6: review 5 finding 5 showed its opening request stored as a decision"

# Held out until session 8: review 7 F7 quoted these sessions' memories (ccl-browser-tests'
# narration line as the stated cause and its test-test-... anchor; ccl-tui-cache's two-sentence
# description and its anchor cut at "rather"), and the session-8 rules for causes, anchors and
# descriptions answer those findings, so they are tuning sessions from session 8 on.
EXPOSED_S8 = "session 8: review 7 F7 quoted its memories (stated cause, anchor, description)"

# Held out until session 9: its empty output was studied (heldout). The gate says "no signal
# and no minimum tier (routine activity only)": the one edit is to CLAUDE.md (the stack it
# records), and no phrase the gate counts is said. With a CLAUDE.md/AGENTS.md edit counted as
# a signal (tried, not landed) the offline backend still writes nothing ("no decision,
# incident, convention, preference, pattern or learning cues"): what an instruction file
# now says is no cue for it. So it is a tuning session from session 9 on.
EXPOSED_S9 = "session 9: its empty output was studied (gate no signal; no offline cue in a CLAUDE.md edit)"

SESSIONS: list[dict] = [
    # ---- claude-code-log: one developer, one project, date order -----------------------
    {"key": "ccl-ci", "project": "ccl", "path": f"{CCL}/fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl",
     "held_out": False, "expect": [
         # The user corrected the agent: run on all pushes; type checking is enforced.
         {"what": "CI workflow in .github/workflows/ci.yml runs tests, ruff, pyright on every push",
          "types": ["decision", "convention"], "words": ["ci.yml", "push"]},
         {"what": "pyright type errors in converter.py fixed (cast), pyright passes",
          "types": ["incident"], "words": ["pyright", "converter.py"], "status": "resolved"},
         {"what": "the CI workflow is tested locally with act",
          "types": ["convention", "learning", "decision"], "words": ["act"]},
     ]},
    {"key": "ccl-timeline", "project": "ccl", "path": f"{CCL}/0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl",
     "held_out": False, "expect": [
         # The user rejected two edits and said how: group.visible, no loop over items.
         {"what": "timeline filters hide vis-timeline groups through the group's visible property",
          "types": ["decision", "convention"], "words": ["visible", "group"]},
         {"what": "vis-timeline sets group header colours as inline styles; fixed in messageTypeGroups",
          "types": ["learning", "incident", "decision"], "words": ["inline", "style"]},
     ]},
    {"key": "ccl-combined-link", "project": "ccl", "path": f"{CCL}/37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl",
     "held_out": False, "expect": [
         {"what": "session pages show one link to the combined transcript instead of cross-session links",
          "types": ["decision"], "words": ["combined", "transcript", "link"]},
         {"what": "the combined transcript reuses the session_nav.html component",
          "types": ["decision", "convention"], "words": ["session_nav.html"]},
         # Session 5 (the lead's review): "I'd actually love that test to be saved a
         # permanent unit test" is a one-off request within this work, not a standing
         # preference; session 1 labelled it "the user wants ad-hoc check scripts kept as
         # permanent unit tests" (preference / convention). Same words, the work's type.
         {"what": "the quick check of the combined link was kept as a permanent unit test",
          "types": ["decision"], "words": ["permanent", "unit test"]},
     ]},
    {"key": "ccl-tui-cache", "project": "ccl", "path": f"{CCL}/89488521-e2e7-4d97-bc02-38197efdddc8.jsonl",
     "held_out": False, "exposed": EXPOSED_S8, "expect": [
         {"what": "the TUI opens the cached session HTML instead of regenerating it, no existence check",
          "types": ["decision"], "words": ["tui", "cache", "html"]},
     ]},
    {"key": "ccl-ty-mocks", "project": "ccl", "path": f"{CCL}/937c6e6b-27e7-4edd-86f1-ad28f9731841.jsonl",
     "held_out": False, "exposed": EXPOSED_S5, "expect": [
         {"what": "ty check invalid-assignment errors in test_tui_expansion.py fixed with unittest.mock",
          "types": ["incident"], "words": ["test_tui_expansion.py", "mock"], "status": "resolved"},
     ]},
    {"key": "ccl-display-name-latest", "project": "ccl",
     "path": f"{CCL}/cbc0f75b-b36d-4efd-a7da-ac800ea30eb6.jsonl",
     "held_out": False, "expect": [
         {"what": "get_project_display_name takes the latest working directory (tests updated)",
          "types": ["decision"], "words": ["get_project_display_name", "latest"]},
     ]},
    {"key": "ccl-timestamps", "project": "ccl", "path": f"{CCL}/b45ad5d8-81fb-4bcb-baba-19d9f503d731.jsonl",
     "held_out": False, "expect": [
         {"what": "extract_working_directories picks last_timestamp for SessionCacheData, timestamp otherwise",
          "types": ["decision", "learning"], "words": ["timestamp", "SessionCacheData"]},
     ]},
    {"key": "ccl-display-name-depth", "project": "ccl",
     "path": f"{CCL}/71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl",
     "held_out": False, "expect": [
         # "I changed my mind": revises the previous session's rule.
         {"what": "get_project_display_name: least nested path first, the latest on equal depth",
          "types": ["decision"], "words": ["nested", "latest"], "supersedes": "ccl-display-name-latest"},
     ]},
    {"key": "ccl-browser-tests", "project": "ccl", "path": f"{CCL}/12a546d1-83a7-49a6-abba-5400db340b43.jsonl",
     "held_out": False, "exposed": EXPOSED_S8, "expect": [
         {"what": "browser tests failed after the Phase 2 refactoring: sidechain CSS class and system "
                  "message content fixed in html_generator.py",
          "types": ["incident"], "words": ["html_generator.py", "sidechain"], "status": "resolved"},
         {"what": "renderer.py was split into formatter / template_data / html_generator / markdown_renderer",
          "types": ["decision", "learning"], "words": ["renderer.py", "html_generator"]},
     ]},
    # ---- claude-code-viewer: a Next.js TODO demo -----------------------------------------
    {"key": "ccv-init-empty", "project": "ccv", "path": f"{CCV}/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
     "held_out": False, "expect": []},  # /init on an empty repo; the CLAUDE.md write was not granted
    {"key": "ccv-todo-app", "project": "ccv", "path": f"{CCV}/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
     "held_out": False, "expect": [
         {"what": "the project is a TODO app built with Next.js, TypeScript and Tailwind CSS",
          "types": ["decision", "learning", "convention"], "words": ["next.js", "todo"]},
     ]},
    {"key": "ccv-claude-md", "project": "ccv", "path": f"{CCV}/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
     "held_out": False, "exposed": EXPOSED_S9, "expect": [
         {"what": "the stack is Next.js 15.5.2, React 19.1.0, Tailwind CSS v4 (CLAUDE.md updated)",
          "types": ["decision", "learning", "convention"], "words": ["next.js", "15"]},
     ]},
    # ---- claude-reliability: two automated runs ------------------------------------------
    {"key": "cr-coverage", "project": "cr-coverage", "path": f"{CR}/coverage-test-fix/transcript.jsonl",
     "held_out": False, "exposed": EXPOSED_S6, "expect": [
         {"what": "the Stop hook refuses to finish with uncommitted changes or untracked files",
          "types": ["convention", "learning"], "words": ["untracked", "stop hook"]},
     ]},
    {"key": "cr-rust-port", "project": "cr-rust", "path": f"{CR}/python-to-rust-port/transcript.jsonl",
     "held_out": False, "expect": [
         {"what": "the Python library was ported to a standalone Rust library, Python sources deleted",
          "types": ["decision"], "words": ["rust", "python"]},
         {"what": "just check runs cargo llvm-cov --fail-under-lines 100 (100% line coverage)",
          "types": ["convention", "decision"], "words": ["llvm-cov", "100"]},
     ]},
    # ---- spotter: one Elixir/Phoenix project, five epics and three fixtures --------------
    {"key": "sp-short", "project": "spotter", "path": f"{SP}/short.jsonl",
     "held_out": False, "expect": []},  # both tool calls rejected, no reason given
    {"key": "sp-tool-heavy", "project": "spotter", "path": f"{SP}/tool_heavy.jsonl",
     "held_out": False, "expect": [
         {"what": "xterm.js scrollback does not work in the embedded terminal (open)",
          "types": ["incident", "learning"], "words": ["xterm", "scroll"]},
     ]},
    {"key": "sp-quality-beads", "project": "spotter", "path": f"{SP}/subagent.jsonl",
     "held_out": False, "expect": [
         {"what": "no Igniter installers exist for credo, dialyxir, mix_audit: plain deps in mix.exs",
          "types": ["learning", "decision"], "words": ["igniter", "credo"]},
         {"what": "epic spotter-0p7: set up Credo, Dialyxir and mix_audit with a mix quality alias",
          "types": ["decision", "convention"], "words": ["mix_audit", "quality"]},
     ]},
    {"key": "sp-annotations", "project": "spotter", "path": f"{SP}/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
     "held_out": False, "expect": [
         {"what": "annotations carry a source (terminal/transcript) and AnnotationMessageRef rows",
          "types": ["decision"], "words": ["annotation", "AnnotationMessageRef"]},
         {"what": "migrations generated by mix ash.codegen need SQLite fixes (table rewrite)",
          "types": ["learning", "convention"], "words": ["ash.codegen", "sqlite"]},
         {"what": "LiveView tests need the Ecto sandbox in shared mode",
          "types": ["learning", "convention", "incident"], "words": ["sandbox", "shared"]},
     ]},
    {"key": "sp-transcript-computers", "project": "spotter",
     "path": f"{SP}/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
     "held_out": False, "expect": [
         {"what": "a shared AshComputer module transcript_computers.ex, attached by SessionLive and SubagentLive",
          "types": ["decision"], "words": ["transcript_computers.ex"]},
     ]},
    {"key": "sp-readability", "project": "spotter", "path": f"{SP}/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
     "held_out": False, "exposed": EXPOSED_S3, "expect": [
         {"what": "TranscriptRenderer.render/2 adds enriched metadata, render_message/1 kept for compat",
          "types": ["decision"], "words": ["render/2"]},
         {"what": "priv/static/assets is gitignored build output: files there must be force-added",
          "types": ["learning", "convention"], "words": ["priv/static/assets"]},
     ]},
    {"key": "sp-otel", "project": "spotter", "path": f"{SP}/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
     "held_out": False, "exposed": EXPOSED_S3, "expect": [
         {"what": "OpenTelemetry tracing hooks->Phoenix->Ash, SPOTTER_OTEL_ENABLED opt-out, never crashes",
          "types": ["decision"], "words": ["opentelemetry", "SPOTTER_OTEL_ENABLED"]},
         {"what": "pre-commit hooks enforce mix format, credo --strict, dialyzer and mix test",
          "types": ["convention"], "words": ["credo", "dialyzer"]},
     ]},
    {"key": "sp-live-tail", "project": "spotter", "path": f"{SP}/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
     "held_out": False, "expect": [
         {"what": "ActiveSessionRegistry (GenServer + ETS) tracks session lifecycle; Stop hook posts session-end",
          "types": ["decision"], "words": ["ActiveSessionRegistry"]},
         {"what": "per-session transcript tail workers under TranscriptTailSupervisor",
          "types": ["decision"], "words": ["tail"]},
         {"what": "sync idempotency test failed: test JSONL had no uuid so the upsert identity never matched",
          "types": ["incident", "learning"], "words": ["uuid", "upsert"], "status": "resolved"},
     ]},
    # ---- agentlogs: small fixtures of Claude Code and Codex -------------------------------
    {"key": "al-cc-crud", "project": "al-claudecode", "path": f"{AL}/claudecode/crud.jsonl",
     "held_out": False, "expect": []},  # create/read/edit/delete a joke file
    {"key": "al-cc-compact", "project": "al-claudecode", "path": f"{AL}/claudecode/compact.jsonl",
     "held_out": False, "expect": []},
    {"key": "al-cc-subagent", "project": "al-claudecode", "path": f"{AL}/claudecode/subagent.jsonl",
     "held_out": False, "expect": []},
    {"key": "al-cc-images", "project": "al-claudecode", "path": f"{AL}/claudecode/images.jsonl",
     "held_out": False, "expect": []},  # a screenshot of google.com
    {"key": "al-cc-todos", "project": "al-claudecode", "path": f"{AL}/claudecode/todos.jsonl",
     "held_out": True, "expect": []},
    {"key": "al-codex-crud", "project": "al-codex", "path": f"{AL}/codex/crud.jsonl",
     "held_out": True, "expect": []},  # AGENTS.md is injected by the host, not said by the user
    {"key": "al-codex-chart", "project": "al-codex", "path": f"{AL}/codex/images.jsonl",
     "held_out": False, "expect": [
         {"what": "the Claude Code label wrapped because Recharts wraps ticks to the YAxis width; widened "
                  "to 120 in team/index.tsx",
          "types": ["incident", "learning", "decision"], "words": ["yaxis", "width"]},
     ]},
]


# ---- new held-out part (session 7) -------------------------------------------------------
# The real sessions of ../shared/corpus that SESSIONS does not hold, labelled in session 7
# by reading them before any encoder ran on them. They are kept apart from SESSIONS (the
# tuning and the first held-out part keep their figures) and are never tuned on. Each names
# its host format. Pi, OpenCode and Cline had no reader in session 7 (reported unread); the
# readers came in session 8 (hooks/pi.py, opencode.py, cline.py), whose first run of this
# part is the held-out figure in docs/BENCHMARKS.md. The labels were not changed for it.
# (The spotter subagents/agent-*.jsonl files are not sessions of their own: the hook folds a
# subagent's work into its parent's transcript and ignores SubagentStop.)
NEW_HELD_OUT: list[dict] = [
    {"key": "al-pi-crud", "project": "al-pi", "format": "pi", "path": f"{AL}/pi/crud.jsonl",
     "held_out": True, "expect": []},  # create/read/edit/delete JOKE.md: a tool fixture
    {"key": "al-pi-branched", "project": "al-pi", "format": "pi", "path": f"{AL}/pi/branched.jsonl",
     "held_out": True, "expect": []},  # two haiku files, then "instead write a limerick": one-off tasks
    {"key": "al-pi-image", "project": "al-pi", "format": "pi", "path": f"{AL}/pi/image.jsonl",
     "held_out": True, "expect": []},  # "What is this?" on a screenshot (the OpenAI logo)
    {"key": "al-opencode-crud", "project": "al-opencode", "format": "opencode",
     "path": f"{AL}/opencode/crud.json", "held_out": True, "expect": []},  # JOKE.md lifecycle
    {"key": "al-opencode-all-tools", "project": "al-opencode", "format": "opencode",
     "path": f"{AL}/opencode/all-tools.json", "held_out": True, "expect": []},  # "use each tool once, undo"
    {"key": "al-cline-crud", "project": "al-cline", "format": "cline", "path": f"{AL}/cline/crud.json",
     "held_out": True, "expect": [
         {"what": "Cline keeps each task's conversation in ~/.cline/data/tasks/<TASK-ID>/"
                  "api_conversation_history.json (task_metadata.json beside it), in a format close to "
                  "Anthropic's messages: the user's brief for a new Cline plugin",
          "types": ["learning", "decision"], "words": ["cline", "api_conversation_history.json"]},
         {"what": "AgentLogs is a Bun monorepo: packages cli, web (TanStack Start on Cloudflare Workers, "
                  "D1), shared (transcript parsing, redaction), pi and opencode plugins, e2e",
          "types": ["learning", "decision"], "words": ["agentlogs", "monorepo"]},
     ]},
]

