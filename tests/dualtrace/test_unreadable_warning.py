"""A hand edit that breaks a memory file's YAML drops that memory from list, recall and
injection: list, reindex and status say so on stderr (new-user review 5, finding 9: it
vanished silently; only `status --check` named it)."""

from __future__ import annotations

from tests.conftest import EXAMPLES

BROKEN = "---\ndescription: broken\ntype: decision\nscores: {durability: 9\n---\nbody\n"
WARNING = "warning: decisions/broken.md does not parse, so it is left out"


def test_list_reindex_and_status_name_a_file_that_does_not_parse(tmp_path, run_cli):
    memdir = tmp_path / "memory"
    pilot = EXAMPLES / "pilot-1b-structured-logging.jsonl"
    assert run_cli("encode", str(pilot), "--memory-dir", str(memdir)).exit_code == 0
    (memdir / "decisions" / "broken.md").write_text(BROKEN)
    for args in (["list"], ["reindex"], ["status"], ["list"]):
        res = run_cli(*args, "--memory-dir", str(memdir))
        assert res.exit_code == 0, res.output
        assert WARNING in res.output and "broken.md:5" in res.output, (args, res.output)
        assert res.output.count(WARNING) == 1
    assert "json-structured-logging" in run_cli("list", "--memory-dir", str(memdir)).output
    # Fixed (here: removed), the warning goes.
    (memdir / "decisions" / "broken.md").unlink()
    for args in (["list"], ["status"]):
        assert "warning:" not in run_cli(*args, "--memory-dir", str(memdir)).output
