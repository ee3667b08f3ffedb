"""Who may use the dashboard: authentication (a token or HTTP basic auth, read from a file
or the environment, never from the command line), the start-time rules for non-loopback
addresses, the Host check against DNS rebinding, and the CSRF check of every POST."""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import os
from dataclasses import dataclass
from typing import Mapping, Optional
from urllib.parse import urlsplit

TOKEN_ENV = "RMQ_DASHBOARD_TOKEN"
BASIC_ENV = "RMQ_DASHBOARD_BASIC_AUTH"
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


@dataclass(frozen=True)
class Auth:
    """A bearer token (also taken as the password of HTTP basic auth, any user name, so a
    browser can use it) and/or a basic-auth `user:password` pair."""
    token: Optional[str] = None
    basic: Optional[tuple[str, str]] = None

    @classmethod
    def load(cls, token_file: Optional[str] = None, basic_auth_file: Optional[str] = None,
             env: Mapping[str, str] = os.environ) -> "Auth":
        token = _read(token_file) if token_file else env.get(TOKEN_ENV) or None
        pair = _read(basic_auth_file) if basic_auth_file else env.get(BASIC_ENV) or None
        basic = None
        if pair is not None:
            user, sep, password = pair.partition(":")
            if not sep or not user or not password:
                raise ValueError("basic auth must be given as user:password")
            basic = (user, password)
        if token is not None and len(token) < 16:
            raise ValueError("the token must be at least 16 characters")
        return cls(token, basic)

    @property
    def configured(self) -> bool:
        return self.token is not None or self.basic is not None

    def allows(self, authorization: Optional[str]) -> bool:
        if not self.configured:
            return True
        scheme, _, value = (authorization or "").partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and self.token is not None:
            return _same(value.strip(), self.token)
        if scheme != "basic":
            return False
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode(
                "utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if self.token is not None and _same(password, self.token):
            return True
        return self.basic is not None and _same(user, self.basic[0]) and _same(
            password, self.basic[1])


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def start_refusal(host: str, writable: bool, auth: Auth) -> Optional[str]:
    """Why the dashboard must not start on `host`, or None when it may."""
    if is_loopback(host) or auth.configured:
        return None
    how = (f"put a token in a file and pass --token-file FILE (or set {TOKEN_ENV}), or "
           f"user:password in a file and pass --basic-auth-file FILE (or set {BASIC_ENV})")
    if writable:
        return (f"refusing to start: --writable on the non-loopback address {host} needs "
                f"authentication; {how}")
    return f"refusing to start: listening on the non-loopback address {host} needs " \
           f"authentication; {how}"


def host_allowed(host_header: str, listen_host: str, auth: Auth) -> bool:
    """Without authentication the dashboard listens on loopback only, and a request must
    name a loopback host: a page of another site whose name was re-pointed at 127.0.0.1
    (DNS rebinding) would otherwise read and use the dashboard."""
    if auth.configured or not is_loopback(listen_host):
        return True
    host = urlsplit(f"//{host_header}").hostname or ""
    return is_loopback(host)


def csrf_refusal(form_token: Optional[str], token: str, origin: Optional[str],
                 referer: Optional[str], host_url: str) -> Optional[str]:
    """Why a POST is refused as cross-site, or None: it must carry the page's token and
    come from a page of this dashboard (Origin, else Referer, of the same scheme://host)."""
    if not form_token or not _same(form_token, token):
        return "missing or wrong CSRF token"
    own = _origin(host_url)
    if origin:
        return None if _origin(origin) == own else f"cross-site request from {origin}"
    if referer:
        return None if _origin(referer) == own else "cross-site request (Referer)"
    return "request without Origin or Referer"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()
