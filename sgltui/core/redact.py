"""Keep secrets (API keys, tokens, passwords) off disk and out of reports.

Secrets reach sgltui in four shapes, and each gets its own rule because a single regex over
everything would either miss some or blank out harmless text:

* argv: ``--api-key K`` / ``--api-key=K`` (also ``--admin-api-key``, ``--ssl-keyfile-password``);
* SGLang's own start-up line ``server_args=ServerArgs(... api_key='K', ...)`` and JSON dumps
  such as ``"api_key": "K"`` (``/server_info``);
* environment variables whose name has a KEY/TOKEN/SECRET/PASSWORD part (``HF_TOKEN``);
* URLs (``https://user:pass@host``, ``?token=...``) and ``Authorization:`` headers.

A :class:`Redactor` also remembers every secret value it has seen (or been told about with
:meth:`Redactor.add_secret`) and blanks that literal value wherever it shows up later, e.g. in a
traceback that echoes the key without its flag name.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
_PLAIN = frozenset({int, float, bool})  # exactly these types: obj() passes them as they are

# Literal secrets shorter than this are not replaced as bare substrings: a one- or two-character
# "key" would otherwise blank every occurrence of that letter in every log. Such keys are still
# redacted wherever they appear next to a flag, field name, header or URL.
MIN_LITERAL_LEN = 4

# Command-line flags whose value is a secret. SGLang 0.5.23 has exactly --api-key,
# --admin-api-key and --ssl-keyfile-password; the generic suffixes cover other tools' spellings
# without catching SGLang's many "...-tokens" size flags.
_SECRET_FLAG = re.compile(
    r"^--?(?:[\w-]*api[-_]?key|[\w-]*password|[\w-]*passwd|[\w-]*secret|"
    r"(?:hf|auth|access|bearer|api)[-_]token|token)$",
    re.IGNORECASE,
)

# Field names (python repr / JSON / TOML keys) whose value is a secret. Lowercase snake/kebab
# names only: "key" alone is the TUI hot-swap key and must survive.
_SECRET_FIELD = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|password|passwd|secret|(?:hf|auth|access|bearer|api|refresh)[_-]?token)$"
    r"|^(?:token|authorization|x[_-]api[_-]key)$",
    re.IGNORECASE,
)

# Environment variable name parts that mark a secret. Compared part by part (split on "_"), so
# TOKENIZERS_PARALLELISM or KEYBOARD_LAYOUT are left alone while HF_TOKEN, OPENAI_API_KEY and
# AWS_SECRET_ACCESS_KEY are caught.
_SECRET_ENV_PARTS = frozenset(
    {
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
    }
)
_ENV_PWD_EXEMPT = frozenset({"PWD", "OLDPWD"})  # the shell's working directory, not a password

# name='value' / name="value" / "name": "value" / name: value / name=value.
_FIELD_ASSIGN = re.compile(
    r"""(?P<name>["']?(?P<bare>[A-Za-z][\w-]*)["']?\s*[:=]\s*)"""
    r"""(?P<val>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s,;)}\]&'"]+)"""
)
# --flag value / --flag=value inside free text (a logged command line).
_FLAG_IN_TEXT = re.compile(
    r"(?P<flag>(?<![\w-])--?[A-Za-z][\w-]*)(?P<sep>=|\s+)(?P<val>'[^']*'|\"[^\"]*\"|[^\s'\"]+)"
)
# Authorization: Bearer xxx / Authorization: Basic xxx / Authorization: xxx, also x-api-key: xxx.
_AUTH_HEADER = re.compile(
    r"(?P<head>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?)"
    r"(?P<val>[^\s\"',;]+)",
    re.IGNORECASE,
)
_API_KEY_HEADER = re.compile(
    r"(?P<head>\bx-api-key\b[\"']?\s*[:=]\s*[\"']?)(?P<val>[^\s\"',;]+)", re.IGNORECASE
)
# scheme://user:password@host
_URL_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][\w+.-]*://[^\s/:@]+:)(?P<val>[^\s/@]+)(?P<at>@)")
# ?token=...&api_key=... in URLs
_URL_QUERY = re.compile(
    r"(?P<head>[?&](?:[\w.-]*(?:token|api[_-]?key|apikey|secret|password|passwd|signature|sig|key))=)(?P<val>[^&\s#\"']+)",
    re.IGNORECASE,
)
# KEY=value in free text (a logged `env` dump or shell line): only for secret-looking env names.
_ENV_ASSIGN = re.compile(
    r"(?P<head>(?<![\w-])(?P<name>[A-Z][A-Z0-9_]*)=)(?P<val>[^\s'\"]+|'[^']*'|\"[^\"]*\")"
)


