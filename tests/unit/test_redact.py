"""The API key masked whole, and a prefix of it masked where a cut ended the message."""

from __future__ import annotations

from tui.engine.redact import display_url, mask_secret
from tui.engine.stream.openai import error_message, one_line

KEY = "sk-" + "abcdefghij" * 20  # 203 characters


def test_whole_key_masked_everywhere_in_the_text() -> None:
    assert mask_secret(f"bad key {KEY}, really {KEY}", KEY) == "bad key ***, really ***"
    assert mask_secret("nothing here", KEY) == "nothing here"
    assert mask_secret("anything", None) == "anything"


def test_a_key_cut_by_the_line_limit_leaks_no_prefix() -> None:
    body = f'{{"error": {{"message": "Incorrect API key provided: {KEY}. See the docs."}}}}'.encode()
    cut_first = error_message(body)  # what cutting before masking gives
    assert KEY[:40] in cut_first  # the leak the issue saw
    masked = mask_secret(cut_first, KEY)  # the safety net alone
    assert KEY[:4] not in masked and masked.endswith("***…")
    done_right = error_message(mask_secret(body.decode(), KEY).encode())
    assert "***" in done_right and KEY[:4] not in done_right


def test_short_common_endings_are_left_alone() -> None:
    assert mask_secret(one_line("the end: sk-"), KEY) == "the end: sk-"  # 3 characters: not a key


def test_a_url_is_shown_without_credentials_or_query_values() -> None:
    assert display_url("http://user:pw@host:8000/v1") == "http://host:8000/v1"
    assert display_url("https://gw.example/v1?api-key=sk-123&api-version=2") == (
        "https://gw.example/v1?api-key=hidden&api-version=hidden"
    )
    assert display_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"  # nothing to hide
