"""Write the session record of every corpus transcript into a folder, to diff builds.

    python bench/record_snapshot.py OUT [--budget N ...] [--synthetic N] [--questions FILE ...]

Each main transcript of ../shared/corpus/claude-code/ and agentlogs/ (Claude Code, Codex)
is read, redacted and quarantined as an encode does (``pipeline.clean_session``) and its
record written with ``encoder.records.record_for`` (whole transcript, one part) into
``OUT/<budget>/<folder>__<name>.md``, at each budget given (default: 12000 and 3000, the
second forcing the budget's cuts); ``--synthetic N`` adds bench_records.py's first N
synthetic sessions. ``diff -r`` two snapshots to see what a change did;
a summary line per budget gives record count, median and max size. ``--questions``
(bench/data/session_questions*.json) says, for each set, how many answerable questions have
every answer word in one turn window of the record of a session that answers them (at the
first budget): what a record keeps at all, before any ranking.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


def transcripts() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((CORPUS / "claude-code").rglob("*.jsonl")):
        if "subagents" not in path.parts:
            out.append(("claude-code", path))
    for host in ("claudecode", "codex"):
        out += [(host, p) for p in sorted((CORPUS / "agentlogs" / host).glob("*.jsonl"))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget", type=int, action="append")
    parser.add_argument("--synthetic", type=int, default=0)
    parser.add_argument("--questions", type=Path, action="append", default=[])
    args = parser.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"corpus not found at {CORPUS}")
    from dualtrace.config import Settings
    from dualtrace.encoder.records import has_request, record_for
    from dualtrace.encoder.redact import Redactor
    from dualtrace.hooks.transcripts import read_transcript
    from dualtrace.pipeline import clean_session

    redactor = Redactor(Settings().redact_patterns)
    sessions = []
    for group, path in transcripts():
        session = clean_session(read_transcript(path), redactor)[0]
        if has_request(session):
            name = f"{group}__{path.relative_to(path.parents[1]).as_posix().replace('/', '__')}"
            sessions.append((name, session))
    if args.synthetic:
        import random

        sys.path.insert(0, str(ROOT / "bench"))
        from bench_records import synthetic_transcript

        rng = random.Random(11)
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(args.synthetic):
                path = Path(tmp) / f"synthetic-{n:04d}.jsonl"
                synthetic_transcript(path, n, rng)
                sessions.append((path.name, clean_session(read_transcript(path), redactor)[0]))
    budgets = args.budget or [12000, 3000]
    for budget in budgets:
        folder = args.out / str(budget)
        folder.mkdir(parents=True, exist_ok=True)
        sizes = []
        for name, session in sessions:
            with tempfile.TemporaryDirectory() as tmp:
                _, text = record_for(session, Path(tmp), project="p", memories=(),
                                     budget=budget, redact=redactor.redact)
            (folder / f"{name[:-6]}.md").write_text(text, encoding="utf-8")
            sizes.append(len(text.encode("utf-8")))
        print(f"budget {budget}: {len(sizes)} records, median {statistics.median(sizes):.0f} B, "
              f"max {max(sizes)} B")
    for questions in args.questions:
        kept(args.out / str(budgets[0]), questions)


def kept(folder: Path, questions: Path) -> None:
    """Answerable questions whose answer words all sit in one turn of an answering
    session's record."""
    import json
    import re

    from dualtrace.memfs.sessions import turn_windows

    windows: dict[str, list[str]] = {}
    for path in folder.glob("claude-code__*.md"):
        text = path.read_text(encoding="utf-8")
        m = re.search(r"^session: (\S+)", text, re.M)
        if m:
            windows[m.group(1)[:8]] = [w.raw.lower() for w in turn_windows(text)]
    items = [q for q in json.loads(questions.read_text(encoding="utf-8"))["questions"]
             if q["kind"] != "never"]
    found = sum(any(all(word.lower() in w for word in q["answer"])
                    for s in q["sessions"] for w in windows.get(s, []))
                for q in items)
    print(f"{questions.name}: answer in one turn of an answering session's record "
          f"{found}/{len(items)}")


if __name__ == "__main__":
    main()