_HEADER_NAMES = frozenset({"authorization", "proxy-authorization", "x-api-key", "x_api_key"})


def is_secret_flag(flag: str) -> bool:
    """True for a command-line flag (``--api-key``) whose value is a secret."""
    return bool(_SECRET_FLAG.match(flag.split("=", 1)[0]))


def is_secret_env(name: str) -> bool:
    """True for an environment variable name that holds a secret (HF_TOKEN, OPENAI_API_KEY)."""
    if name.upper() in _ENV_PWD_EXEMPT:
        return False
    parts = [p for p in re.split(r"[_\W]+", name.upper()) if p]
    return any(p in _SECRET_ENV_PARTS for p in parts) or "APIKEY" in name.upper().replace("_", "")


def is_secret_field(name: str) -> bool:
    """True for a field name (``api_key``, ``admin-api-key``, ``authorization``) holding a secret.

    UPPER_CASE names are treated as environment variables (the env rule applies)."""
    if name.isupper():
        return is_secret_env(name)
    return bool(_SECRET_FIELD.search(name))


_NOT_A_VALUE = frozenset({"None", "null", "''", '""', "false", "true", "False", "True"})


def _value_span(m: re.Match[str]) -> tuple[int, int]:
    """The span of group "val" without its quotes."""
    a, b = m.span("val")
    v = m["val"]
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return a + 1, b - 1
    return a, b


