"""``python -m vehicle_middleware.server tls dev-certs``: certificates for TLS and mutual TLS in
development.

A throwaway certificate authority (``ca.pem``, ``ca.key``), a server
certificate it signs (``server.pem``, ``server.key``; for ``127.0.0.1`` and
``localhost`` unless hosts are given) and, per ``--client NAME``, a client
certificate (``NAME.pem``, ``NAME.key``) whose subject CN and a DNS SAN are
``NAME``: with mutual TLS the middleware takes that name as the app's id
(:func:`vehicle_middleware.server.tls.certificate_names`). Keys are EC P-256, written
unencrypted with mode 0600; nothing is overwritten unless ``--force``.

For development and tests only: a vehicle's certificates come from its
maker's PKI, and ``ca.key`` here can sign anything the middleware would trust.

:func:`make_authority`, :func:`issue_server` and :func:`issue_client` are pure
(PEM bytes in, PEM bytes out); :func:`dev_cert_files` is the whole set by file
name, :func:`write_files` writes it, :func:`main` is the command.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "DEFAULT_DAYS",
    "DEFAULT_HOSTS",
    "DevCertsError",
    "Pem",
    "add_arguments",
    "dev_cert_files",
    "issue_client",
    "issue_server",
    "main",
    "make_authority",
    "write_files",
    "write_private_key",
]

DEFAULT_HOSTS: Final = ("127.0.0.1", "localhost")
DEFAULT_DAYS: Final = 365
_ORGANIZATION: Final = "vehicle_middleware development"
# The middleware's rule for an app id (vehicle_middleware.server.auth.authentication): a client
# certificate
# whose name breaks it names no app. Also keeps NAME a plain file name.
_APP_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)
_RESERVED: Final = {"ca": "CA", "server": "server"}
"""Client names whose files would be the CA's or the server's."""
_BACKDATE: Final = datetime.timedelta(minutes=5)
"""Valid from a little before now: a client whose clock is slightly behind accepts it."""


class DevCertsError(ValueError):
    """The options do not make a usable set (a bad name or host, days below 1)."""


@dataclass(frozen=True, slots=True)
class Pem:
    """A certificate and its private key, as PEM bytes (the key PKCS#8, unencrypted)."""

    cert: bytes
    key: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _check_days(days: int) -> None:
    if days < 1:
        raise DevCertsError(f"--days must be 1 or more, got {days}")


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def make_authority(
    *, days: int = DEFAULT_DAYS, name: str = "vehicle_middleware development CA"
) -> Pem:
    """A new self-signed CA, valid for ``days`` days from now.

    Raises:
        DevCertsError: ``days`` below 1.
    """
    _check_days(days)
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _subject_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
            continue
        except ValueError:
            pass
        labels = host.split(".")
        if (
            not host
            or len(host) > 253
            or not all(re.fullmatch(r"[A-Za-z0-9*_-]{1,63}", x) for x in labels)
        ):
            raise DevCertsError(
                f"--host {host!r}: neither an IP address nor a DNS name (ASCII labels of "
                "letters, digits, '-' or '_', separated by dots)"
            )
        names.append(x509.DNSName(host))
    return names


def _issue(
    ca: Pem,
    cn: str,
    sans: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    days: int,
) -> Pem:
    _check_days(days)
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise DevCertsError("the CA key is not an EC key (not one this module made)")
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    # Not past the CA's own end: a chain is only as valid as its CA.
    end = min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_server(ca: Pem, hosts: Sequence[str] = DEFAULT_HOSTS, *, days: int = DEFAULT_DAYS) -> Pem:
    """A server certificate signed by ``ca`` for ``hosts`` (IP addresses and DNS
    names, each a SAN; the first is the subject CN).

    Raises:
        DevCertsError: no hosts, a host that is neither, ``days`` below 1.
    """
    if not hosts:
        raise DevCertsError("a server certificate needs at least one host")
    return _issue(ca, hosts[0], _subject_names(hosts), ExtendedKeyUsageOID.SERVER_AUTH, days)


def _check_client(name: str) -> None:
    if _APP_ID.fullmatch(name) is None:
        raise DevCertsError(
            f"--client {name!r}: not an app id (1 to 64 characters of [A-Za-z0-9_.-])"
        )
    if name in _RESERVED:
        raise DevCertsError(
            f"--client {name!r}: its files would be the {_RESERVED[name]}'s; pick another name"
        )


def issue_client(ca: Pem, name: str, *, days: int = DEFAULT_DAYS) -> Pem:
    """A client certificate signed by ``ca`` naming app ``name`` (subject CN and a DNS SAN).

    Raises:
        DevCertsError: ``name`` is not an app id, or is ``ca`` or ``server``; ``days`` below 1.
    """
    _check_client(name)
    return _issue(ca, name, [x509.DNSName(name)], ExtendedKeyUsageOID.CLIENT_AUTH, days)


def dev_cert_files(
    hosts: Sequence[str] = DEFAULT_HOSTS, clients: Sequence[str] = (), *, days: int = DEFAULT_DAYS
) -> dict[str, bytes]:
    """The whole set, file name -> PEM bytes: ``ca.pem``, ``ca.key``,
    ``server.pem``, ``server.key``, then ``NAME.pem`` and ``NAME.key`` per client.

    Raises:
        DevCertsError: as :func:`issue_server` and :func:`issue_client`; a client twice.
    """
    _check_days(days)
    for name in clients:
        _check_client(name)  # before any key is made
    if len(set(clients)) != len(clients):
        raise DevCertsError("a --client name is given twice")
    _subject_names(hosts)
    ca = make_authority(days=days)
    server = issue_server(ca, hosts, days=days)
    files = {
        "ca.pem": ca.cert,
        "ca.key": ca.key,
        "server.pem": server.cert,
        "server.key": server.key,
    }
    for name in clients:
        client = issue_client(ca, name, days=days)
        files[f"{name}.pem"] = client.cert
        files[f"{name}.key"] = client.key
    return files


def write_files(out: Path, files: Mapping[str, bytes], *, force: bool = False) -> list[Path]:
    """Write ``files`` into ``out`` (made if missing); ``*.key`` files with mode 0600
    from their creation on. Returns the paths written, in order.

    Raises:
        FileExistsError: a file exists and not ``force``; then nothing is written.
        OSError: a file cannot be written.
    """
    paths = [out / name for name in files]
    existing = [p for p in paths if p.exists() or p.is_symlink()]
    if existing and not force:
        raise FileExistsError(
            f"{', '.join(str(p) for p in existing)} already "
            f"{'exists' if len(existing) == 1 else 'exist'}; nothing written (--force replaces "
            "every file of the set)"
        )
    out.mkdir(parents=True, exist_ok=True)
    for path, data in zip(paths, files.values(), strict=True):
        if path.suffix == ".key":
            write_private_key(path, data)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
    return paths


def write_private_key(path: Path, data: bytes) -> None:
    """Write a private key to ``path`` with mode 0600 from its creation on.

    A file already there is removed first and the key made anew rather than
    written over: an old file's mode (or a link's target) must not decide who
    can read the new key. The repository's ``.gitignore`` ignores ``*.key``,
    ``certs/`` and ``keys/`` (where the docs put them), so a key made in a
    checkout is not committed by mistake.

    Raises:
        OSError: the file cannot be written.
    """
    if path.exists() or path.is_symlink():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tls dev-certs``."""
    parser.add_argument("--out", type=Path, required=True, help="directory (made if missing)")
    parser.add_argument(
        "--host",
        action="append",
        default=None,
        help="a DNS name or IP address the server certificate is for (repeatable; "
        f"default {' and '.join(DEFAULT_HOSTS)})",
    )
    parser.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="NAME",
        help="also a client certificate for app NAME, for mutual TLS: NAME.pem, NAME.key "
        "(repeatable)",
    )
    parser.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help=f"validity (default {DEFAULT_DAYS})"
    )
    parser.add_argument("--force", action="store_true", help="replace existing files")


def main(args: argparse.Namespace) -> int:
    """``tls dev-certs``: make the set, write it, say what was written and how to use it.

    Returns 0, or 2 (with a message on stderr) when the options are bad or a
    file exists without ``--force``.
    """
    out: Path = args.out
    hosts: list[str] = args.host or list(DEFAULT_HOSTS)
    try:
        files = dev_cert_files(hosts, args.client, days=args.days)
        paths = write_files(out, files, force=args.force)
    except (DevCertsError, OSError) as e:
        print(f"middleware tls dev-certs: {e}", file=sys.stderr)
        return 2
    for path in paths:
        note = " (private, mode 0600)" if path.suffix == ".key" else ""
        print(f"wrote {path}{note}")
    print(
        f"server certificate for {', '.join(hosts)}, valid {args.days} days; for development only"
    )
    print(
        f"serve:  --tls-cert {out / 'server.pem'} --tls-key {out / 'server.key'}"
        + (f" --tls-client-ca {out / 'ca.pem'}  (mutual TLS)" if args.client else "")
    )
    for name in args.client:
        print(
            f"app {name}:  --tls-ca {out / 'ca.pem'} --tls-cert {out / (name + '.pem')} "
            f"--tls-key {out / (name + '.key')}"
        )
    if not args.client:
        print(f"clients: --tls-ca {out / 'ca.pem'}")
    return 0
