"""The labelled recall set: a small memory store and questions with the expected state.

Used by tests/test_recall.py and bench/eval_sdebench.py (abstention part) to
calibrate and check the STATE C threshold. ``answerable`` questions have a stored
answer (``path`` is the memory that must come back in the top results);
``never`` questions ask about things this store does not hold, several of them
sharing words with stored memories so a word overlap alone must not answer them.
Facts and moments are written with MemoryStore, exactly like the encoder does.
"""

from __future__ import annotations

from typing import Any

D = "2026-03-02"

# (type, anchor, description, body, moment narrative or None, timeline, extra fields)
FACTS: list[tuple[str, str, str, str, str | None, list[str], dict[str, Any]]] = [
    ("decision", "structured-logging-json",
     "Switched to JSON structured logging instead of plain text because Datadog could not "
     "parse free-form log strings",
     "The team switched application logging from plain text to JSON structured logging. "
     "Driver: the Datadog pipeline could not parse free-form strings reliably. Alternative "
     "considered: keep plain text and add a log shipper to transform it; rejected as added "
     "complexity to fix a self-made problem.",
     "While wiring logging in app/logging_setup.py the developer explained that Datadog "
     "dashboards were dropping events because free-form log lines could not be parsed.",
     ["structured-logging-json -> switched from plain text to JSON logs [session 2026-03-02]"],
     {"evidence_score": 11, "confidence": "HIGH"}),
    ("decision", "session-storage-postgres",
     "Moved session storage from Redis to Postgres; keeping both systems was the worst of both",
     "Session storage moved from Redis to Postgres. Rationale: one datastore to operate, "
     "transactional consistency with user rows. Alternative: keep Redis as a cache in front "
     "of Postgres; rejected because keeping both systems seemed like the worst of both worlds.",
     "During the sessions/store.py refactor the developer weighed Redis against Postgres for "
     "session data and chose Postgres.",
     ["session-storage-postgres -> Redis replaced by Postgres for sessions [session 2026-03-02]"],
     {"evidence_score": 12, "confidence": "HIGH"}),
    ("incident", "auth-middleware-401-race",
     "Intermittent 401s from the auth middleware in staging and the user session service: "
     "non-idempotent token refresh race, confirmed from logs",
     "Symptoms: intermittent 401 responses in staging, later on the user session service. "
     "Root cause (confirmed from logs): two simultaneous requests both see an expired token "
     "and both try to refresh; the token refresh function is not idempotent.",
     "Staging showed 401s that never reproduced locally; the developer traced them to "
     "refresh_token() in auth/middleware.py being called twice at once.",
     ["auth-middleware-401-race -> 401s in staging, race suspected [session 1]",
      "auth-middleware-401-race -> confirmed on user session service from logs [session 2]"],
     {"evidence_score": 8, "confidence": "HIGH", "status": "investigating"}),
    ("decision", "pagination-cursor-based",
     "API list endpoints use cursor-based pagination instead of offset pagination",
     "List endpoints paginate with opaque cursors (created_at, id) rather than "
     "offset/limit, because offsets skipped rows while new orders were inserted.",
     None, [], {"evidence_score": 6}),
    ("incident", "celery-worker-oom",
     "Celery workers killed by the OOM killer when exporting large CSV reports",
     "Symptoms: celery workers restarted with exit code 137 during CSV report exports. "
     "Cause: the export built the whole file in memory. Resolution: stream rows with "
     "csv.writer into a temporary file.",
     "The nightly report export in reports/export.py crashed workers; memory graphs showed "
     "growth until the container limit.",
     ["celery-worker-oom -> exit 137 during export, fixed by streaming [2026-02-10]"],
     {"evidence_score": 9, "status": "resolved", "stored": "2026-02-10"}),
    ("pattern", "forgets-migration-files",
     "Recurring mistake: model fields changed without generating the Alembic migration",
     "Occurrences: twice a model column was added in models/order.py without running "
     "alembic revision --autogenerate, and CI failed on the schema check.",
     None, [], {"evidence_score": 6}),
    ("learning", "asyncio-gather-exceptions",
     "Learned that asyncio.gather cancels nothing on the first exception unless "
     "return_exceptions is handled",
     "Before: assumed asyncio.gather stopped sibling tasks when one failed. After: the other "
     "awaitables keep running; use TaskGroup for structured cancellation.",
     None, [], {"evidence_score": 5}),
    ("decision", "http-client-httpx",
     "Use httpx instead of requests for outbound HTTP because the services are async",
     "Outbound HTTP uses httpx.AsyncClient; requests blocked the event loop in the webhook "
     "dispatcher. Alternative aiohttp rejected for its different API.",
     "Webhook latency spikes in webhooks/dispatch.py were traced to blocking requests calls.",
     ["http-client-httpx -> requests replaced by httpx [session 2026-03-01]"],
     {"evidence_score": 9}),
    ("decision", "feature-flags-unleash",
     "Feature flags are served by a self-hosted Unleash instead of LaunchDarkly",
     "Chose self-hosted Unleash over LaunchDarkly for cost and data residency; tradeoff: "
     "we run and upgrade it ourselves.",
     None, [], {"evidence_score": 7}),
]