def _merge(s: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if b <= a or s[a:b] == MASK or set(s[a:b]) == {"*"}:
            continue  # empty, or already masked (re-redacting a redacted line is a no-op)
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


class Redactor:
    """Redacts text, argv lists, env mappings and whole JSON-like objects.

    Thread-safe: the agent's samplers and its event loop may both record through one instance.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._literal: re.Pattern[str] | None = None
        for s in secrets:
            self.add_secret(s)

    # -- known secrets -------------------------------------------------------------------------
    def add_secret(self, secret: str | None) -> None:
        """Blank this literal value everywhere from now on."""
        if not secret or not isinstance(secret, str):
            return
        secret = _unquote(secret.strip())
        if secret == MASK or len(secret) < MIN_LITERAL_LEN:
            return
        with self._lock:
            if secret in self._secrets:
                return
            self._secrets.add(secret)
            # Longest first, so a key that contains another key is blanked whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._literal = re.compile("|".join(re.escape(s) for s in ordered))

    @property
    def secrets_count(self) -> int:
        return len(self._secrets)

    # -- text ---------------------------------------------------------------------------------
    def text(self, s: str) -> str:
        """Redact every rule's match in a free-text string (a log line, an error message).

        Values found in free text are masked but not learnt as literal secrets: a loose match
        ("password: required") must not blank the word "required" everywhere afterwards. Values
        from argv, env and structured fields are learnt (see :meth:`argv`, :meth:`env`)."""
        if not s:
            return s
        spans = self.secret_spans(s)
        if not spans:
            return s
        out = []
        pos = 0
        for a, b in spans:
            out.append(s[pos:a])
            out.append(MASK)
            pos = b
        out.append(s[pos:])
        return "".join(out)

    def secret_spans(self, s: str) -> list[tuple[int, int]]:
        """Sorted, merged (start, end) ranges of secret values in `s` (quotes not included).

        The server-log scrubber overwrites exactly these ranges in place."""
        spans: list[tuple[int, int]] = []
        literal = self._literal
        if literal is not None:
            spans.extend(m.span() for m in literal.finditer(s))
        if _might_hold_secret(s):
            for rx in (_AUTH_HEADER, _API_KEY_HEADER, _URL_USERINFO, _URL_QUERY):
                spans.extend(m.span("val") for m in rx.finditer(s))
            for m in _FLAG_IN_TEXT.finditer(s):
                if is_secret_flag(m["flag"]):
                    spans.append(_value_span(m))
            for m in _FIELD_ASSIGN.finditer(s):
                bare = m["bare"]
                # Headers have their own rule (which keeps the "Bearer" scheme word readable).
                # A bare "token" in free text is a count far more often than a secret (SGLang's
                # "#token: 8000"); structured fields named "token" are still masked by obj().
                if (
                    bare.isupper()
                    or bare.lower() in _HEADER_NAMES
                    or bare.lower() == "token"
                    or not is_secret_field(bare)
                ):
                    continue
                if m["val"] in _NOT_A_VALUE:
                    continue
                spans.append(_value_span(m))
            for m in _ENV_ASSIGN.finditer(s):
                if is_secret_env(m["name"]):
                    spans.append(_value_span(m))
        return _merge(s, spans)

    # -- structures ---------------------------------------------------------------------------
    def argv(self, argv: Iterable[Any]) -> list[Any]:
        """Redact a command line: the word after a secret flag, ``--flag=secret``, and text rules."""
        out: list[Any] = []
        hide_next = False
        for word in argv:
            if not isinstance(word, str):
                out.append(word)
                hide_next = False
                continue
            if hide_next:
                self.add_secret(word)
                out.append(MASK)
                hide_next = False
                continue
            if word.startswith("-") and is_secret_flag(word):
                if "=" in word:
                    flag, value = word.split("=", 1)
                    self.add_secret(value)
                    out.append(f"{flag}={MASK}")
                else:
                    out.append(word)
                    hide_next = True
                continue
            out.append(self.text(word))
        return out

    def env(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """Redact the values of secret-looking environment variables (and text rules elsewhere)."""
        out: dict[str, Any] = {}
        for name, value in env.items():
            if isinstance(value, str) and value and is_secret_env(str(name)):
                self.add_secret(value)
                out[name] = MASK
            else:
                out[name] = self.obj(value)
        return out

    def obj(self, value: Any, _key: str | None = None) -> Any:
        """Redact a JSON-like value recursively (an event, a sample, a profile dump).

        Lists of strings are treated as argv (so ``["--api-key", "K"]`` loses K); dict values
        under secret-looking keys are masked; every other string goes through :meth:`text`.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if v is None or type(v) in _PLAIN:  # a number: nothing in it to hide
                    out[k] = v  # (a sample's thousand readings each second, issue 39)
                    continue
                ks = str(k)
                if isinstance(v, str) and v and is_secret_field(ks):
                    self.add_secret(v)
                    out[k] = MASK
                else:
                    out[k] = self.obj(v, ks)
            return out
        if isinstance(value, (list, tuple)):
            if value and all(isinstance(w, str) for w in value):
                return self.argv(value)
            return [v if v is None or type(v) in _PLAIN else self.obj(v) for v in value]
        return value

    def lines(self, lines: Iterable[str]) -> Iterable[str]:
        """Redact an iterable of log lines lazily (reports, log copies)."""
        for line in lines:
            yield self.text(line)


# Cheap pre-check: could any rule match? Most log lines cannot (SGLang's batch stats say
# "#token: 8000" and "token usage", uvicorn's access lines name no secret), and skipping the rules
# for them keeps redaction at a few microseconds a line (bench/bench_session.py). Substring
# tests on the lowered line are far cheaper than one big alternation regex.
_HINT_WORDS = ("key", "secret", "pass", "auth", "pwd", "credential", "sig", "bearer", "@")


def _might_hold_secret(s: str) -> bool:
    low = s.lower()
    for word in _HINT_WORDS:
        if word in low:
            return True
    # "token" alone is a count ("#token: 8000"); only "_token", "-token" or "token=" can be a secret.
    i = low.find("token")
    while i >= 0:
        if (i and low[i - 1] in "-_") or low.startswith("token=", i):
            return True
        i = low.find("token", i + 5)
    return False


# Stateless helpers for one-off use (reports, CLI): they do not remember values across calls.
def redact_text(s: str, secrets: Iterable[str] = ()) -> str:
    return Redactor(secrets).text(s)


def redact_argv(argv: Iterable[Any], secrets: Iterable[str] = ()) -> list[Any]:
    return Redactor(secrets).argv(argv)


def redact_env(env: Mapping[str, Any], secrets: Iterable[str] = ()) -> dict[str, Any]:
    return Redactor(secrets).env(env)


def redact_obj(value: Any, secrets: Iterable[str] = ()) -> Any:
    return Redactor(secrets).obj(value)
