"""Issue 10 defect 2: a bearer token is validated when read and never shown in any message."""

from __future__ import annotations

import pytest

from tui.core.sources.base import SourceError
from tui.core.sources.promclient import BearerToken, checked_token
from tui.core.textsafe import redact


def test_one_trailing_newline_is_dropped() -> None:
    assert checked_token("tok-A\n", "x") == "tok-A"
    assert checked_token("tok-A\r\n", "x") == "tok-A"
    assert checked_token("tok-A", "x") == "tok-A"


@pytest.mark.parametrize("raw", ["tok-A\nSECRET-B-1234", "tok-A\nSECRET-B-1234\n", "tok\x1b[2JSECRET-B-1234",
                                 "tok-A\n\n", "SECRET-B-1234\ttab"])
def test_other_control_characters_are_refused_without_the_token(raw: str) -> None:
    with pytest.raises(SourceError) as e:
        checked_token(raw, "token file /t (--prom-token-file)")
    msg = str(e.value)
    assert "token file /t" in msg and "SECRET-B" not in msg and "tok" not in msg.replace("token", "")


def test_a_token_file_rotated_to_a_bad_value_is_refused(tmp_path) -> None:
    f = tmp_path / "tok"
    f.write_text("good-token\n")
    t = BearerToken(file=str(f))
    assert t.value() == "good-token"
    f.write_text("good-token\nSECRET-ROTATED\n")
    import os
    os.utime(f, (1, 1))  # a new mtime even within the clock's resolution
    with pytest.raises(SourceError) as e:
        t.value()
    assert "SECRET-ROTATED" not in str(e.value)


def test_redact_masks_authorization_values_and_known_secrets() -> None:
    assert "abc.def" not in redact('{"Authorization": "Bearer abc.def"}')
    assert "dXNlcjpw" not in redact("Authorization: Basic dXNlcjpw")
    assert "zz-secret" not in redact("Illegal header value b'Bearer zz-secret'")
    assert redact("the bearer token from --prom-token-env X") == "the bearer token from --prom-token-env X"
    checked_token("rememb-Ered-77\n", "x")
    assert redact("odd library text rememb-Ered-77 here") == "odd library text <redacted> here"
    assert "rememb" not in str(SourceError("quoting rememb-Ered-77"))


def test_redact_leaves_out_a_urls_userinfo_wherever_it_appears() -> None:
    # an httpx or proxy message may quote the URL it was given, credentials and all
    said = redact("ConnectError for url 'https://ops:hunter2@vllm-0:8000/metrics' via http://u:p@proxy:3128")
    assert "hunter2" not in said and "u:p@" not in said, said
    assert "https://vllm-0:8000/metrics" in said and "http://proxy:3128" in said, said
    assert redact("mail ops@example.com") == "mail ops@example.com"  # not a URL: kept