HUMAN = [
    "Keeps functions under 30 lines; breaks them up when they grow longer.",
    "Prefers pytest fixtures over unittest setUp methods.",
]
CONVENTIONS = [
    "Every new module has a test file under tests/ mirroring its path.",
    "Commit messages use the imperative mood and a scope prefix, e.g. 'api: add cursor'.",
    "Money amounts are stored as integer cents, never floats.",
]

# (question, expected state group: "answerable" | "never", expected path or None)
QUESTIONS: list[tuple[str, str, str | None]] = [
    ("Why did we switch to JSON structured logging?", "answerable",
     "decisions/structured-logging-json.md"),
    ("why do we log in JSON", "answerable", "decisions/structured-logging-json.md"),
    ("what was the problem with Datadog and our logs", "answerable",
     "decisions/structured-logging-json.md"),
    ("Why are sessions stored in Postgres and not Redis?", "answerable",
     "decisions/session-storage-postgres.md"),
    ("have we seen intermittent 401 errors before", "answerable",
     "incidents/auth-middleware-401-race.md"),
    ("token refresh race condition", "answerable", "incidents/auth-middleware-401-race.md"),
    ("how do we paginate list endpoints", "answerable", "decisions/pagination-cursor-based.md"),
    ("cursor or offset pagination?", "answerable", "decisions/pagination-cursor-based.md"),
    ("celery workers killed with exit code 137", "answerable",
     "incidents/celery-worker-oom.md"),
    ("why did the CSV report export crash", "answerable", "incidents/celery-worker-oom.md"),
    ("what mistakes do I make with migrations", "answerable",
     "patterns/forgets-migration-files.md"),
    ("did I forget an alembic migration again", "answerable",
     "patterns/forgets-migration-files.md"),
    ("what have I learned about asyncio gather", "answerable",
     "learning/asyncio-gather-exceptions.md"),
    ("why httpx instead of requests", "answerable", "decisions/http-client-httpx.md"),
    ("which HTTP client do we use for outbound calls", "answerable",
     "decisions/http-client-httpx.md"),
    ("why Unleash for feature flags", "answerable", "decisions/feature-flags-unleash.md"),
    ("how long should my functions be", "answerable", "system/human.md"),
    ("how should I write tests, fixtures or setUp", "answerable", "system/human.md"),
    ("how do we store money amounts", "answerable", "system/project/conventions.md"),
    ("what's the convention for commit messages", "answerable",
     "system/project/conventions.md"),
    ("where do test files go for a new module", "answerable", "system/project/conventions.md"),
    ("webhook dispatcher latency spikes", "answerable", "decisions/http-client-httpx.md"),
    # long, pasted texts (bug reports, prompts): coverage is judged on their known words
    ("Our Datadog dashboards are dropping log events again after the logger refactor; lines "
     "arrive as free-form strings that the pipeline cannot parse. Check the logging setup and "
     "restore the structured output. A failing repro is at tests/test_regression.py.",
     "answerable", "decisions/structured-logging-json.md"),
    ("Users get logged out at random under load and the session table in Postgres keeps "
     "growing; someone suggested putting Redis back in front as a cache. Before changing session "
     "storage, explain what we decided and why. The repro is in tests/test_sessions.py.",
     "answerable", "decisions/session-storage-postgres.md"),
    ("Two parallel requests to the user session service both refresh an expired token and one "
     "of them gets a 401 back; it only happens in staging, never locally. Find the refresh path "
     "in the middleware and make it safe under concurrency.",
     "answerable", "incidents/auth-middleware-401-race.md"),
    ("The CSV report export task in the celery workers gets killed with exit code 137 on big "
     "months; memory grows until the container is killed. Fix the export so it streams rows "
     "instead of building the whole file in memory.",
     "answerable", "incidents/celery-worker-oom.md"),
    ("I added a column to the orders model and the deploy failed because there is no alembic "
     "migration file for it; add the missing migration and tell me whether this keeps "
     "happening with my model changes.",
     "answerable", "patterns/forgets-migration-files.md"),
    # never stored
    ("The nightly image thumbnail job produces blurry previews for PNG files with transparency; "
     "the resize step seems to drop the alpha channel before sharpening. A failing repro is at "
     "tests/test_regression.py. Fix the thumbnails without breaking existing behaviour.",
     "never", None),
    ("Search results in the admin panel are sorted by creation date instead of relevance after "
     "the Elasticsearch upgrade, and the facet counts are off by one. Restore relevance "
     "ordering. A failing repro is at tests/test_regression.py.", "never", None),
    ("The mobile app shows prices in the wrong currency for users in Switzerland because the "
     "locale fallback picks EUR. Make the currency follow the billing country. A failing repro "
     "is at tests/test_regression.py.", "never", None),
    ("Scheduled email digests are sent twice on daylight saving transitions because the cron "
     "expression runs in local time. Make the digest run once per day in UTC. A failing repro "
     "is at tests/test_regression.py.", "never", None),
    ("The PDF invoice generator cuts off line items that wrap onto a second page and the totals "
     "box overlaps the footer. Fix pagination of invoices. A failing repro is at "
     "tests/test_regression.py.", "never", None),
    ("Uploading avatars larger than 5 MB returns a generic 500 instead of a validation message, "
     "and the S3 multipart upload is left dangling. Validate the size up front. A failing "
     "repro is at tests/test_regression.py.", "never", None),
    ("What's our test coverage threshold?", "never", None),
    ("Which database do we use for analytics?", "never", None),
    ("why did we choose Kubernetes over Nomad", "never", None),
    ("what is the staging deploy schedule", "never", None),
    ("who owns the billing service", "never", None),
    ("what's the maximum upload size for attachments", "never", None),
    ("have we seen the payment webhook signature mismatch before", "never", None),
    ("why do we pin numpy below 2", "never", None),
    ("what's the naming convention for feature branches", "never", None),
    ("which Python version does production run", "never", None),
    ("why did we drop GraphQL", "never", None),
    ("what timeout do we use for database queries", "never", None),
    ("how is the frontend built, webpack or vite", "never", None),
    ("what is the on-call rotation", "never", None),
    ("why do we use Terraform workspaces", "never", None),
    ("what's our rate limit for the public API", "never", None),
    ("did the Kafka consumer lag incident get resolved", "never", None),
    ("what are the SLOs for checkout latency", "never", None),
    ("which linter rules did we disable", "never", None),
    ("how do we rotate the JWT signing keys", "never", None),
]

