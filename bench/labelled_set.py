"""A labelled set of sessions for the encoder (written by this project).

Each session is a plain chat (role/content turns); sessions are encoded in order
into one memory directory, so later ones can update or contradict earlier ones.
``expect`` lists the events a careful human scorer finds in the session, with the
tier the rubric of docs/PROTOCOL.md §6-7 gives them and whether the right action is a new
memory ("new"), an update of an earlier session's memory ("update", with the key
of that session), a supersession ("supersede"), or nothing ("none").
"""

from __future__ import annotations

SESSIONS = [
    {"key": "pref-short", "turns": [
        ("user", "I prefer pytest fixtures over setUp methods."),
        ("assistant", "Got it, fixtures it is.")],
     "expect": [{"type": "preference", "tier": "SKIP", "action": "new"}]},
    {"key": "pref-why", "turns": [
        ("user", "I prefer small pull requests because reviews go faster and rollbacks are cheap. "
                 "We tried big-bang PRs last quarter and they sat unreviewed for a week."),
        ("assistant", "Understood; I'll keep changes small.")],
     # FULL by score, but the session names no code artifact a moment could anchor on.
     "expect": [{"type": "preference", "tier": "RECORD", "action": "new"}]},
    {"key": "conv-schema", "turns": [
        ("user", "From now on, every new endpoint must have an OpenAPI schema in `api/schema.yaml`. "
                 "The rule is: no schema, no merge."),
        ("assistant", "I'll add the schema for the orders endpoint first.")],
     "expect": [{"type": "convention", "tier": "FULL", "action": "new"}]},
    {"key": "conv-lint", "turns": [
        ("user", "We always run `make lint` before pushing."),
        ("assistant", "OK.")],
     "expect": [{"type": "convention", "tier": "RECORD", "action": "new"}]},
    {"key": "dec-orm", "turns": [
        ("user", "Let's go with SQLAlchemy 2.0 for the database layer instead of raw SQL, because typed "
                 "queries catch bugs before production. We considered the Django ORM but it drags in the "
                 "whole framework."),
        ("assistant", "I'll port `db/queries.py` to SQLAlchemy 2.0 style selects.")],
     "expect": [{"type": "decision", "tier": "FULL", "action": "new"}]},
    {"key": "dec-black", "turns": [
        ("user", "We'll use black with line length 100 for this repo."),
        ("assistant", "Configured in pyproject.toml.")],
     "expect": [{"type": "decision", "tier": "RECORD", "action": "new"}]},
    {"key": "inc-export", "turns": [
        ("user", "The nightly export job is failing with MemoryError when the CSV is over 2GB."),
        ("assistant", "I'll look at `export/nightly.py`.")],
     "expect": [{"type": "incident", "tier": "RECORD", "action": "new"}]},
    {"key": "inc-export-2", "turns": [
        ("user", "The export MemoryError is back again on the February data. Root cause confirmed: "
                 "`export/nightly.py` loads the whole CSV with read_csv instead of streaming chunks."),
        ("assistant", "I'll switch it to chunked reads.")],
     "expect": [{"type": "incident", "tier": "FULL", "action": "update", "of": "inc-export"}]},
    {"key": "pat-migrations", "turns": [
        ("user", "I keep forgetting to add the migration file when I change the models."),
        ("assistant", "I'll remind you when models change.")],
     "expect": [{"type": "pattern", "tier": "RECORD", "action": "new"}]},
    {"key": "pat-migrations-2", "turns": [
        ("user", "Third time this month: I keep forgetting the migration file after changing the models."),
        ("assistant", "Let's add a CI check in `scripts/check_migrations.py`.")],
     "expect": [{"type": "pattern", "tier": "FULL", "action": "update", "of": "pat-migrations"}]},
    {"key": "learn-now", "turns": [
        ("user", "TIL that Postgres NOW() returns the transaction start time, not the wall clock, "
                 "which is why our timestamps inside long transactions were all identical."),
        ("assistant", "clock_timestamp() gives the wall clock.")],
     "expect": [{"type": "learning", "tier": "FULL", "action": "new"}]},
    {"key": "multi-ci", "turns": [
        ("user", "We're moving CI from Jenkins to GitHub Actions because the Jenkins agents keep dying "
                 "overnight and nobody owns them."),
        ("assistant", "I'll port the pipeline to `.github/workflows/ci.yml`."),
        ("user", "Also, I like commit messages in the imperative mood.")],
     "expect": [{"type": "decision", "tier": "FULL", "action": "new"},
                {"type": "preference", "tier": "SKIP", "action": "new"}]},
    {"key": "multi-inc-conv", "turns": [
        ("user", "The checkout page is throwing 500s in production since the deploy; the payment "
                 "webhook times out."),
        ("assistant", "`handle_payment_webhook()` in `webhooks/payment.py` calls the fraud API synchronously."),
        ("user", "From now on, never call external APIs synchronously inside webhook handlers.")],
     "expect": [{"type": "incident", "tier": "FULL", "action": "new"},
                {"type": "convention", "tier": "RECORD", "action": "new"}]},
    {"key": "noise-rename", "turns": [
        ("user", "Can you rename foo to bar in utils?"),
        ("assistant", "Renamed.")],
     "expect": [{"type": None, "tier": "SKIP", "action": "none"}]},
    {"key": "noise-question", "turns": [
        ("user", "What does this regex do: ^\\d{3}-\\d{4}$ ?"),
        ("assistant", "It matches three digits, a dash, and four digits.")],
     "expect": [{"type": None, "tier": "SKIP", "action": "none"}]},
    {"key": "dec-ci-back", "turns": [
        ("user", "We're switching CI back from GitHub Actions to Jenkins, because the Actions minutes got "
                 "too expensive for the monorepo. We looked at self-hosted runners but nobody wants to "
                 "own them either."),
        ("assistant", "I'll restore the Jenkinsfile.")],
     "expect": [{"type": "decision", "tier": "FULL", "action": "supersede", "of": "multi-ci"}]},
    {"key": "learn-redis", "turns": [
        ("user", "Turns out the Redis client retries on timeout by default, which is why our writes "
                 "were doubled under load."),
        ("assistant", "Setting retry_on_timeout=False.")],
     "expect": [{"type": "learning", "tier": "FULL", "action": "new"}]},
    {"key": "inc-safari", "turns": [
        ("user", "The login page crashes with a TypeError in Safari only."),
        ("assistant", "Probably optional chaining in the old bundle.")],
     "expect": [{"type": "incident", "tier": "RECORD", "action": "new"}]},
    {"key": "conv-logging", "turns": [
        ("user", "Never use print for logging in this codebase; the rule is to use the structlog logger "
                 "everywhere so the logs stay machine-readable."),
        ("assistant", "Replaced the prints.")],
     "expect": [{"type": "convention", "tier": "FULL", "action": "new"}]},
    {"key": "pref-diff", "turns": [
        ("user", "Please always show me the diff before committing."),
        ("assistant", "Will do.")],
     "expect": [{"type": "preference", "tier": "SKIP", "action": "new"}]},
    {"key": "dec-orders-schema", "turns": [
        ("user", "We decided to migrate the orders table to a new schema with a composite key of "
                 "tenant_id and order_id. It's irreversible, so we planned a backfill and a dual-write "
                 "window first."),
        ("assistant", "Migration 0042 adds the composite key.")],
     "expect": [{"type": "decision", "tier": "FULL", "action": "new"}]},
    {"key": "inc-safari-2", "turns": [
        ("user", "The Safari TypeError on the login page came back after the bundle update. Confirmed "
                 "the root cause: the old Babel preset drops the optional chaining transform."),
        ("assistant", "Pinned the preset.")],
     "expect": [{"type": "incident", "tier": "FULL", "action": "update", "of": "inc-safari"}]},
]
