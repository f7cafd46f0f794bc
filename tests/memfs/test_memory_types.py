"""One table of memory types: formats, index, store, validator, CLI and tool schemas
all read it (memfs/types.py)."""

from __future__ import annotations

from dualtrace.memfs import formats, index
from dualtrace.memfs.types import MEMORY_TYPES


def test_the_derived_names_are_the_table():
    names = [t.name for t in MEMORY_TYPES]
    assert list(formats.TYPES) == names
    assert set(index.CURATED_TYPES) == set(names)
    assert set(formats.FACT_FOLDER_TYPES) | set(formats.BULLET_TYPES) == set(names)
    for t in MEMORY_TYPES:
        assert formats.scene_path(t.name, "x") == f"scenes/{t.folder}/x.md"
        assert formats.canonical_folder(t.folder) == t.folder
        assert all(formats.canonical_folder(alias) == t.folder for alias in t.aliases)
        if t.bullet_file is None:
            assert formats.fact_path(t.name, "x") == f"{t.folder}/x.md"
        else:
            path = formats.bullet_path(t.name, "demo")
            assert formats.type_of_system_file(path) == t.name


def test_cli_choices_and_tool_schemas_follow_the_table():
    from dualtrace.agent_tools import TYPES as TOOL_TYPES
    from dualtrace.cli import cli
    from dualtrace.encoder.backends.anthropic import TOOLS

    names = [t.name for t in MEMORY_TYPES]
    recall = next(p for p in cli.commands["recall"].params if p.name == "kind")
    assert list(recall.type.choices) == [*names, "session"]  # + session records
    store_tool = next(t for t in TOOLS if t["name"] == "store_memory")
    assert store_tool["input_schema"]["properties"]["type"]["enum"] == names
    assert list(TOOL_TYPES) == names


def test_the_encoder_prompt_lists_the_types_from_the_table(monkeypatch):
    from dualtrace.encoder.backends import anthropic
    from dualtrace.memfs.types import MEMORY_TYPES, MemoryType

    text = anthropic.system_text("tools")
    for t in MEMORY_TYPES:
        assert f"- {t.name}: {t.meaning} " in text
    assert "- preference: how the human likes to work. Stored as a bullet in system/human.md.\n" in text
    runbook = MemoryType("runbook", "runbooks", (), None, "an operational procedure.")
    monkeypatch.setattr(anthropic, "MEMORY_TYPES", (*MEMORY_TYPES, runbook))
    assert "- runbook: an operational procedure. Folder runbooks/.\n" in anthropic.system_text("tools")
