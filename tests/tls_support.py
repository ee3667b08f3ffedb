"""TLS for the tests: certificates made here (a CA, a server certificate for 127.0.0.1 and
localhost, a client certificate, and a second CA that signed none of them), written as PEM
files into a directory of the caller's; and TlsServer, a redis-server with the RMQ module
serving TLS only (`--port 0 --tls-port P`), started and stopped by pid like every test
server (server_support.Server)."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from server_support import Server


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path, key):
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


class Certs:
    """PEM files in `dir`: ca, server_cert/server_key, client_cert/client_key, other_ca."""

    def __init__(self, dir):
        self.dir = Path(dir)
        now = datetime.datetime.now(datetime.timezone.utc)
        self._validity = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        ca_key, ca_cert = self._ca("RMQ test CA")
        self.ca = self._write("ca.pem", ca_cert)
        _, other = self._ca("RMQ other CA")
        self.other_ca = self._write("other-ca.pem", other)
        san = x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                           x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        self.server_cert, self.server_key = self._leaf(
            "server", "127.0.0.1", ca_key, ca_cert, ExtendedKeyUsageOID.SERVER_AUTH, san)
        self.client_cert, self.client_key = self._leaf(
            "client", "rmq-test-client", ca_key, ca_cert, ExtendedKeyUsageOID.CLIENT_AUTH)

    def _write(self, name, cert):
        path = self.dir / name
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return str(path)

    def _builder(self, subject, issuer, key):
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(self._validity[0]).not_valid_after(self._validity[1]))

    def _ca(self, cn):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (self._builder(_name(cn), _name(cn), key)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                             crl_sign=True, content_commitment=False,
                                             key_encipherment=False, data_encipherment=False,
                                             key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .sign(key, hashes.SHA256()))
        return key, cert

    def _leaf(self, name, cn, ca_key, ca_cert, usage, san=None):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (self._builder(_name(cn), ca_cert.subject, key)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                 ca_key.public_key()), critical=False))
        if san is not None:
            b = b.add_extension(san, critical=False)
        cert = b.sign(ca_key, hashes.SHA256())
        key_path = self.dir / f"{name}-key.pem"
        _write_key(key_path, key)
        return self._write(f"{name}.pem", cert), str(key_path)

    def redis_tls_args(self, client_cert=True):
        """The gateway's flags for TLS to Redis with these certificates."""
        args = ["--redis-ca", self.ca]
        if client_cert:
            args += ["--redis-cert", self.client_cert, "--redis-key", self.client_key]
        return args


class TlsServer(Server):
    """A test server on TLS alone: `port` is its TLS port; `auth_clients` is its
    tls-auth-clients (`yes`: a client certificate signed by the CA is required)."""

    def __init__(self, certs, auth_clients="yes", **kw):
        super().__init__(tag="rmq-tls", **kw)
        self.certs = certs
        self.auth_clients = auth_clients

    def argv(self):
        c = self.certs
        return super().argv() + [
            "--port", "0", "--tls-port", str(self.port),
            "--tls-cert-file", c.server_cert, "--tls-key-file", c.server_key,
            "--tls-ca-cert-file", c.ca, "--tls-auth-clients", self.auth_clients]

    @property
    def url(self):
        return f"rediss://127.0.0.1:{self.port}"

    def connect(self, **kw):
        c = self.certs
        return super().connect(ssl=True, ssl_ca_certs=c.ca, ssl_certfile=c.client_cert,
                               ssl_keyfile=c.client_key, **kw)


if __name__ == "__main__":
    # `python3 tests/tls_support.py DIR`: the certificates as files in DIR, for tests in
    # other languages (gateway/test-java's GatewayTlsTest).
    import sys
    Certs(sys.argv[1])
