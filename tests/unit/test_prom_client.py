"""The Prometheus client and source against a local HTTP server: auth, TLS, errors, bad URLs.

Every failure must come back as one SourceError line naming what to fix; the token never shows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import httpx
import pytest

from tests.promharness import free_port
from tui.core.sources.base import SourceError
from tui.core.sources.promclient import BearerToken, PromClient, describe_connect_error, normalise_url
from tui.core.sources.prometheus import PrometheusSource, add_arguments, from_args

OK_EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}
SECRET = "s3cr3t-t0ken-value"


@dataclass
class Reply:
    status: int = 200
    body: object = field(default_factory=lambda: OK_EMPTY)
    headers: dict = field(default_factory=dict)
    delay: float = 0.0


class FakeApi:
    """A local HTTP server that answers every request with `reply(request)` and records them."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.reply = lambda req: Reply()
        self.requests: list[dict] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                query = parse_qs(body) if body else parse_qs(self.path.partition("?")[2])
                req = {"method": self.command, "path": self.path.split("?")[0], "headers": dict(self.headers),
                       "query": query.get("query", [""])[0]}
                api.requests.append(req)
                r = api.reply(req)
                if r.delay:
                    time.sleep(r.delay)
                data = r.body if isinstance(r.body, (bytes, str)) else json.dumps(r.body)
                data = data.encode() if isinstance(data, str) else data
                try:
                    self.send_response(r.status)
                    for k, v in r.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _serve

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def api():
    a = FakeApi()
    yield a
    a.stop()


async def error_of(coro) -> str:
    with pytest.raises(SourceError) as ei:
        await coro
    msg = str(ei.value)
    assert "\n" not in msg and SECRET not in msg
    return msg


# -- URLs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("localhost:9090", "missing http:// or https://"),
        ("prometheus.monitoring", "missing http:// or https://"),
        ("ftp://host/x", "missing http:// or https://"),
        ("http://", "no host"),
        ("http://host:99999", "bad Prometheus URL"),
        ("http://host:port", "bad Prometheus URL"),
        ("", "missing http://"),
    ],
)
def test_bad_urls_are_refused_with_the_expected_form(url, fragment):
    with pytest.raises(SourceError) as ei:
        normalise_url(url)
    assert fragment in str(ei.value)
    assert "http(s)://host[:port]" in str(ei.value)


@pytest.mark.parametrize(
    "url, base",
    [
        ("http://prom:9090/", "http://prom:9090"),
        ("http://prom:9090/api/v1/query", "http://prom:9090"),
        ("https://thanos.example/prometheus/graph", "https://thanos.example/prometheus"),
        ("http://prom:9090/select/0/prometheus/api/v1", "http://prom:9090/select/0/prometheus"),
    ],
)
def test_pasted_api_or_ui_urls_are_normalised(url, base):
    assert normalise_url(url) == base


def test_credentials_in_the_url_are_not_displayed():
    src = PrometheusSource("http://user:pw@127.0.0.1:9/", None)
    assert "pw" not in src.description and "user" not in src.description


# -- HTTP errors --------------------------------------------------------------------------------


async def test_401_without_token_says_which_flags_give_one(api):
    api.reply = lambda req: Reply(401, "Unauthorized")
    c = PromClient(api.url)
    msg = await error_of(c.query("up"))
    await c.close()
    assert "401" in msg and "--prom-token-env" in msg and "--prom-token-file" in msg