# Paraphrases (semantic recall, issue 11): answerable questions asked in other words than
# the stored ones, written before tuning. Lexical recall is not expected to find most of
# them; with the semantic extra at least the share in tests/memfs/test_recall_records.py.
PARAPHRASES: list[tuple[str, str]] = [
    ("what logging approach did we settle on", "decisions/structured-logging-json.md"),
    ("which vendor was failing to read our application output", "decisions/structured-logging-json.md"),
    ("where do we keep user login state now", "decisions/session-storage-postgres.md"),
    ("why did we stop using the key-value cache for logins", "decisions/session-storage-postgres.md"),
    ("have people been kicked out with unauthorized responses on the pre-prod environment",
     "incidents/auth-middleware-401-race.md"),
    ("how do clients fetch the next page of results", "decisions/pagination-cursor-based.md"),
    ("why did the background job processes run out of RAM", "incidents/celery-worker-oom.md"),
    ("do I keep forgetting the schema change scripts for the database",
     "patterns/forgets-migration-files.md"),
    ("what did we find out about running coroutines concurrently when one raises",
     "learning/asyncio-gather-exceptions.md"),
    ("which library makes our outgoing web calls", "decisions/http-client-httpx.md"),
    ("what service turns features on and off for us", "decisions/feature-flags-unleash.md"),
    ("how big may a function get before I split it", "system/human.md"),
    ("how do we represent prices", "system/project/conventions.md"),
    ("what style do commit subjects follow", "system/project/conventions.md"),
]


def build(store: Any) -> None:
    """Write the labelled memories into ``store`` (a MemoryStore) and commit them."""
    from dataclasses import replace

    from dualtrace.memfs import formats

    paths: list[str] = []
    for kind, anchor, desc, body, narrative, timeline, extra in FACTS:
        stored = extra.get("stored", D)
        fact = formats.Fact(
            path=formats.fact_path(kind, anchor), type=kind, description=desc, body=body,
            confidence=extra.get("confidence", "MEDIUM"), stored=stored,
            evidence_score=extra.get("evidence_score"), status=extra.get("status"),
            tier="FULL" if narrative else "RECORD",
        )
        if narrative:
            scene = formats.scene_path(kind, anchor)
            fact = replace(fact, linked_scene=scene)
            moment = formats.Moment(
                path=scene, anchor=anchor, description=f"Scene cue for {anchor} -- {desc[:40]}",
                linked_fact=fact.path, narrative=narrative, timeline=tuple(timeline),
                confidence=fact.confidence, stored=stored,
            )
            paths.append(store.write(moment))
        paths.append(store.write(fact))
    human = store.human_file()
    for bullet in HUMAN:
        human = human.with_bullet(bullet)
    conventions = store.conventions_file()
    for bullet in CONVENTIONS:
        conventions = conventions.with_bullet(bullet)
    paths += [store.write(human), store.write(conventions)]
    store.commit(paths, "mem: labelled recall set\n")
