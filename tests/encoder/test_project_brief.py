"""A request that carries a project brief ("My project: X - ...") is the project's goal,
described by the brief, whatever else the request asks (bench --part fresh17, studied after
its first run: "help me apply for the grant. My project: StableInvoice - ..."); a name at
the start of the goal keeps its case."""

from __future__ import annotations

from pathlib import Path

from dualtrace.pipeline import encode_session
from tests.conftest import bench_transcript

Transcript = bench_transcript()


def _memories(tmp_path: Path, t) -> dict[str, str]:
    mem = tmp_path / "mem"
    encode_session(t.write(tmp_path / "t.jsonl"), memory_dir=mem, backend="offline")
    return {str(p.relative_to(mem)): p.read_text() for p in mem.glob("*/*.md")
            if not str(p.relative_to(mem)).startswith(("sessions", "scenes"))}


def test_a_project_brief_in_a_request_is_the_goal(tmp_path):
    # fresh17's shape (studied after its first run): a request that carries a brief
    t = (Transcript(145).user("help me apply for the grant\n\n   My project: StableInvoice — escrowed USDC invoicing "
                              "for freelancers.\n   Client funds USDC into a program PDA.\n\n   Task: scaffold a "
                              "minimal Anchor skeleton here, devnet-only.")
         .edit("programs/stable_invoice/src/lib.rs", "", "use anchor_lang::prelude::*;\n")
         .edit("Anchor.toml", "", "[programs.devnet]\n").edit("README.md", "", "# StableInvoice\n")
         .say("Created the skeleton: lib.rs, Anchor.toml and README.md."))
    descriptions = [v.split("\n")[1] for v in _memories(tmp_path, t).values()]
    assert any(d.startswith("description: 'Project goal: StableInvoice — escrowed USDC invoicing for freelancers")
               or d.startswith("description: Project goal: StableInvoice — escrowed USDC invoicing for freelancers")
               for d in descriptions), descriptions
