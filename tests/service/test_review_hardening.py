"""The review sign-in and the HTML the service serves, behind proxies and under attack: the cookies'
Secure flag (a setting; by default from HTTPS as this server or a trusted proxy sees it), the
reports' headers, and sign-in throttling per (key id, client address) and per client address that
no client can turn into a lock-out of a key or of everyone behind a shared proxy. The real app on SQLite."""

from __future__ import annotations

import re
import secrets

import pytest
from fastapi.testclient import TestClient

from framejudge.service.settings import Settings, SettingsError
from framejudge.service.store import create_key
from tests.service.test_review import calibration, review_app

PROXY = ("127.0.0.1", 40000)  # a reverse proxy on the same machine (trusted by default)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def sign_in(client: TestClient, key: str, **headers: str):
    page = client.get("/review/sign-in", headers=headers)
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return client.post("/review/sign-in", data={"api_key": key, "csrf": token, "next": "/review"}, headers=headers,
                       follow_redirects=False)


def cookies_of(response) -> list[str]:
    return [v for k, v in response.headers.multi_items() if k == "set-cookie"]


@pytest.fixture()
def env(tmp_path):
    with review_app(tmp_path) as e:
        e.update(calibration(e))
        yield e


@pytest.mark.parametrize(("setting", "peer", "proto", "secure"), [
    ("auto", PROXY, "https", True),  # TLS ends at the proxy
    ("auto", PROXY, "http", False),
    ("auto", ("203.0.113.9", 5000), "https", False),  # anyone may send the header: not a trusted proxy
    ("on", ("203.0.113.9", 5000), None, True),
    ("off", PROXY, "https", False),
])
def test_the_review_cookies_are_secure_as_the_setting_and_a_trusted_proxy_say(tmp_path, setting, peer, proto, secure):
    with review_app(tmp_path, review_cookie_secure=setting) as env:
        env.update(calibration(env))
        client = TestClient(env["client"].app, client=peer)  # the proxy speaks plain HTTP to the server
        headers = {"X-Forwarded-Proto": proto} if proto else {}
        form = client.get("/review/sign-in", headers=headers)
        token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        client.cookies.clear()  # a Secure cookie comes back through the proxy as the browser sent it
        signed = client.post("/review/sign-in", data={"api_key": env["owner"], "csrf": token, "next": "/review"},
                             headers={**headers, "Cookie": f"framejudge_signin={token}"}, follow_redirects=False)
        assert signed.status_code == 303, signed.text
        made = cookies_of(form) + cookies_of(signed)
        assert [c.split("=")[0] for c in made] == ["framejudge_signin", "framejudge_review", "framejudge_signin"]
        assert all(("; secure" in c.lower()) == secure and "httponly" in c.lower() for c in made), made


def test_the_cookie_settings_are_checked_and_name_their_variable(monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_REVIEW_COOKIE_SECURE", "sometimes")
    with pytest.raises(SettingsError, match="FRAMEJUDGE_REVIEW_COOKIE_SECURE"):
        Settings.from_env()
    monkeypatch.setenv("FRAMEJUDGE_REVIEW_COOKIE_SECURE", "on")
    monkeypatch.setenv("FRAMEJUDGE_TRUSTED_PROXIES", "10.0.0.0/8, proxy.example.com")
    with pytest.raises(SettingsError, match="FRAMEJUDGE_TRUSTED_PROXIES: 'proxy.example.com' is not an IP address"):
        Settings.from_env()
    monkeypatch.setenv("FRAMEJUDGE_TRUSTED_PROXIES", "none")
    assert Settings.from_env().trusted_proxies == [] and Settings.from_env().review_cookie_secure == "on"


def test_the_calibration_report_gets_the_pages_headers(env):
    got = env["client"].get(f"/v1/calibrate/{env['id']}/report", headers=bearer(env["owner"]))
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/html")
    assert got.headers["x-content-type-options"] == "nosniff" and got.headers["x-frame-options"] == "DENY"
    assert got.headers["cache-control"] == "no-store" and got.headers["referrer-policy"] == "no-referrer"
    csp = got.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "script-src" not in csp
    assert "<script" not in got.text  # nothing the policy would have to allow


def test_one_client_behind_a_shared_proxy_cannot_lock_the_others_out(tmp_path):
    with review_app(tmp_path, requests_per_minute=5) as env:
        env.update(calibration(env))
        proxy = TestClient(env["client"].app, client=PROXY)
        attacker, colleague = {"X-Forwarded-For": "198.51.100.7"}, {"X-Forwarded-For": "198.51.100.8"}
        answers = [sign_in(proxy, f"fj_{secrets.token_hex(6)}_{secrets.token_urlsafe(8)}", **attacker).status_code
                   for _ in range(40)]
        assert answers[:30] == [401] * 30 and set(answers[30:]) == {429}
        theirs, mine = (create_key(env["engine"], ["review"], name) for name in ("colleague", "attacker's own"))
        assert sign_in(proxy, theirs, **colleague).status_code == 303  # behind the same proxy
        assert sign_in(proxy, mine, **attacker).status_code == 303  # a right key is no guess
        for _ in range(5):  # a right key signs in only as often as the key may make requests (5 a minute here)
            got = sign_in(proxy, theirs, **colleague)
        assert got.status_code == 429 and "Too many sign-ins" in got.text


def test_guessing_a_keys_secret_stops_that_client_and_never_locks_the_key_out_for_others(env):
    """A key id is no secret (reviewers see each other's in exports and calibration lists): one
    client's failures with it stop that client's tries (its right secret too, so the guessing
    stops), never another client's right secret, nor another client's tries."""
    proxy = TestClient(env["client"].app, client=PROXY)
    key_id = env["owner"].split("_")[1]
    attacker = {"X-Forwarded-For": "198.51.100.7"}
    answers = [sign_in(proxy, f"fj_{key_id}_{secrets.token_urlsafe(8)}", **attacker).status_code for _ in range(12)]
    assert answers[:10] == [401] * 10 and answers[10:] == [429, 429]
    blocked = sign_in(proxy, env["owner"], **attacker)  # refused before it is checked: no oracle for a guesser
    assert blocked.status_code == 429 and "Too many failed sign-ins with this key" in blocked.text
    assert sign_in(proxy, env["owner"], **{"X-Forwarded-For": "192.0.2.1"}).status_code == 303  # its owner
    assert sign_in(proxy, env["second"], **attacker).status_code == 303  # the attacker's own key is no guess
    elsewhere = sign_in(proxy, f"fj_{key_id}_{secrets.token_urlsafe(8)}", **{"X-Forwarded-For": "198.51.100.9"})
    assert elsewhere.status_code == 401 and "Unknown API key." in elsewhere.text  # counted per client
