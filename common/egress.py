"""The one way out of the server to a URL a user typed: backends, Test connection, webhooks.

A researcher types a URL and the server connects to it, from inside the lab's network.
Without a check that lets anyone with a researcher account reach what only the server
can: the database, Redis, a cloud's metadata service at 169.254.169.254, the admin
pages of the machines beside it. So every such request goes through here:

- the host is resolved once and every address checked against the policy: loopback,
  private, link-local, unique-local, multicast, unspecified and reserved addresses,
  and their IPv4-mapped IPv6 forms, are refused unless the operator allows them;
- the connection goes to the address that was checked, never to a second lookup (a
  name that answers a public address to the check and a private one to the connection
  gets the public one);
- the refusal reads the same whatever listens at the address, and comes before any
  packet is sent, so it tells nothing about the ports behind it;
- redirects are not followed (callers make their HTTP clients so): a 3xx is the
  server's answer, and the credentials never go to where it points.

``TOMLAB_EGRESS_ALLOW`` (docs/configuration.md) lists what the operator allows beside
the public internet: host names (as typed in the URL), addresses and networks in CIDR
form, e.g. a lab's own vLLM at ``10.0.4.7`` or ``gpu-box.lab.example``. ``make run``
allows loopback for local development; the test settings do the same.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from functools import lru_cache
from socket import getaddrinfo
from typing import Any
from urllib.parse import urlsplit

import httpx2
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_DEFAULT_PORTS = {"http": 80, "https": 443}
# getaddrinfo answers for one name: more than any real host has.
_MAX_ADDRESSES = 16


class EgressRefused(Exception):
    """The server may not connect to this URL; the message is safe to show a user."""


class Unresolvable(EgressRefused):
    """The URL's host name does not resolve (now): refused when calling, not when saving."""


@dataclass(frozen=True)
class Destination:
    """Where a request will go: the URL's host and port, and the checked address."""

    scheme: str
    host: str
    port: int
    address: IPAddress

    @property
    def pinned_host(self) -> str:
        """The address as a URL host ("[...]" around IPv6)."""
        return f"[{self.address}]" if self.address.version == 6 else str(self.address)


@lru_cache(maxsize=8)
def _parse_allow(entries: tuple[str, ...]) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in entries:
        entry = entry.strip().lower()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry)
    return frozenset(names), tuple(networks)


def allowances() -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    """(host names, networks) the operator allows beside public addresses."""
    return _parse_allow(tuple(getattr(settings, "TOMLAB_EGRESS_ALLOW", ()) or ()))


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_internal(address: IPAddress) -> bool:
    """Whether ``address`` is not a public unicast address (loopback, private, link-local,
    unique-local, multicast, unspecified, reserved, shared, documentation…), judged on
    its IPv4 form when it is an IPv4-mapped IPv6 address."""
    address = _unmapped(address)
    return address.is_multicast or not address.is_global


def address_allowed(address: IPAddress, host: str = "") -> bool:
    names, networks = allowances()
    if host.lower() in names:
        return True
    if not is_internal(address):
        return True
    plain = _unmapped(address)
    return any(plain in network or address in network for network in networks)


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return [literal]
    try:
        infos = getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolvable(f"{host}: the name does not resolve") from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos[:_MAX_ADDRESSES]:
        try:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        except ValueError:
            continue
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Unresolvable(f"{host}: the name does not resolve")
    return addresses


def destination(url: str) -> Destination:
    """Resolve ``url``'s host once and pick an address the policy allows, or raise
    :class:`EgressRefused` saying why (naming the host and the setting, nothing about
    what listens there)."""
    try:
        parts = urlsplit(str(url).strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError as exc:
        raise EgressRefused(f"{url!r} is not a URL the server can call: {exc}") from None
    if scheme not in _DEFAULT_PORTS or not host or port is None:
        raise EgressRefused(f"{url!r} is not an http:// or https:// URL with a host")
    addresses = _resolve(host, port)
    for address in addresses:
        if address_allowed(address, host):
            return Destination(scheme=scheme, host=host, port=port, address=address)
    raise EgressRefused(
        f"{host} is an internal address (loopback, private, link-local or the like), which "
        "this server does not call; its operator can allow it with TOMLAB_EGRESS_ALLOW."
    )


def refusal(url: str) -> str:
    """Why the server may not call ``url`` ("" if it may), for forms and saves: a name
    that does not resolve now passes (a lab's server may be down while it is set up);
    each request checks again."""
    try:
        destination(url)
    except Unresolvable:
        return ""
    except EgressRefused as exc:
        return str(exc)
    return ""


# -- HTTP clients that connect where the check said -----------------------------------------


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """The verifying TLS context of this process's HTTP clients (httpx's defaults: the
    certifi bundle). Built once: loading the CA bundle costs about 20 ms of CPU, and a
    ToMPro run made a backend, so a context, for each of its 220 steps. A context may
    be shared by any number of connections and threads; none of ours changes it."""
    return httpx2.create_ssl_context()


@lru_cache(maxsize=1)
def _stdlib_tls_context() -> ssl.SSLContext:
    """The same for http.client (webhooks): the system's CA store, built once."""
    return ssl.create_default_context()


class PinnedTransport(httpx2.HTTPTransport):
    """An httpx transport that checks each request's URL and connects to the checked
    address, keeping the host name for the ``Host`` header and for TLS (SNI and the
    certificate check)."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        target = destination(str(request.url))
        request.url = request.url.copy_with(host=str(target.address))
        if target.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": target.host}
        return super().handle_request(request)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Destination, **kwargs: Any) -> None:
        super().__init__(target.host, target.port, **kwargs)
        self._address = str(target.address)

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Destination, **kwargs: Any) -> None:
        super().__init__(target.host, target.port, **kwargs)
        self._address = str(target.address)

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def http_connection(url: str, *, timeout: float) -> http.client.HTTPConnection:
    """An ``http.client`` connection to ``url``'s checked address (raises
    :class:`EgressRefused`). It follows no redirect: http.client never does."""
    target = destination(url)
    if target.scheme == "https":
        return _PinnedHTTPSConnection(target, timeout=timeout, context=_stdlib_tls_context())
    return _PinnedHTTPConnection(target, timeout=timeout)