async def test_token_from_env_is_sent_but_never_shown(api, monkeypatch):
    monkeypatch.setenv("KVW_TEST_TOKEN", SECRET)
    api.reply = lambda req: Reply(401, "bad token")
    src = PrometheusSource(api.url, None, token_env="KVW_TEST_TOKEN")
    msg = await error_of(src.start())
    await src.close()
    assert api.requests[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert "rejected the bearer token from --prom-token-env KVW_TEST_TOKEN" in msg
    assert SECRET not in repr(src) and SECRET not in repr(src.client.token) and SECRET not in src.description


async def test_token_file_is_reread_when_rotated(api, tmp_path):
    f = tmp_path / "token"
    f.write_text("first\n")
    c = PromClient(api.url, token=BearerToken(file=str(f)))
    await c.query("up")
    time.sleep(0.01)
    f.write_text("second")
    import os

    os.utime(f, (time.time() + 5, time.time() + 5))  # a new mtime even on coarse clocks
    await c.query("up")
    await c.close()
    assert [r["headers"]["Authorization"] for r in api.requests] == ["Bearer first", "Bearer second"]


async def test_missing_token_sources_are_clear(api, tmp_path, monkeypatch):
    monkeypatch.delenv("KVW_NO_SUCH_VAR", raising=False)
    c = PromClient(api.url, token=BearerToken(env="KVW_NO_SUCH_VAR"))
    assert "KVW_NO_SUCH_VAR" in await error_of(c.query("up"))
    await c.close()
    c = PromClient(api.url, token=BearerToken(file=str(tmp_path / "absent")))
    msg = await error_of(c.query("up"))
    await c.close()
    assert "cannot read token file" in msg and "No such file" in msg
    with pytest.raises(SourceError, match="not both"):
        BearerToken(env="A", file="B")


async def test_403_404_redirect_and_html(api):
    c = PromClient(api.url)
    api.reply = lambda req: Reply(403, "Forbidden")
    assert "403 Forbidden" in await error_of(c.query("up"))
    api.reply = lambda req: Reply(404, "404 page not found")
    assert "no Prometheus query API" in await error_of(c.query("up"))
    api.reply = lambda req: Reply(302, "", {"Location": "https://sso.example/login"})
    assert "redirected to https://sso.example/login" in await error_of(c.query("up"))
    api.reply = lambda req: Reply(200, "<html><body>Grafana</body></html>", {"Content-Type": "text/html"})
    assert "did not answer like a Prometheus API" in await error_of(c.query("up"))
    await c.close()


async def test_query_errors_carry_prometheus_reason_cleaned(api):
    c = PromClient(api.url)
    api.reply = lambda req: Reply(400, {"status": "error", "errorType": "bad_data",
                                        "error": "parse error: unexpected \x1b[31m}"})
    msg = await error_of(c.query("up{"))
    assert "rejected the query (bad_data)" in msg and "\x1b" not in msg
    api.reply = lambda req: Reply(503, {"status": "error", "errorType": "timeout", "error": "query timed out"})
    assert "could not answer in time" in await error_of(c.query("up"))
    api.reply = lambda req: Reply(502, "Bad Gateway")
    assert "failed (502" in await error_of(c.query("up"))
    await c.close()


async def test_timeout_names_the_limit(api):
    api.reply = lambda req: Reply(delay=1.5)
    c = PromClient(api.url, timeout=0.3)
    t0 = time.monotonic()
    msg = await error_of(c.query("up"))
    await c.close()
    assert "did not answer within 0.3s" in msg
    assert time.monotonic() - t0 < 1.4


async def test_connection_refused():
    c = PromClient(f"http://127.0.0.1:{free_port()}")
    msg = await error_of(c.query("up"))
    await c.close()
    assert "connection refused" in msg


def test_dns_failure_message():
    # The exception httpx raises when getaddrinfo fails (a real lookup would leave 127.0.0.1).
    e = httpx.ConnectError("[Errno -2] Name or service not known")
    msg = describe_connect_error("http://prometheus.nowhere:9090", e)
    assert msg == "cannot resolve Prometheus host 'prometheus.nowhere' (DNS): check the URL"
    e = httpx.ConnectError("[Errno -3] Temporary failure in name resolution")
    assert "cannot resolve" in describe_connect_error("http://p:9090", e)


async def test_post_refused_falls_back_to_get(api):
    api.reply = lambda req: Reply(405, "Method Not Allowed") if req["method"] == "POST" else Reply()
    c = PromClient(api.url)
    await c.query("up")
    await c.query("up")
    await c.close()
    assert [r["method"] for r in api.requests] == ["POST", "GET", "GET"]
    assert api.requests[-1]["query"] == "up"


# -- TLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed: cannot make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
         "-out", str(d / "cert.pem"), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    return d / "cert.pem", d / "key.pem"


@pytest.fixture
def tls_api(cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)
    a = FakeApi(tls=ctx)
    yield a
    a.stop()


async def test_untrusted_certificate_suggests_ca_or_insecure(tls_api):
    c = PromClient(tls_api.url)
    msg = await error_of(c.query("up"))
    await c.close()
    assert "not trusted" in msg and "--prom-ca" in msg and "--prom-insecure" in msg


async def test_custom_ca_and_insecure_both_work(tls_api, cert):
    c = PromClient(tls_api.url, ca_file=str(cert[0]))
    assert await c.query("up") == []
    await c.close()
    c = PromClient(tls_api.url, insecure=True)
    assert await c.query("up") == []
    await c.close()


def test_bad_ca_file_and_conflicting_flags(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        PromClient("https://127.0.0.1:1", ca_file=str(tmp_path / "nope.pem"))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(SourceError, match="not a PEM"):
        PromClient("https://127.0.0.1:1", ca_file=str(junk))
    with pytest.raises(SourceError, match="not both"):
        PromClient("https://127.0.0.1:1", ca_file=str(junk), insecure=True)


async def test_plain_http_server_behind_https_url(api):
    c = PromClient(api.url.replace("http://", "https://"), timeout=3)
    msg = await error_of(c.query("up"))
    await c.close()
    assert "TLS handshake" in msg or "closed the connection" in msg


# -- the source over a fake API -------------------------------------------------------------------


def vector(rows):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [1000.0, str(v)]} for m, v in rows]}}


