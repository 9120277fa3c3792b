"""The simulator's API-key rules are SGLang 0.5.23's (srt/utils/auth.py, decide_request_auth).

Issue 18 #7 asked for /metrics to need the key "as real SGLang does". Real SGLang does not: its
middleware lets /health*, /ready* and /metrics* through unconditionally ("to support k8s probes
and Prometheus scraping without embedding secrets"), so the simulator keeps /metrics open too and
these tests pin that, along with the rest of the middleware's rules the simulator lacked
(x-api-key, a case-insensitive Bearer, 403 on force-admin endpoints without an admin key)."""

from __future__ import annotations

import httpx
import pytest

from sgltui.core.api_auth import decide

K, A = "user-key", "admin-key"
B = {"Authorization": f"Bearer {K}"}

# (method, path, Authorization, x-api-key, api_key, admin_api_key) -> refusal (None = allowed)
RULES = [
    ("GET", "/metrics", None, None, K, A, None),
    ("GET", "/metrics/", None, None, K, None, None),
    ("GET", "/health_generate", None, None, K, A, None),
    ("GET", "/ready", None, None, K, A, None),
    ("OPTIONS", "/v1/models", None, None, K, A, None),
    ("GET", "/v1/models", None, None, K, None, 401),
    ("GET", "/v1/models", f"Bearer {K}", None, K, None, None),
    ("GET", "/v1/models", f"bearer {K}", None, K, None, None),
    ("GET", "/v1/models", f"BEARER {K}", None, K, None, None),
    ("GET", "/v1/models", f"Basic {K}", None, K, None, 401),
    ("GET", "/v1/models", None, K, K, None, None),
    ("GET", "/v1/models", None, "wrong", K, None, 401),
    ("GET", "/v1/models", f"Bearer {A}", None, K, A, 401),  # admin key is not a user key
    ("GET", "/v1/models", None, None, None, A, None),  # only an admin key: normal is open
    ("POST", "/flush_cache", f"Bearer {K}", None, K, A, 401),
    ("POST", "/flush_cache", f"Bearer {A}", None, K, A, None),
    ("POST", "/flush_cache", f"Bearer {K}", None, K, None, None),
    ("POST", "/flush_cache", None, None, None, None, None),
    ("POST", "/flush_cache", None, None, None, A, 401),
    ("GET", "/hicache/storage-backend", f"Bearer {K}", None, K, None, 403),
    ("GET", "/hicache/storage-backend", None, None, None, None, 403),
    ("GET", "/hicache/storage-backend", f"Bearer {K}", None, K, A, 401),
    ("GET", "/hicache/storage-backend", f"Bearer {A}", None, K, A, None),
]


@pytest.mark.parametrize("method,path,authz,x_key,api_key,admin,refusal", RULES)
def test_decisions_follow_sglangs_middleware(method, path, authz, x_key, api_key, admin, refusal):
    assert decide(method, path, authz, x_key, api_key, admin) == refusal


def test_a_live_simulator_applies_them(sim_server):
    sim = sim_server("--api-key", K, "--enable-metrics")
    get = lambda path, **h: httpx.get(sim.url + path, headers=h, timeout=30).status_code  # noqa: E731
    assert get("/metrics") == 200, "open, as on SGLang (Prometheus scrapes without the key)"
    assert get("/v1/models") == 401
    assert get("/v1/models", **{"x-api-key": K}) == 200
    assert get("/v1/models", Authorization=f"bearer {K}") == 200
    refused = httpx.get(sim.url + "/hicache/storage-backend", headers=B, timeout=30)
    assert refused.status_code == 403 and refused.json() == {"error": "Forbidden"}
    assert httpx.get(sim.url + "/v1/models", timeout=30).json() == {"error": "Unauthorized"}
