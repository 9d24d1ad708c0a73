"""A private Dask cluster for an MPI job: per-job TLS credentials, handed over MPI.

Anyone who reaches a scheduler can run code as the job's owner, so by default one rank makes
one credential per job (:func:`offer`: an ECDSA P-256 key and a self-signed certificate, the
job's only CA; ~0.1 ms where ``Security.temporary()``'s RSA takes 100-700 ms) and broadcasts it
(:func:`share`); it is written to a file (mode 0600) only for ``--scheduler-file``. Every
rank's default ``Security()`` then speaks ``tls://`` and demands the job's CA at both ends.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import socket

#: Transports that can carry TLS, and the secure scheme each one becomes.
TLS_SCHEMES = {"tcp": "tls", "tls": "tls"}
#: Roles of distributed's TLS config; one credential serves all three.
ROLES = ("scheduler", "worker", "client")
#: Validity: from a day back (clocks of the job's nodes may disagree) to a year
#: ahead (longer than any wall-clock limit).
NOT_BEFORE = datetime.timedelta(days=1)
NOT_AFTER = datetime.timedelta(days=365)


class SecurityError(Exception):
    """The job's cluster cannot be made private (the message says how to proceed)."""


def available() -> bool:
    """Whether ``cryptography`` (needed to make credentials) is installed; no import."""
    return importlib.util.find_spec("cryptography") is not None


def new_credentials() -> dict[str, str]:
    """``{"cert": PEM, "key": PEM}``: a fresh key and self-signed certificate (its own CA),
    valid for one job."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "daskhpc-mpi-job")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)   # self-signed: the job's CA and its only certificate
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - NOT_BEFORE)
        .not_valid_after(now + NOT_AFTER)
        # distributed turns hostname checks off (peers are IP addresses); the
        # name is only there for tools that want one
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("daskhpc-mpi-job")]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return {
        "cert": cert.public_bytes(serialization.Encoding.PEM).decode(),
        "key": key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode(),
    }


def offer() -> tuple[str, object]:
    """On the rank that makes them: ``("ok", credentials)`` or ``("error", message)``, broadcast
    either way (:func:`share`) so that no rank waits for credentials that never come."""
    try:
        return ("ok", new_credentials())
    except ImportError as e:
        return ("error", (f"a private cluster needs the `cryptography` package ({e}); "
                          "pip install cryptography, or pass --insecure on a network "
                          "secured otherwise"))
    except Exception as e:  # noqa: BLE001 - every rank must hear of it
        return ("error", f"could not make the job's TLS credentials: {type(e).__name__}: {e}")


def share(comm, offered: tuple | None, root: int) -> dict[str, str]:
    """Broadcast what :func:`offer` gave on ``root`` to every rank of ``comm`` (``MPI_Bcast``,
    called once on every rank); SecurityError on every rank if ``root`` could not make them."""
    kind, value = comm.bcast(offered, root=root)
    if kind != "ok":
        raise SecurityError(value)
    return value


def config(creds: dict[str, str]) -> dict:
    """Dask config that makes every default ``Security()`` in this process use ``creds``."""
    out = {"distributed.comm.require-encryption": True,
           "distributed.comm.tls.ca-file": creds["cert"]}
    for role in ROLES:
        out[f"distributed.comm.tls.{role}.cert"] = creds["cert"]
        out[f"distributed.comm.tls.{role}.key"] = creds["key"]
    return out


def security(creds: dict[str, str]):
    """A :class:`distributed.security.Security` for any role, from ``creds``."""
    from distributed.security import Security

    kwargs = {"tls_ca_file": creds["cert"]}
    for role in ROLES:
        kwargs[f"tls_{role}_cert"] = creds["cert"]
        kwargs[f"tls_{role}_key"] = creds["key"]
    return Security(require_encryption=True, **kwargs)


def tls_protocol(protocol: str) -> str:
    """The TLS scheme for ``--protocol`` (``tcp`` -> ``tls``); SecurityError for others
    (``ucx``; ``ws``/``wss`` could carry TLS too but are untested here)."""
    try:
        return TLS_SCHEMES[protocol]
    except KeyError:
        raise SecurityError(
            f"--protocol {protocol} cannot carry the job's TLS credentials: use tcp (it "
            "becomes tls), or add --insecure on a network secured otherwise") from None


# -- the dashboard, on rank 0's loopback by default --------------------------------------

DEFAULT_LINK = "{scheme}://{host}:{port}/status"
LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


def link_dashboard_host(address: str | None) -> None:
    """Make ``Client.dashboard_link`` name the host the dashboard listens on (the scheduler's
    address is wrong for a loopback dashboard); a site's own link template is left alone."""
    import dask.config

    host = (address or "").rpartition(":")[0]
    if host and host != "0.0.0.0" and dask.config.get("distributed.dashboard.link") == DEFAULT_LINK:
        dask.config.set({"distributed.dashboard.link": "{scheme}://" + host + ":{port}/status"})


def tunnel_hint(client, address: str | None) -> str | None:
    """How to reach a dashboard that listens on rank 0's loopback only (else None)."""
    if (address or "").rpartition(":")[0] not in LOOPBACK:
        return None
    node = client.run_on_scheduler(socket.gethostname)
    port = client.scheduler_info(n_workers=0).get("services", {}).get("dashboard")
    return (f"daskhpc.mpi: the dashboard listens on {node}'s loopback only; from your "
            f"machine: ssh -L {port}:localhost:{port} -J <login node> {node}, then open "
            f"http://localhost:{port}/status")


# -- for clients outside the job (--scheduler-file) ------------------------------------

def credentials_path(scheduler_file: str) -> str:
    """Where the job writes its credentials for ``--scheduler-file F``: ``F.tls.pem``
    (where :func:`daskhpc.runtime.scheduler_file_security` looks)."""
    return scheduler_file + ".tls.pem"     # = runtime._connect.CREDENTIALS_SUFFIX


def write_credentials(path: str, creds: dict[str, str]) -> None:
    """Write ``creds`` as one PEM file (key, then certificate) readable by its owner only:
    created with mode 0600 and ``O_EXCL`` under a temporary name, then renamed (a waiting task
    never reads half a file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(creds["key"] + creds["cert"])
    os.replace(tmp, path)


def read_credentials(path: str) -> dict[str, str]:
    """``{"cert": PEM, "key": PEM}`` from a file :func:`write_credentials` wrote."""
    with open(path) as f:
        text = f.read()
    begin_cert = text.find("-----BEGIN CERTIFICATE-----")
    if begin_cert < 0 or "PRIVATE KEY-----" not in text[:begin_cert]:
        raise SecurityError(f"{path}: not a daskhpc credentials file (key, then certificate)")
    return {"key": text[:begin_cert], "cert": text[begin_cert:]}


def load_credentials(path: str):
    """A client ``Security`` from a file :func:`write_credentials` wrote."""
    return security(read_credentials(path))