async def test_poll_raises_only_when_the_essential_query_fails(api):
    rows = [({"__name__": "vllm:kv_cache_usage_perc", "namespace": "ns", "pod": "p1", "engine": "0"}, 0.5)]

    def reply(req):
        q = req["query"]
        if "histogram_quantile" in q:
            return Reply(422, {"status": "error", "errorType": "execution", "error": "too many samples"})
        if "vllm:kv_cache_usage_perc|" in q:  # the raw scalars query
            return Reply(200, vector(rows))
        return Reply()

    api.reply = reply
    src = PrometheusSource(api.url, '{namespace="ns"}', clock=lambda: 1000.0)
    (s,) = await src.poll()
    assert s.replica == "p1" and s.sample.value("kv_usage") == 0.5
    await src._quantile_task  # quantiles come in the background and show from the next poll
    await src.poll()
    assert any("latency quantiles unavailable" in w and "too many samples" in w for w in src.warnings)
    # Every vLLM query carries the user's match and drops the production-stack router's series;
    # the GPU query has its own (--gpu-match): exporters live in other namespaces.
    vllm_queries = [r["query"] for r in api.requests if "DCGM_FI_DEV_FB_USED" not in r["query"]]
    # scalars, rates, cache config, 7 quantile families; then scalars and rates again
    assert len(vllm_queries) == len(api.requests) - 2 == 12
    assert all('namespace="ns"' in q and 'server=""' in q for q in vllm_queries)
    api.reply = lambda req: Reply(403, "Forbidden")
    assert "403" in await error_of(src.poll())
    await src.close()


async def test_an_unchanged_sample_is_not_returned_twice_and_vanished_replicas_report(api):
    state = {"rows": [({"__name__": "vllm:num_requests_running", "namespace": "ns", "pod": "p1"}, 3.0),
                      ({"kvw": "sample_ts", "namespace": "ns", "pod": "p1"}, 990.0)]}
    api.reply = lambda req: Reply(200, vector(state["rows"])) if "|" in req["query"] else Reply()
    now = [1000.0]
    src = PrometheusSource(api.url, None, clock=lambda: now[0])
    first = await src.poll()
    assert [(s.replica, s.ts) for s in first] == [("p1", 990.0)]
    now[0] = 1001.0
    assert await src.poll() == []  # Prometheus has not scraped p1 again
    state["rows"] = []
    now[0] = 1002.0
    (gone,) = await src.poll()
    assert gone.replica == "p1" and not gone.ok and "no series" in gone.error
    assert any("no vLLM series match" in w for w in src.warnings)
    await src.close()


def test_cli_flags_build_the_source(monkeypatch):
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--prometheus", "https://prom.example:9090", "--match", '{namespace="inference"}',
                         "--prom-token-env", "PROM_TOKEN", "--prom-insecure", "--prom-timeout", "4"])
    src = from_args(args)
    assert src.match == 'namespace="inference"'
    assert src.client.timeout == 4.0 and src.client.token.env == "PROM_TOKEN"
    assert src.description == 'prometheus https://prom.example:9090 {namespace="inference"}'
    with pytest.raises(SourceError, match="bad --match"):
        from_args(p.parse_args(["--prometheus", "http://p:9090", "--match", "namespace=inference"]))


async def test_engine_config_is_fetched_again_when_a_replica_has_none(api):
    rows = [({"__name__": "vllm:num_requests_running", "namespace": "ns", "pod": "p1"}, 3.0)]
    config = {"rows": []}

    def reply(req):
        q = req["query"]
        if q.startswith("vllm:cache_config_info"):
            return Reply(200, vector(config["rows"]))
        return Reply(200, vector(rows)) if "|" in q else Reply()

    api.reply = reply
    now = [1000.0]
    src = PrometheusSource(api.url, None, clock=lambda: now[0], gpu=False, quantiles_every_s=1e9)
    await src.poll()  # the config query answers nothing yet (first scrape not in)
    config["rows"] = [({"__name__": "vllm:cache_config_info", "namespace": "ns", "pod": "p1",
                        "num_gpu_blocks": "27915"}, 1.0)]
    rows.append(({"kvw": "sample_ts", "namespace": "ns", "pod": "p1"}, 1.0))  # a new scrape
    now[0] = 1010.0
    await src.poll()  # too soon to ask again
    rows[-1] = ({"kvw": "sample_ts", "namespace": "ns", "pod": "p1"}, 2.0)
    now[0] = 1031.0
    (s,) = await src.poll()
    await src.close()
    asked = [r for r in api.requests if r["query"].startswith("vllm:cache_config_info")]
    assert len(asked) == 2
    assert s.sample.cache_config == {"num_gpu_blocks": "27915"}


async def test_a_transport_error_naming_a_known_secret_is_redacted():
    """A failure whose text carries the token (a proxy echoing headers, say) never shows it.

    The connect-error path meant to pass the text through the secret scrubber, but a local
    URL-only `redact` shadowed it (found by ruff F811), so remembered secrets went out as-is.
    """
    from tui.core.textsafe import remember_secret

    remember_secret(SECRET)

    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ProxyError(f"proxy refused: Proxy-Authorization: Bearer-ish {SECRET}")

    client = PromClient("http://127.0.0.1:9")
    await client._client.aclose()
    client._client = httpx.AsyncClient(transport=httpx.MockTransport(fail))
    try:
        with pytest.raises(SourceError) as err:
            await client.query("up")
    finally:
        await client.close()
    assert SECRET not in str(err.value)
    assert "redacted" in str(err.value)
