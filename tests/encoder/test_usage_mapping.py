"""One mapping from the API's usage fields to ours (encoder.backends.api_tokens)."""

from __future__ import annotations

from dualtrace.encoder.backends import Usage, api_tokens
from tests.conftest import package_files_spelling


def test_api_usage_maps_to_our_four_counts_and_nulls_are_zero():
    reply = {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": None,
             "cache_creation_input_tokens": 900, "service_tier": "standard"}
    assert api_tokens(reply) == {"input_tokens": 120, "output_tokens": 30,
                                 "cache_read_tokens": 0, "cache_write_tokens": 900}
    assert api_tokens(None) == dict.fromkeys(api_tokens({}), 0)
    usage = Usage()
    usage.add_tokens(reply)
    usage.add_tokens({"input_tokens": 5, "cache_read_input_tokens": 900})
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
            usage.cache_write_tokens) == (125, 30, 900, 900)


def test_only_one_module_spells_the_api_usage_field_names():
    assert package_files_spelling("cache_creation_input_tokens") == ["encoder/backends/__init__.py"]
